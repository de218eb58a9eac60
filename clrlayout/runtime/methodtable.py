"""MethodTables read from the dump, validated structurally, each read once.

A MethodTable pointer taken from the heap is trusted only after the MethodTable it points at passes the
checks the DAC itself makes (plausible BaseSize and flags, a readable parent chain); System.String is
recognised by its shape (component size 2, not an array, BaseSize per profile, parent System.Object whose
parent is null), never by a hard-coded address.
"""

from __future__ import annotations

from dataclasses import dataclass

from construct import ConstructError

from ..dump.addrspace import AddressSpace
from .profiles import Profile
from .structs import ClrStructs

#: largest BaseSize accepted for a class instance (a sanity bound, far above real types)
MAX_BASE_SIZE = 16 * 1024 * 1024


@dataclass(frozen=True)
class MethodTable:
    address: int
    flags: int
    base_size: int
    component_size: int  # 0 unless HasComponentSize
    parent: int
    eeclass_or_canon: int
    num_virtuals: int
    num_interfaces: int
    kind: str  # "string" | "free" | "object" | "array" | "class"

    @property
    def has_component_size(self) -> bool:
        return self.component_size > 0 or bool(self.flags & 0x80000000)

    def object_size(self, num_components: int) -> int:
        return self.base_size + self.component_size * num_components


class MethodTables:
    """A cache of validated MethodTables for one dump and profile."""

    def __init__(self, space: AddressSpace, profile: Profile, limits=None):
        self.space = space
        self.profile = profile
        self.structs = ClrStructs.of(profile)
        self.limits = limits or space.limits
        self._cache: dict[int, MethodTable | None] = {}
        self.string_mt: int | None = None
        self.free_mt: int | None = None
        #: how many valid MethodTables are known (changes only when one is learned)
        self.valid_count = 0
        #: the valid ones' addresses in the order they were learned (a walk's lookup table takes the new ones)
        self.learned: list[int] = []

    def __len__(self) -> int:
        return len(self._cache)

    def known(self) -> dict[int, MethodTable]:
        return {a: mt for a, mt in self._cache.items() if mt is not None}

    def read_raw(self, address: int):
        """The parsed MethodTable struct at ``address`` or None when it is not all in the dump."""
        data = self.space.try_read(address, self.profile.method_table.size)
        if data is None:
            return None
        try:
            return self.structs.method_table.parse(data, address=address)
        except ConstructError:
            return None

    def get(self, address: int) -> MethodTable | None:
        """The MethodTable at ``address`` if it is readable and plausible, else None (cached either way)."""
        if address in self._cache:
            return self._cache[address]
        if len(self._cache) >= self.limits.max_method_tables:
            return None
        with self.space.paused_recording():  # a failed probe reads nothing a result depends on
            mt = self._validate(address)
        if mt is not None:
            self.valid_count += 1
            self.learned.append(address)
            size = self.profile.method_table.size
            self.space.note(address, size)
            if mt.parent and self.space.is_mapped(mt.parent, size):
                self.space.note(mt.parent, size)
        self._cache[address] = mt
        return mt

    def _validate(self, address: int) -> MethodTable | None:
        p = self.profile
        ptr = p.pointer_size
        if address == 0 or address % ptr:
            return None
        raw = self.read_raw(address)
        if raw is None:
            return None
        flags, base = raw.m_dwFlags, raw.m_BaseSize
        comp = raw.component_size
        if raw.has_component_size and comp == 0:
            return None
        if base < p.object.min_object_size // 2 or base > MAX_BASE_SIZE:
            return None
        parent = raw.m_pParentMethodTable
        if parent % ptr:
            return None
        # a parent that is in the dump must be whole; one that is not (triage dumps) cannot be checked
        if parent and self.space.region_at(parent) is not None and not self.space.is_mapped(parent,
                                                                                            p.method_table.size):
            return None
        eeclass = raw.get("m_pEEClass", 0)
        kind = self._classify(raw)
        if kind is None:
            return None
        if not raw.has_component_size and base % ptr:
            return None  # instance sizes are pointer-aligned; strings' (14, 22, 26) are not
        return MethodTable(address, flags, base, comp, parent, eeclass, raw.get("m_wNumVirtuals", 0),
                           raw.get("m_wNumInterfaces", 0), kind)

    def _classify(self, raw) -> str | None:
        p = self.profile
        f = p.method_table.flags
        flags, base = raw.m_dwFlags, raw.m_BaseSize
        array_base = 3 * p.pointer_size  # ArrayBase: MT, length (+ pad on 64-bit), plus the header
        if raw.has_component_size:
            category = flags & f["Category_Array_Mask"]
            if raw.component_size == 1 and raw.m_pParentMethodTable == 0 and raw.get("m_pEEClass", 0) == 0 \
                    and base == array_base:
                return "free"  # g_pFreeObjectMethodTable: zeroed MT with component size 1 (ceemain.cpp)
            if category == f["Category_Array"]:
                return "array"
            if category == 0 and raw.component_size == p.string.component_size and self.looks_like_string(raw):
                return "string"
            if category == 0:
                return "class"  # component size but not an array: only strings (and Utf8String) exist
            return None
        if raw.m_pParentMethodTable == 0 and base == p.object.min_object_size and raw.category == 0:
            return "object"
        return "class"

    def looks_like_string(self, raw, check_base_size: bool = True) -> bool:
        """System.String's shape: BaseSize as the profile says (unless not asked), no references and no
        finalizer, and a parent that is System.Object (no components, no parent of its own)."""
        p = self.profile
        f = p.method_table.flags
        if check_base_size and raw.m_BaseSize != p.string.base_size:
            return False
        if raw.m_dwFlags & (f["ContainsPointers"] | f["HasFinalizer"]):
            return False
        parent = self.read_raw(raw.m_pParentMethodTable) if raw.m_pParentMethodTable else None
        if parent is None or parent.has_component_size or parent.m_pParentMethodTable != 0:
            return False
        return parent.m_BaseSize == p.object.min_object_size

    def is_string_method_table(self, address: int) -> bool:
        mt = self.get(address)
        return mt is not None and mt.kind == "string"
