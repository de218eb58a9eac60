"""The index's arrays are checked by CRC-32 when they are mapped again, two threads at a time for a big index (issue
47, item 3): the same sums as one thread, and a changed byte in any array found."""

from __future__ import annotations

import numpy as np
import pytest

from clrlayout.graph.index import _PARALLEL_BYTES, _crc, _crcs, _read_arrays, _write_arrays


def test_two_threads_sum_as_one(tmp_path):
    rng = np.random.default_rng(47)
    arrays = {"a": rng.integers(0, 1 << 62, _PARALLEL_BYTES // 8, dtype=np.int64),
              "b": rng.integers(0, 1 << 30, 1 << 20, dtype=np.int32)}
    assert sum(a.nbytes for a in arrays.values()) >= _PARALLEL_BYTES  # the threaded path
    assert _crcs(list(arrays.values())) == [_crc(a) for a in arrays.values()]
    spec = _write_arrays(tmp_path, arrays)
    allowed = {"a": ("int64",), "b": ("int32",)}
    assert all(np.array_equal(v, arrays[k]) for k, v in _read_arrays(tmp_path, spec, allowed).items())
    for name in arrays:
        path = tmp_path / f"{name}.npy"
        data = bytearray(path.read_bytes())
        data[-5] ^= 0x10  # one bit of the last element
        path.write_bytes(bytes(data))
        with pytest.raises(ValueError, match=f"{name}: its bytes changed"):
            _read_arrays(tmp_path, spec, allowed)
        data[-5] ^= 0x10
        path.write_bytes(bytes(data))
