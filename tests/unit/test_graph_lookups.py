"""The object graph's lookups on made-up data: a reference's node by its page (graph/lookup.py ``nodes_of``,
against a plain ``searchsorted``), and a collectible type's LoaderAllocator by its loader heap
(graph/collectible.py). Real cores: tests/samples/test_graph.py (against the DAC)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clrlayout.graph.lookup as lookup
from clrlayout.graph.lookup import nodes_of
from clrlayout.graph.collectible import allocators_of_types
from clrlayout.runtime.loaderheaps import LoaderHeapBlock, allocator_span


def _plain(addresses: np.ndarray, values: np.ndarray) -> np.ndarray:
    at = np.searchsorted(addresses, values)
    ok = at < len(addresses)
    ok[ok] = addresses[at[ok]] == values[ok]
    return np.where(ok, at, -1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1 << 20), max_size=300), st.lists(st.integers(0, (1 << 20) + 64), max_size=300),
       st.sampled_from([np.int32, np.int64]))
def test_nodes_of_is_a_search_of_every_address(starts, probes, itype):
    addresses = np.unique(np.array(starts, dtype=np.uint64) * np.uint64(8))
    values = np.array(probes + [int(a) for a in addresses[::3]], dtype=np.uint64) * np.uint64(1)
    got = nodes_of(addresses, values, itype)
    assert got.dtype == itype and (got == _plain(addresses, values)).all()


def test_nodes_of_in_threads_equals_one(monkeypatch):
    """Above the threshold the values are looked up in two halves at once: the same answer as one pass."""
    rng = np.random.default_rng(7)
    addresses = np.unique(rng.integers(0, 1 << 36, 200_000).astype(np.uint64) & ~np.uint64(7))
    values = np.concatenate([addresses[rng.integers(0, len(addresses), 300_000)],
                             rng.integers(0, 1 << 36, 100_000).astype(np.uint64)])
    monkeypatch.setattr(lookup, "_THREADED", 1000)
    monkeypatch.setattr(lookup, "_THREADS", 2)
    threaded = nodes_of(addresses, values, np.int32)
    monkeypatch.setattr(lookup, "_THREADS", 1)
    assert (threaded == nodes_of(addresses, values, np.int32)).all()
    assert (threaded == _plain(addresses, values)).all() and (threaded >= 0).sum() >= 300_000


def test_empty_heap_has_no_nodes():
    assert (nodes_of(np.zeros(0, np.uint64), np.array([8, 0], np.uint64)) == -1).all()


@pytest.mark.parametrize("past", [0x8, 0xa8, allocator_span() - 8, allocator_span(), allocator_span() + 0x100])
def test_allocator_of_a_type_is_the_one_whose_heap_holds_its_method_table(past):
    """The MethodTable's block belongs to a heap whose list word lies ``past`` bytes into a native allocator:
    within the span, that allocator's managed object; past it, none (never a neighbour's)."""
    native, other = 0x5500_0000_1000, 0x5500_0000_0000
    blocks = [LoaderHeapBlock(0x10, 0x7F00_0000_0000, 0x4000, True, native + past),
              LoaderHeapBlock(0x20, 0x7F00_0001_0000, 0x1000, True, 0)]  # a block whose heap is not known
    natives = {native: 0x7E00_0000_0028, other: 0x7E00_0000_0100}
    mts = [0x7F00_0000_0ff8, 0x7F00_0001_0010, 0x7F00_0002_0000]  # in the first block, the second, none
    found = allocators_of_types(mts, blocks, natives, allocator_span())
    assert found == ({0x7F00_0000_0ff8: 0x7E00_0000_0028} if past < allocator_span() else {})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, (1 << 48) - 1), min_size=1, max_size=300), st.sampled_from([1, 3, 1 << 20]))
def test_packed_addresses_unpack_to_themselves(values, chunk):
    """While the dominator tree is made, the addresses are kept in 4 bytes each (graph/objectgraph.py): the
    lower halves, and where each run of the same upper half starts."""
    import clrlayout.graph.objectgraph as objectgraph

    addresses = np.unique(np.array(values, dtype=np.uint64))
    saved, objectgraph._CHUNK = objectgraph._CHUNK, chunk
    try:
        packed = objectgraph.pack_addresses(addresses)
        assert packed[2].dtype == np.uint32 and (objectgraph.unpack_addresses(*packed) == addresses).all()
    finally:
        objectgraph._CHUNK = saved
