#!/usr/bin/env python3
"""Coverage-guided fuzzing of clrlayout with atheris (pip install atheris).

    python fuzz/make_seeds.py CORPUS_DIR
    python fuzz/fuzz_clrlayout.py dump   [libFuzzer options] CORPUS_DIR
    python fuzz/fuzz_clrlayout.py reader [libFuzzer options] CORPUS_DIR
    python fuzz/fuzz_clrlayout.py string [libFuzzer options]

Targets:
- reader: the input is a dump file; it is opened and every reader accessor touched (modules, runtime,
  memory regions and their first bytes, the GC heap's discovery).
- dump: the input is a dump file (seeds: tests/corpus/); it is opened, its runtime and heap found, every
  string decoded (their layouts and hex views rendered), statistics and duplicates gathered.
- string: the input is one string object's bytes (from its header), decoded under every profile; the
  header word decoded; the layout rendered.

Only ClrLayoutError may escape; anything else is a bug and libFuzzer saves the input.  Run with
-timeout=5 -rss_limit_mb=1024 for the bounds the project promises.
"""

from __future__ import annotations

import dataclasses
import sys

import atheris

with atheris.instrument_imports():
    from clrlayout.dump.addrspace import AddressSpace, BytesSource
    from clrlayout.session import open_session
    from clrlayout.errors import ClrLayoutError
    from clrlayout.objects.header import decode_header
    from clrlayout.objects.layout import string_layout
    from clrlayout.limits import DEFAULT_LIMITS, MiB
    from clrlayout.present.hexview import hex_dump
    from clrlayout.present.jsonout import batch_lines
    from clrlayout.runtime.profiles import list_profiles, load_profile
    from clrlayout.heap.segments import find_gc_heap
    from clrlayout.dump import open_source
    from clrlayout.runtime.detect import detect_runtime
    from clrlayout.analyses.stats import DuplicateCollector, StatsCollector
    from clrlayout.objects.strings import decode_string_bytes, object_span

LIMITS = dataclasses.replace(DEFAULT_LIMITS, scan_window=64 * 1024, max_read=16 * MiB, max_string_length=1 << 22)
PROFILES = [load_profile(name, None) for name in list_profiles()]
MAX_STRINGS = 2000


def fuzz_dump(data: bytes) -> None:
    try:
        dump = open_source(BytesSource(data), "<fuzz>", LIMITS)
        with open_session(dump, limits=LIMITS) as a:
            a.info
            stats = StatsCollector(a.profile)
            dups = DuplicateCollector(a.profile, a.dump.memory)
            seen = 0
            for batch in a.iter_batches():
                stats.add(batch)
                dups.add(batch)
                batch_lines(batch)
                for s in batch.objects():
                    if seen < 20:
                        start, size = object_span(a.profile, s.address, s.length, s.large)
                        raw = a.dump.memory.try_read(start, size)
                        hex_dump(string_layout(a.profile, s.length, s, raw, s.large, 60))
                    seen += 1
                if seen >= MAX_STRINGS:
                    break
            stats.finish()
            dups.finish()
    except ClrLayoutError:
        pass


def fuzz_reader(data: bytes) -> None:
    try:
        dump = open_source(BytesSource(data), "<fuzz>", LIMITS)
        for m in dump.modules:
            _ = (m.name, m.end, m.file_version)
        for r in dump.memory.regions[:200]:
            dump.memory.read_available(r.start, 64)
        dump.memory.try_read_pointer(0x1000)
        runtime = detect_runtime(dump)
        find_gc_heap(dump, runtime.module, LIMITS)
    except ClrLayoutError:
        pass


def fuzz_string(data: bytes) -> None:
    if len(data) < 2:
        return
    profile = PROFILES[data[0] % len(PROFILES)]
    body = data[1:]
    address = 0x10000 + profile.object.header_size
    space = AddressSpace(BytesSource(body), [(0x10000, len(body), 0)], profile.pointer_size, limits=LIMITS)
    try:
        from clrlayout.objects.strings import read_string

        s = read_string(space, profile, address)
        decode_header(s.header, profile.header)
        hex_dump(string_layout(profile, s.length, s, space.read(*object_span(profile, address, s.length, False)), False, 60))
    except ClrLayoutError:
        pass
    try:
        decode_string_bytes(profile, address, body)
    except ClrLayoutError:
        pass


def main() -> None:
    targets = {"dump": fuzz_dump, "reader": fuzz_reader, "string": fuzz_string}
    target = sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1] in targets else "dump"
    atheris.Setup(sys.argv, targets[target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
