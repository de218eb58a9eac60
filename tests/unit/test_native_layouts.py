"""glibc malloc's layouts (formats/glibc-malloc.toml) against the shape glibc's own definitions give them, and the
pieces of the native-heap reader that need no core: safe-linking, the build id, other allocators by name."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from clrlayout.errors import NativeHeapNotFound
from clrlayout.native.layout import for_version, layouts
from clrlayout.native.libc import build_id, foreign_allocators
from clrlayout.native.lists import reveal


#: x86-64's offsets as gdb's ``ptype/o`` prints them for glibc 2.36 (Debian 12, libc6-dbg), the 2.35-2.41 layout
GDB_2_36 = {
    "arena": {"mutex": 0, "flags": 4, "have_fastchunks": 8, "fastbins": 16, "top": 96, "last_remainder": 104,
              "bins": 112, "binmap": 2144, "next": 2160, "next_free": 2168, "attached_threads": 2176,
              "system_mem": 2184, "max_system_mem": 2192, "size": 2200},
    "par": {"trim_threshold": 0, "top_pad": 8, "mmap_threshold": 16, "arena_test": 24, "arena_max": 32,
            "thp_pagesize": 40, "hp_pagesize": 48, "hp_flags": 56, "n_mmaps": 60, "n_mmaps_max": 64,
            "max_n_mmaps": 68, "no_dyn_threshold": 72, "mmapped_mem": 80, "max_mmapped_mem": 88, "sbrk_base": 96,
            "tcache_bins": 104, "tcache_max_bytes": 112, "tcache_count": 120, "tcache_unsorted_limit": 128,
            "size": 136},
    "heap_info": {"ar_ptr": 0, "prev": 8, "size": 16, "mprotect_size": 24, "pagesize": 32, "sizeof": 48},
    "tcache": {"counts": 0, "count_size": 2, "entries": 128, "size": 640},
}


def test_x64_2_36_is_what_gdb_says():
    m = for_version((2, 36), "x64")
    assert {k: getattr(m, k) for k in GDB_2_36} == GDB_2_36
    assert for_version((2, 36), "arm64").arena == m.arena and for_version((2, 36), "arm64").word == 8


@pytest.mark.parametrize("layout", [m for arch in ("x64", "x86") for m in layouts(arch)],
                         ids=lambda m: f"{m.arch}-{m.versions}")
def test_each_layout_is_glibcs_struct(layout):
    a, c, w = layout.arena, layout.chunk, layout.word
    # malloc_state: fastbinsY[NFASTBINS], top, last_remainder, bins[NBINS * 2 - 2], binmap[4] (unsigned int), next,
    # next_free, attached_threads, system_mem, max_system_mem: each member where the one before it ends
    assert a["top"] == a["fastbins"] + w * c["nfastbins"] and a["last_remainder"] == a["top"] + w
    assert a["bins"] == a["last_remainder"] + w and a["binmap"] == a["bins"] + w * (2 * c["nbins"] - 2)
    assert a["next"] == a["binmap"] + 16 and a["size"] == a["max_system_mem"] + w
    assert ("have_fastchunks" in a) == (layout.lowest >= (2, 27))
    p = layout.par
    assert p["tcache_bins"] == p["sbrk_base"] + w and p["size"] == p["tcache_unsorted_limit"] + w
    assert ("thp_pagesize" in p) == (layout.lowest >= (2, 35)) == ("pagesize" in layout.heap_info)
    assert (layout.heap_info["sizeof"] + 2 * w) % c["alignment"] == 0  # arena.c's pad
    t = layout.tcache
    assert t["entries"] == t["counts"] + c["tcache_bins"] * t["count_size"] and t["size"] == t["entries"] + w * 64
    assert layout.safe_linking == (layout.lowest >= (2, 32))
    # request2size(MAX_FAST_SIZE) is the last fastbin's size; MINSIZE the first tcache bin's
    fast_max = (80 * w // 4 + w + c["alignment"] - 1) & ~(c["alignment"] - 1)
    assert c["fastbin_first"] + c["fastbin_step"] * (c["nfastbins"] - 1) == fast_max
    assert c["tcache_first"] == c["min_size"] and c["tcache_max_bytes"] == 63 * c["alignment"] + c["min_size"] - w


def test_versions_choose_their_layout():
    assert for_version((2, 36)).versions == "2.35-2.41" and for_version((2, 36), "x86").word == 4 and for_version((2, 31)).versions == "2.30-2.31"
    assert for_version((2, 26)).versions == "2.26" and for_version((2, 25)) is None
    assert for_version((2, 45)).versions == "2.35-2.41"  # newer than the profile: its newest layout
    assert for_version(None) is None


def test_safe_linking_reveals_what_protect_ptr_stored():
    field, target = 0x55555555a2a0, 0x55555555a310
    stored = (field >> 12) ^ target  # PROTECT_PTR (malloc.c, 2.32+)
    assert reveal(stored, field, True) == target and reveal(target, field, False) == target


def test_build_id_of_this_machines_libc():
    path = Path("/usr/lib/x86_64-linux-gnu/libc.so.6")
    if not path.exists():
        pytest.skip("no glibc at Debian's path on this machine")
    head = path.read_bytes()[:4096]
    found = build_id(head)
    assert found is not None and len(found) == 20
    assert build_id(head[:40]) is None and build_id(b"\x7fELF" + bytes(60)) is None


def _dump(paths, fmt="elf-core", arch="x64"):
    mappings = [SimpleNamespace(path=p, start=0x1000 * (i + 1), end=0x1000 * (i + 2), offset=0)
                for i, p in enumerate(paths)]
    return SimpleNamespace(file_mappings=mappings, format=fmt, arch=arch)


def test_other_allocators_are_named():
    from clrlayout.native.arenas import read_native_heap

    assert foreign_allocators(_dump(["/usr/lib/libjemalloc.so.2", "/lib/libc.so.6"])) == \
        ["jemalloc (libjemalloc.so.2)"]
    assert foreign_allocators(_dump(["/usr/lib/x86_64-linux-musl/libc.so"])) == \
        ["musl's malloc (Alpine) (/usr/lib/x86_64-linux-musl/libc.so)"]  # Debian's musl: the link's target
    with pytest.raises(NativeHeapNotFound, match="musl's malloc"):
        read_native_heap(_dump(["/lib/ld-musl-x86_64.so.1", "/app/app"]))
    with pytest.raises(NativeHeapNotFound, match="the Windows heap is not read yet"):
        read_native_heap(_dump([], fmt="minidump"))
    with pytest.raises(NativeHeapNotFound, match="x64, arm64 and x86 cores; this core is arm$"):
        read_native_heap(_dump(["/lib/libc.so.6"], arch="arm"))
