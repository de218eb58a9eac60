"""``AddressSpace.gather``: the values at many addresses read a run at a time — aligned and unaligned, 1 to 8
bytes, across regions, and 0 where a byte is missing — equal to reading each one alone."""

from __future__ import annotations

import random

import numpy as np
import pytest

from clrlayout.dump.addrspace import AddressSpace, BytesSource


@pytest.mark.parametrize("size", [1, 2, 4, 8])
@pytest.mark.parametrize("gap", [0, 16, 4096])
def test_gather_is_each_read_alone(size, gap):
    rng = random.Random(size * 7919 + gap)
    blob = bytes(rng.randrange(256) for _ in range(3 * 8192))
    # two regions with a hole between them, and the second one's end short of its file
    regions = [(0x10000, 8192, 0), (0x10000 + 8192 + 512, 8192, 8192)]
    space = AddressSpace(BytesSource(blob), regions, 8)
    addresses = [rng.randrange(0x10000 - 64, 0x10000 + 8192 + 512 + 8192 + 64) for _ in range(2000)]
    addresses += [0x10000 + 8192 - size // 2, 0x10000 + 8192 + 512 + 8192 - size]  # straddling the hole, the end
    got = space.gather(np.array(addresses, dtype=np.uint64), size, gap)
    for address, value in zip(addresses, got.tolist()):
        data = space.try_read(address, size)
        assert value == (int.from_bytes(data, "little") if data else 0), hex(address)


def test_gather_of_nothing():
    space = AddressSpace(BytesSource(b"\1" * 64), [(0x1000, 64, 0)], 8)
    assert len(space.gather(np.zeros(0, dtype=np.uint64), 8)) == 0
    assert space.gather(np.array([0x1000, 0x1000], dtype=np.uint64), 8).tolist() == [0x0101010101010101] * 2
