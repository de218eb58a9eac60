"""TypeDef -> MethodTable through the runtime Module's own map, as the DAC's ``LookupFieldTypeHandle`` does.

The map's place in the Module (``m_TypeDefToMethodTableMap``) changes with every runtime version, so it is
found, not assumed: the offset within the Module where every MethodTable already known of that module sits
at its TypeDef's RID (``formats/type-system.toml [lookup_map]``).  Found once per dump, on the module that
has the most known types; each answer is a MethodTable that validates and names that RID and image.
"""

from __future__ import annotations


class TypeDefMaps:
    def __init__(self, names, spec: dict, known: dict):
        """``known``: runtime Module address -> {TypeDef RID: MethodTable} of the types already seen."""
        self.names = names
        self.space = names.space
        self.ptr = names.profile.pointer_size
        self.spec = spec
        self.known = known
        self.offset: int | None = None
        self.flags_mask = 3
        self._find()

    def _word(self, data: bytes, at: int) -> int:
        return int.from_bytes(data[at : at + self.ptr], "little")

    def _find(self) -> None:
        s, ptr = self.spec, self.ptr
        if not self.known:
            return
        module, pairs = max(self.known.items(), key=lambda kv: len(kv[1]))
        if len(pairs) < s["min_known"]:
            return
        data = self.space.read_available(module, s["search_bytes"])
        found = []
        for at in range(0, len(data) - 4 * ptr + 1, ptr):
            if all(self._entry(module, at, rid) == mt for rid, mt in pairs.items()):
                found.append(at)
        if len(found) == 1:
            self.offset = found[0]

    def _entry(self, module: int, at: int, rid: int) -> int | None:
        """Entry ``rid`` of the map at ``module + at`` (None: not there)."""
        s, ptr = self.spec, self.ptr
        block = module + at
        index = rid
        for _ in range(s["max_blocks"]):
            head = self.space.try_read(block, 4 * ptr)
            if head is None:
                return None
            table, count = self._word(head, s["table"] * ptr), self._word(head, s["count"] * ptr) & 0xFFFFFFFF
            flags = self._word(head, s["supported_flags"] * ptr)
            if index < count:
                if not table or flags > 0xFF:
                    return None
                v = self.space.try_read(table + index * ptr, ptr)
                return None if v is None else self._word(v, 0) & ~(flags | 3)
            index -= count
            block = self._word(head, s["next"] * ptr)
            if not block:
                return None
        return None

    def method_table(self, module: int, rid: int) -> int | None:
        if self.offset is None or not module:
            return None
        mt = self._entry(module, self.offset, rid)
        if not mt or self.names.mts.get(mt) is None or self.names.token_of(mt) != rid:
            return None
        return mt
