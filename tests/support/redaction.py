"""What ``trim --redact`` must keep and remove, as the tests compare it: a dump's structural answers, and the
values it holds only in its heap."""

from __future__ import annotations

import json

import clrlayout
from tests.support.cli import run
from tests.support.samples import SAMPLES


def json_of(capsys, *args):
    code, text, err = run(capsys, *args, "-q")
    assert code == 0, err
    return text


def managed_retained(text: str) -> dict:
    """``retained --format json`` without its native bytes: a copy ``trim`` wrote keeps no native heap (its values
    are the process's data), so it leaves the column out where the original, whose glibc heap is read, has it."""
    record = json.loads(text)
    for o in record["objects"]:
        o.pop("native_bytes", None)
    return record


def structure(capsys, path) -> dict:
    """What a memory investigation reads of a dump, values left out."""
    answers = {}
    stats = json.loads(json_of(capsys, "stats", path, "--format", "json"))
    answers["stats"] = stats
    lines = [json.loads(line) for line in json_of(capsys, "dump", path, "--format", "jsonl").splitlines()]
    answers["strings"] = [{k: v for k, v in line.items() if k != "value"} for line in lines]
    with clrlayout.open(str(path)) as dump:
        answers["objects"] = [(o.address, o.method_table, o.size, o.aligned_size, o.count, o.generation)
                              for o in dump.runtime.heap.objects()]
    for row in sorted(stats["types"], key=lambda r: -r["total_size"])[:6]:
        record = json.loads(json_of(capsys, "type", path, row["method_table"], "--format", "json"))
        for f in record["static_fields"]:  # a primitive static's value is a value, not structure
            if f.get("storage") == "nongc":
                f.pop("value", None)
        answers[f"type {row['method_table']}"] = record
    memory = json.loads(json_of(capsys, "memory", path, "--format", "json"))
    # the GC's figures, the loader heaps, the GC's bookkeeping and handle tables; but how many of their bytes
    # the dump holds ("dump_bytes"): a figure of the file, which a trim changes
    answers["memory"] = {"gc": memory["gc"], **{k: {f: v for f, v in memory[k].items() if "dump_bytes" not in f}
                                                 for k in ("loader_heaps", "gc_bookkeeping", "gc_handle_tables")}}
    return answers


def heap_only_values(path) -> list[bytes]:
    """The values (strings as UTF-16LE and UTF-8, byte arrays) of at least 8 bytes that the dump holds only
    inside its GC heap: the data of the program, not its metadata, module names or the runtime's own text."""
    with clrlayout.open(str(path)) as dump:
        heap = dump.runtime.heap
        segments = [(s.start - 16, s.end) for s in heap.segments]
        values = set()
        for s in heap.strings():
            value = s.as_string()
            if value and len(value) >= 8:
                values.add(value.encode("utf-16-le", "surrogatepass"))
                if value.isascii() is False:
                    values.add(value.encode("utf-8", "surrogatepass"))
        for obj in heap.objects():
            if obj.type.name == "System.Byte[]" and obj.count >= 8:
                data = dump.memory.read_available(obj.address + 2 * dump.pointer_size, obj.count)
                if len(set(data)) > 2:
                    values.add(bytes(data))
        regions = list(dump.memory.iter_regions())
    raw = path.read_bytes()
    # the file's bytes that hold heap memory; a value is only in the heap if it starts nowhere else
    inside = sorted((r.offset + max(lo, r.start) - r.start, r.offset + min(hi, r.start + r.size) - r.start)
                    for r in regions for lo, hi in segments if max(lo, r.start) < min(hi, r.start + r.size))
    outside, at = [], 0
    for lo, hi in inside:
        if lo > at:
            outside.append((at, lo))
        at = max(at, hi)
    outside.append((at, len(raw)))

    def only_in_heap(value: bytes) -> bool:
        return all(raw.find(value, lo, hi + len(value) - 1) < 0 for lo, hi in outside)

    return [v for v in values if only_in_heap(v)]


def found_in(values: list[bytes], data: bytes) -> list[bytes]:
    """The ``values`` (each of at least 8 bytes) that occur in ``data``: those whose first 8 bytes occur at
    some offset (found with numpy for all values at once), then each of these searched for."""
    import numpy as np

    firsts = np.array([int.from_bytes(v[:8], "little") for v in values], dtype=np.uint64)
    known = np.unique(firsts)
    hits = []
    for k in range(8):  # the 8-byte words at offsets k, k + 8, k + 16, ...
        words = np.frombuffer(data, dtype="<u8", offset=k, count=(len(data) - k) // 8)
        at = np.minimum(np.searchsorted(known, words), len(known) - 1)
        hits.append(words[known[at] == words])
    seen = np.isin(firsts, np.concatenate(hits))
    return [v for v, maybe in zip(values, seen) if maybe and v in data]


class Redacted(dict):
    """Each sample's redacted copy, made when a test first asks for it (the quick loop asks for three)."""

    def __init__(self, folder):
        super().__init__()
        self.folder = folder

    def __missing__(self, name):
        from clrlayout.trim import trim

        out = self.folder / name
        result = trim(str(SAMPLES / name), str(out), redact=True)
        assert result.redacted.objects > 1000 and result.redacted.bytes > 10_000
        self[name] = out  # kept only once it is checked: a failed one is made (and fails) again
        return out
