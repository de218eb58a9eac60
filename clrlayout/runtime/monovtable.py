"""Mono objects start with a MonoVTable*, not a MethodTable*.  ``MonoVTables`` gives the object scan the
interface of :class:`~clrlayout.methodtable.MethodTables` for them: a vtable is plausible when it and its
``klass`` (the vtable's first field) are mapped, pointer-aligned pointers.  Only strings have a known size
(the String vtable is given with --mt: Mono keeps no shape the scan could recognise)."""

from __future__ import annotations

from ..dump.addrspace import AddressSpace
from .methodtable import MethodTable
from .profiles import Profile


class MonoVTables:
    def __init__(self, space: AddressSpace, profile: Profile, limits=None):
        self.space = space
        self.profile = profile
        self.limits = limits or space.limits
        self._plausible: dict[int, bool] = {}
        self.string_mt: int | None = None
        self.free_mt: int | None = None

    def _check(self, address: int) -> bool:
        ptr = self.profile.pointer_size
        if address == 0 or address % ptr:
            return False
        with self.space.paused_recording():
            klass = self.space.try_read_pointer(address)
            ok = bool(klass) and klass % ptr == 0 and self.space.is_mapped(klass, 4 * ptr)
        if ok:
            self.space.note(address, ptr)
        return ok

    def get(self, address: int) -> MethodTable | None:
        if address not in self._plausible:
            if len(self._plausible) >= self.limits.max_method_tables:
                return None
            self._plausible[address] = self._check(address)
        if not self._plausible[address]:
            return None
        if address == self.string_mt:
            s = self.profile.string
            return MethodTable(address, 0, s.base_size, s.component_size, 0, 0, 0, 0, "string")
        return MethodTable(address, 0, 0, 0, 0, 0, 0, 0, "class")  # size unknown

    @property
    def valid_count(self) -> int:
        return sum(self._plausible.values())

    def known(self) -> dict:
        return {a: mt for a in self._plausible if (mt := self.get(a)) is not None and mt.base_size}

    def is_string_method_table(self, address: int) -> bool:
        return address == self.string_mt

    def read_raw(self, address: int):
        return None

    def __len__(self) -> int:
        return len(self._plausible)
