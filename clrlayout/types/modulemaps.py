"""TypeDef -> MethodTable through the runtime Module's own map, as the DAC's ``LookupFieldTypeHandle`` does.

The map's place in the Module (``m_TypeDefToMethodTableMap``) changes with every runtime version, so it is
found, not assumed: the offset within the Module where every MethodTable already known of that module sits
at its TypeDef's RID (``formats/type-system.toml [lookup_map]``).  Found once per dump, on the module that
has the most known types; each answer is a MethodTable that validates and names that RID and image.
"""

from __future__ import annotations

from ..runtime.structs import relative_target
from ..util.bits import BitStream


def _signed32(value: int) -> int:
    """An INT32 from the low 32 bits of ``value`` (the compressed map's RVAs wrap as INT32)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


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
        s, ptr, prejit = self.spec, self.ptr, self.spec.get("prejit")
        block = module + at
        index = rid
        for _ in range(s["max_blocks"]):
            head = self.space.try_read(block, prejit["size"] if prejit else 4 * ptr)
            if head is None:
                return None
            table, count = self._word(head, s["table"] * ptr), self._word(head, s["count"] * ptr) & 0xFFFFFFFF
            flags = self._word(head, s["supported_flags"] * ptr)
            if index < count:
                if flags > 0xFF:
                    return None
                v = self._prejit_entry(block, head, index) if prejit else None
                if v is None and table and not (prejit and self._word(head, prejit["index"])):
                    slot = table + index * ptr
                    word = self.space.try_read(slot, ptr)
                    v = None if word is None else self._word(word, 0)
                    if v is not None and prejit:  # a RelativePointer: from the entry's own address
                        v = relative_target(slot, v, ptr)
                return None if v is None else v & ~(flags | 3)
            index -= count
            block = self._word(head, s["next"] * ptr)
            if not block:
                return None
        return None

    def _prejit_entry(self, block: int, head: bytes, index: int) -> int | None:
        """Row ``index`` of a 2.x map block from its hot items, or from its compressed rows (an NGEN image's
        map); None: neither has it (an uncompressed block's table then does)."""
        p, ptr = self.spec["prejit"], self.ptr
        hot = int.from_bytes(head[p["hot_count"] : p["hot_count"] + 4], "little")
        hot_list = self._word(head, p["hot_list"])
        if hot and hot_list and hot <= p["max_hot_items"]:
            found = self._hot_item(hot_list, hot, index)
            if found is not None:
                at = hot_list + found * p["hot_item_size"] + p["hot_value"]
                value = self.space.try_read(at, ptr)
                return None if value is None else relative_target(at, self._word(value, 0), ptr)
        pindex = self._word(head, p["index"])
        if not pindex:
            return None
        return self._compressed(block, head, pindex, index)

    def _hot_item(self, hot_list: int, count: int, rid: int) -> int | None:
        """The position of ``rid`` in a hot-item list sorted by rid (``FindHotItemValuePtr``: a binary
        search, so a garbage count costs a few reads), or None."""
        size = self.spec["prejit"]["hot_item_size"]
        lo, hi = 0, count
        while lo < hi:
            mid = (lo + hi) // 2
            data = self.space.try_read(hot_list + mid * size, 4)
            if data is None:
                return None
            have = int.from_bytes(data, "little")
            if have == rid:
                return mid
            if have < rid:
                lo = mid + 1
            else:
                hi = mid
        return None

    def _compressed(self, block: int, head: bytes, pindex: int, index: int) -> int:
        """``LookupMapBase::GetValueFromCompressedMap``: the row's RVA from the map's own address (0: null)."""
        p, ptr = self.spec["prejit"], self.ptr

        def dword(off: int) -> int:
            return int.from_bytes(head[off : off + 4], "little")

        entry_bits, rva_bits = dword(p["index_entry_bits"]), p["rva_bits"]
        if not rva_bits < entry_bits <= 64:
            return 0
        entry, sub = divmod(index, p["index_stride"])
        start = entry * entry_bits
        if (start + entry_bits + 7) // 8 > dword(p["index_bytes"]):
            return 0
        data = self.space.try_read(pindex + start // 8, (start % 8 + entry_bits + 7) // 8)
        if data is None:
            return 0
        bits = int.from_bytes(data, "little") >> (start % 8)
        rva = _signed32(bits & 0xFFFFFFFF)
        if sub:
            position = (bits >> rva_bits) & ((1 << (entry_bits - rva_bits)) - 1)
            lengths = head[p["encoding_lengths"] : p["encoding_lengths"] + (1 << p["length_bits"])]
            need = sub * (p["length_bits"] + 1 + 32)
            if (position + need) // 8 > dword(p["table_bytes"]) + 8:
                return 0
            table = self.space.read_available(self._word(head, self.spec["table"] * ptr) + position // 8,
                                              (position % 8 + need + 7) // 8)
            stream = BitStream(table, position % 8)
            for _ in range(sub):
                choice = stream.read(p["length_bits"])
                add = stream.read(1)
                delta = stream.read(lengths[choice]) if choice is not None and choice < len(lengths) else None
                if delta is None:
                    return 0
                rva = _signed32(rva + delta if add else rva - delta)
        return (block + rva) & ((1 << (8 * ptr)) - 1) if rva else 0

    def method_table(self, module: int, rid: int) -> int | None:
        if self.offset is None or not module:
            return None
        mt = self._entry(module, self.offset, rid)
        if not mt or self.names.mts.get(mt) is None or self.names.token_of(mt) != rid:
            return None
        return mt
