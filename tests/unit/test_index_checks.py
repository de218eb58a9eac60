"""The index's arrays are checked by their digest when they are mapped again (issue 47, item 3): a position-weighted
sum of their words, which any changed byte in any array, and any two words that changed places, change; the
arrays read back are those written."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from clrlayout.graph.index import _WORDS, _read_arrays, _write_arrays, digest


def _fletcher(data: bytes) -> str:
    """The digest as its docstring defines it, word by word in Python (the reference the numpy one must equal)."""
    whole = len(data) // 8
    words = [int.from_bytes(data[8 * i : 8 * i + 8], "little") for i in range(whole)]
    plain = sum(words) % (1 << 64)
    weighted = sum((i + 1) * w for i, w in enumerate(words)) % (1 << 64)
    return f"{plain:016x}{weighted:016x}{zlib.crc32(data[whole * 8:]):08x}"


@pytest.mark.parametrize("dtype,count", [("uint64", 3), ("int32", 7), ("uint16", 5), ("uint8", 0), ("bool", 9)])
def test_the_digest_is_its_definition(dtype, count):
    rng = np.random.default_rng(47)
    a = rng.integers(0, 2, count).astype(bool) if dtype == "bool" else \
        rng.integers(0, np.iinfo(dtype).max, count, dtype=dtype, endpoint=True)
    assert digest(a) == _fletcher(a.tobytes())


def test_the_digest_over_chunks_is_the_digest_of_the_whole():
    """Past one chunk (the weights go on from where the chunk before ended): the same as the definition."""
    rng = np.random.default_rng(48)
    a = rng.integers(0, 1 << 63, _WORDS + 123, dtype=np.uint64)
    assert digest(a) == _fletcher(a.tobytes())


def test_moved_and_changed_words_change_it():
    rng = np.random.default_rng(49)
    a = rng.integers(0, 1 << 62, 5000, dtype=np.int64)
    base = digest(a)
    for i, j in ((0, 1), (10, 4000), (4998, 4999)):
        b = a.copy()
        b[[i, j]] = b[[j, i]]
        assert digest(b) != base
    for at in range(0, a.nbytes, 997):
        b = bytearray(a.tobytes())
        b[at] ^= 0x01
        assert digest(np.frombuffer(bytes(b), dtype=np.int64)) != base


def test_a_changed_byte_in_any_array_is_found(tmp_path):
    rng = np.random.default_rng(47)
    arrays = {"a": rng.integers(0, 1 << 62, _WORDS + 5, dtype=np.int64),
              "b": rng.integers(0, 1 << 30, 1001, dtype=np.int32)}
    spec = _write_arrays(tmp_path, arrays)
    allowed = {"a": ("int64",), "b": ("int32",)}
    assert all(np.array_equal(v, arrays[k]) for k, v in _read_arrays(tmp_path, spec, allowed).items())
    for name in arrays:
        path = tmp_path / f"{name}.npy"
        data = bytearray(path.read_bytes())
        for at in (-5, -4003):  # a bit of the last element, of one further in
            data[at] ^= 0x10
            path.write_bytes(bytes(data))
            with pytest.raises(ValueError, match=f"{name}: its bytes changed"):
                _read_arrays(tmp_path, spec, allowed)
            data[at] ^= 0x10
            path.write_bytes(bytes(data))
