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


@pytest.mark.parametrize("layout", layouts(), ids=lambda m: m.versions)
def test_each_layout_is_glibcs_struct(layout):
    a, c = layout.arena, layout.chunk
    # malloc_state: fastbinsY[NFASTBINS], top, last_remainder, bins[NBINS * 2 - 2], binmap[4] (unsigned int), next,
    # next_free, attached_threads, system_mem, max_system_mem: each member where the one before it ends
    assert a["top"] == a["fastbins"] + 8 * c["nfastbins"] and a["last_remainder"] == a["top"] + 8
    assert a["bins"] == a["last_remainder"] + 8 and a["binmap"] == a["bins"] + 8 * (2 * c["nbins"] - 2)
    assert a["next"] == a["binmap"] + 16 and a["size"] == a["max_system_mem"] + 8
    assert ("have_fastchunks" in a) == (layout.lowest >= (2, 27))
    p = layout.par
    assert p["tcache_bins"] == p["sbrk_base"] + 8 and p["size"] == p["tcache_unsorted_limit"] + 8
    assert ("thp_pagesize" in p) == (layout.lowest >= (2, 35)) == ("pagesize" in layout.heap_info)
    t = layout.tcache
    assert t["entries"] == t["counts"] + c["tcache_bins"] * t["count_size"] and t["size"] == t["entries"] + 8 * 64
    assert layout.safe_linking == (layout.lowest >= (2, 32))


def test_versions_choose_their_layout():
    assert for_version((2, 36)).versions == "2.35-2.41" and for_version((2, 31)).versions == "2.30-2.31"
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
    with pytest.raises(NativeHeapNotFound, match="musl's malloc"):
        read_native_heap(_dump(["/lib/ld-musl-x86_64.so.1", "/app/app"]))
    with pytest.raises(NativeHeapNotFound, match="the Windows heap is not read yet"):
        read_native_heap(_dump([], fmt="minidump"))
    with pytest.raises(NativeHeapNotFound, match="x64 cores; this core is arm64"):
        read_native_heap(_dump(["/lib/libc.so.6"], arch="arm64"))
