"""A bit stream read from its lowest bit up, a byte's bits after the one before's: how CoreCLR packs an NGEN
image's EEClass counts (``PackedDWORDFields``) and its compressed TypeDef maps (``BitStreamReader``)."""

from __future__ import annotations


class BitStream:
    def __init__(self, data: bytes, at: int = 0):
        self.value = int.from_bytes(data, "little")
        self.total = 8 * len(data)
        self.at = at

    def read(self, bits: int) -> int | None:
        """The next ``bits`` bits as an unsigned number (None: the bytes end first)."""
        if bits < 0 or self.at + bits > self.total:
            return None
        value = (self.value >> self.at) & ((1 << bits) - 1)
        self.at += bits
        return value
