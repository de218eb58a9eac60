"""The runtime's map of its managed code (its execution manager): which method an instruction pointer is in, where
that method's code starts, and the unwind data that covers the address.  Without the DAC, as the cDAC does it
(dotnet/runtime docs/design/datacontracts/ExecutionManager.md, src/coreclr/vm/codeman.h):

- the **range section map**, a radix tree over the address space (5 levels of 256 entries on 64-bit, the top 7
  bits unused; a level's entries are pointers whose low bit marks collectible code), leads from an address to the
  list of range section fragments of its 128 KiB chunk, and a fragment to its ``RangeSection``;
- **jitted code** (a RangeSection of a code heap): the heap's **nibble map** gives the start of the method (one
  nibble per 32 bytes of code, 1-8: where in the bucket a method starts; .NET 10 also writes a method's start,
  relative, into each map unit its code covers completely), the word before the start points at the method's
  ``RealCodeHeader`` (values up to ``StubCodeBlockLast``: a stub, not a method), which holds its MethodDesc, GC
  info and unwind entries;
- **ReadyToRun code** (a RangeSection of a module's image): the image's RUNTIME_FUNCTION table by binary search,
  the method through the runtime's map of entry points to MethodDescs (a funclet has no entry: its parent, the
  entry before it, does).

The offsets are the contract descriptor's names (``RangeSection.RangeBegin``...): the runtime's own on .NET 9+,
formats/stack-walk.toml's before.  Every read is bounded; where the map's own memory is not in the dump,
:class:`CodeMapUnreadable` says so (whether an address is managed code cannot then be told)."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

#: range section map: levels, bits a level, the highest address bit used (64-bit)
LEVELS, LEVEL_BITS, MAX_BIT = 5, 8, 56
RANGE_FLAG_CODE_HEAP, RANGE_FLAG_RANGE_LIST = 0x02, 0x04
#: fragments followed in one chunk's list; RUNTIME_FUNCTIONs of a method's code header or an image, at the most
MAX_FRAGMENTS, MAX_FUNCTIONS = 4096, 1 << 22
#: nibble map units searched back from an address (a method's code is at most this many 256-byte units long)
MAX_BACK_UNITS = 1 << 16
#: HashMap probes at the most
MAX_PROBES = 1 << 16
RUNTIME_FUNCTION = 12


class CodeMapUnreadable(Exception):
    """The code map's own memory is not in the dump (a trimmed or damaged one): whether an address is managed
    code cannot be told."""


@dataclass(frozen=True)
class CodeInfo:
    """What the code map knows of one instruction pointer in managed code."""

    #: the method's MethodDesc
    method_desc: int
    #: where the method's code starts (its main body; a funclet's IP is inside the same method)
    start: int
    #: the base the unwind entry's offsets are relative to (the range section's start)
    image_base: int
    #: the RUNTIME_FUNCTION that covers the IP: (begin, end, unwind data), relative to ``image_base``
    function: tuple[int, int, int]
    #: the method's GC info (0: unknown); "jit" or "r2r"
    gc_info: int
    kind: str
    #: the IP is in one of the method's funclets (a catch, finally or filter handler), not its main body
    funclet: bool = False


def _after_unwind_data(space, at: int) -> int:
    """Where ReadyToRun puts a method's GC info: right after its x64 UNWIND_INFO, whose size the runtime takes as
    its header, its codes and a personality routine's RVA, which is always there, aligned to 4 bytes
    (ReadyToRunJitManager::GetUnwindDataBlob); 0 where the header is not in the dump."""
    head = space.try_read(at, 4)
    if head is None:
        return 0
    return at + ((4 + 2 * head[2] + 4 + 3) & ~3)


class CodeMap:
    """IP -> :class:`CodeInfo`, for one runtime's execution manager (``layout``: the contract descriptor's types
    and globals, or formats/stack-walk.toml's for the version)."""

    def __init__(self, space, types: dict, globals_: dict, nibble_pointers: bool):
        self.space = space
        self.t = types
        self.g = globals_
        self.nibble_pointers = nibble_pointers  # .NET 10: map units may hold a relative pointer to the method
        self.top = globals_.get("ExecutionManagerCodeRangeMapAddress")
        self._functions: dict[int, list[tuple[int, int, int]]] = {}
        self._cache: dict[int, CodeInfo | None] = {}

    # --- range sections ------------------------------------------------------------------------------------

    def _u32(self, address: int) -> int:
        value = self.space.try_read_u32(address)
        if value is None:
            raise CodeMapUnreadable(f"the runtime's code map at {address:#x} is not in the dump")
        return value

    def _bytes(self, address: int, size: int) -> bytes:
        data = self.space.try_read(address, size)
        if data is None:
            raise CodeMapUnreadable(f"the runtime's code map at {address:#x} is not in the dump")
        return data

    def _ptr(self, address: int) -> int:
        value = self.space.try_read_pointer(address)
        if value is None:
            raise CodeMapUnreadable(f"the runtime's code map at {address:#x} is not in the dump")
        return value

    def range_section(self, ip: int) -> int | None:
        """The RangeSection whose range holds ``ip`` (None: none)."""
        if "ExecutionManagerCodeRangeList" in self.g:
            return self._listed_section(ip)
        level_map = self.top + self.t["RangeSectionMap"]["TopLevelData"]
        bits = ip >> (MAX_BIT + 1 - LEVELS * LEVEL_BITS)
        for level in range(LEVELS, 0, -1):
            index = (bits >> ((level - 1) * LEVEL_BITS)) & 0xFF
            value = self._ptr(level_map + 8 * index)
            if not value:
                return None
            if level == 1:
                fragment = value & ~1
                break
            level_map = value & ~1
        frag_t, rs_t = self.t["RangeSectionFragment"], self.t["RangeSection"]
        for _ in range(MAX_FRAGMENTS):
            if not fragment:
                return None
            begin, end = self._ptr(fragment + frag_t["RangeBegin"]), self._ptr(fragment + frag_t["RangeEndOpen"])
            if begin <= ip < end:
                section = self._ptr(fragment + frag_t["RangeSection"])
                if not section or self._ptr(section + rs_t["NextForDelete"]):
                    return None
                return section
            fragment = (self._ptr(fragment + frag_t["Next"]) or 0) & ~1
        return None

    def _listed_section(self, ip: int) -> int | None:
        """Before .NET 8: the runtime's RangeSections are a list (ExecutionManager::m_CodeRangeList), sorted by
        address, from the highest."""
        rs = self.t["RangeSection"]
        section = self._ptr(self.g["ExecutionManagerCodeRangeList"])
        for _ in range(MAX_FRAGMENTS):
            if not section:
                return None
            if self._ptr(section + rs["RangeBegin"]) <= ip < self._ptr(section + rs["RangeEndOpen"]):
                return section
            section = self._ptr(section + rs["Next"])
        return None

    # --- the lookup --------------------------------------------------------------------------------------

    def find(self, ip: int) -> CodeInfo | None:
        """The managed method ``ip`` is in, or None (native code, or a stub).

        Raises:
            CodeMapUnreadable: the map's memory that would tell is not in the dump.
        """
        if ip in self._cache:
            return self._cache[ip]
        info = None
        section = self.range_section(ip) if ip else None
        if section is not None:
            rs = self.t["RangeSection"]
            flags = self._u32(section + rs["Flags"]) or 0
            base = self._ptr(section + rs["RangeBegin"]) or 0
            if "HeapListOrModule" in rs:  # before .NET 8: one field, the flags say which
                either = self._ptr(section + rs["HeapListOrModule"])
                r2r = either if flags & rs["ReadyToRunFlag"] else 0
            else:
                r2r = self._ptr(section + rs["R2RModule"])
            if r2r:
                info = self._ready_to_run(r2r, base, ip)
            elif flags & RANGE_FLAG_CODE_HEAP and not flags & RANGE_FLAG_RANGE_LIST:
                info = self._jitted(section, base, ip)
        if len(self._cache) < 1 << 16:
            self._cache[ip] = info
        return info

    def _jitted(self, section: int, base: int, ip: int) -> CodeInfo | None:
        rs = self.t["RangeSection"]
        heap = self._ptr(section + rs.get("HeapList", rs.get("HeapListOrModule")))
        if not heap:
            return None
        h = self.t["CodeHeapListNode"]
        start, end = self._ptr(heap + h["StartAddress"]), self._ptr(heap + h["EndAddress"])
        map_base, header_map = self._ptr(heap + h["MapBase"]), self._ptr(heap + h["HeaderMap"])
        if not start <= ip <= end:
            return None
        code = self._method_start(map_base, header_map, ip)
        if code is None or code > ip:
            return None
        header = self._ptr(code - 8)
        if header <= int(self.g.get("StubCodeBlockLast", 0xF)):
            return None  # a stub's code block
        r = self.t["RealCodeHeader"]
        md, gc = self._ptr(header + r["MethodDesc"]), self._ptr(header + r["GCInfo"])
        count = self._u32(header + r["NumUnwindInfos"])
        if not md or count > MAX_FUNCTIONS:
            return None
        table = self._bytes(header + r["UnwindInfos"], count * RUNTIME_FUNCTION)
        rel = ip - base
        for i in range(count):
            b, e, u = (int.from_bytes(table[i * 12 + k : i * 12 + k + 4], "little") for k in (0, 4, 8))
            if b <= rel < e:  # the first entry is the method's body, the others its funclets
                return CodeInfo(md, code, base, (b, e, u), gc or 0, "jit", funclet=i > 0)
        return None

    def _method_start(self, map_base: int, header_map: int, ip: int) -> int | None:
        """The start of the method whose code holds ``ip``, by the nibble map (None: no method starts before it
        within the search's bound)."""
        rel = ip - map_base
        index, want = rel >> 5, ((rel & 31) >> 2) + 1
        unit_at = index >> 3
        unit = self._u32(header_map + 4 * unit_at)
        if self.nibble_pointers and (unit & 0xF) > 8:
            return map_base + (unit & ~0xF) + (((unit & 0xF) - 9) << 2)
        # this unit's nibbles from ``index`` down, then earlier units
        pos = index & 7
        nibble = (unit >> (28 - 4 * pos)) & 0xF
        if nibble and nibble <= want:
            return map_base + (index << 5) + ((nibble - 1) << 2)
        for p in range(pos - 1, -1, -1):
            nibble = (unit >> (28 - 4 * p)) & 0xF
            if nibble:
                return map_base + (((unit_at << 3) + p) << 5) + ((nibble - 1) << 2)
        for back in range(1, MAX_BACK_UNITS):
            at = unit_at - back
            if at < 0:
                return None
            unit = self._u32(header_map + 4 * at)
            if not unit:
                if self.nibble_pointers:
                    return None  # .NET 10 writes a pointer into every unit a method covers: none, no method
                continue
            if self.nibble_pointers and (unit & 0xF) > 8:
                return map_base + (unit & ~0xF) + (((unit & 0xF) - 9) << 2)
            for p in range(7, -1, -1):
                nibble = (unit >> (28 - 4 * p)) & 0xF
                if nibble:
                    return map_base + (((at << 3) + p) << 5) + ((nibble - 1) << 2)
        return None

    def _ready_to_run(self, module: int, base: int, ip: int) -> CodeInfo | None:
        info = self._ptr(module + self.t["Module"]["ReadyToRunInfo"])
        if not info:
            return None
        functions = self._runtime_functions(info)
        rel = ip - base
        i = bisect_right(functions, (rel, 0xFFFFFFFF, 0xFFFFFFFF)) - 1
        if i < 0 or not functions[i][0] <= rel < functions[i][1]:
            return None
        own = functions[i]
        j, md = i, None
        while j >= 0 and i - j < 256:  # a funclet has no entry point of its own: its method's entry precedes it
            md = self._method_desc_at(info, base + functions[j][0])
            if md:
                break
            j -= 1
        if not md:
            return None
        # the GC info follows the method's own unwind data (its main body's: a funclet shares its method's)
        unwind_data = base + functions[j][2]
        return CodeInfo(md, base + functions[j][0], base, own, _after_unwind_data(self.space, unwind_data), "r2r",
                        funclet=j != i)

    def _runtime_functions(self, info: int) -> list[tuple[int, int, int]]:
        if info not in self._functions:
            r = self.t["ReadyToRunInfo"]
            at, count = self._ptr(info + r["RuntimeFunctions"]), self._u32(info + r["NumRuntimeFunctions"])
            rows: list[tuple[int, int, int]] = []
            if at and count and count <= MAX_FUNCTIONS:
                data = self._bytes(at, count * RUNTIME_FUNCTION)
                import numpy as np

                table = np.frombuffer(data[: len(data) // 12 * 12], dtype="<u4").reshape(-1, 3)
                rows = [tuple(r) for r in table.tolist()]
                rows.sort()
            self._functions[info] = rows
        return self._functions[info]

    def _method_desc_at(self, info: int, entry: int) -> int | None:
        """The runtime's EntryPointToMethodDescMap (a PtrHashMap: values stored shifted right once) at ``entry``."""
        buckets = self._ptr(info + self.t["ReadyToRunInfo"]["EntryPointToMethodDescMap"]
                            + self.t["HashMap"]["Buckets"])
        if not buckets:
            return None
        size = self._u32(buckets)
        bucket_size = self.t["Bucket"]["!"]
        keys_at, values_at = self.t["Bucket"]["Keys"], self.t["Bucket"]["Values"]
        if size < 2:
            return None
        mask = int(self.g.get("HashMapValueMask", (1 << 63) - 1))
        key = entry if entry > 1 else entry + 100
        seed, step = (key >> 2) & 0xFFFFFFFF, 1 + (((key >> 5) & 0xFFFFFFFF) + 1) % (size - 1)
        slots = (values_at - keys_at) // 8
        for _ in range(min(size, MAX_PROBES)):
            bucket = buckets + bucket_size * (1 + seed % size)
            raw = self._bytes(bucket, bucket_size)
            keys = [int.from_bytes(raw[keys_at + 8 * s : keys_at + 8 * s + 8], "little") for s in range(slots)]
            values = [int.from_bytes(raw[values_at + 8 * s : values_at + 8 * s + 8], "little")
                      for s in range(slots)]
            for k, v in zip(keys, values):
                if k == key:
                    return (v & mask) << 1
            if not values[0] & ~mask:
                return None  # no collision here: the key is not in the map
            seed = (seed + step) & 0xFFFFFFFF
        return None
