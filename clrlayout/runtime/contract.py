"""The contract descriptor of .NET 9+: the runtime's own account of its layouts, and the profile checked against it.

A runtime of .NET 9 or later exports ``DotNetRuntimeContractDescriptor`` (``formats/contract-descriptor.toml``
has its layout and sources): a magic, flags, a JSON text of type sizes, field offsets and globals, and an
array of pointers (the "pointer data") that indirect globals index; an indirect global is the address of
one of the runtime's variables (``StringMethodTable`` -> ``&g_pStringClass``).

Where its bytes are: the dump's copy of the runtime module when it holds them (full dumps; heap dumps of
.NET 10.0.x leave the runtime's data pages out), else the runtime's file on this machine when it is the
file the dump mapped (the same first page): the structure at its exported symbol, its pointers as the
image's relocations set them, the JSON at its address.  The variables an indirect global points at are the
process's data: only a dump has them.

Reading it needs neither the DAC nor symbols.  What it says is checked against the layout profile
(:func:`check_layouts`); clrlayout keeps using its profiles (verified against real dumps) and reports any
value on which the runtime disagrees with them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from dataclasses import dataclass, field

from construct import ConstructError, Int32ul, Int64ul, Struct

from ..dump import DumpFile, Module
from ..formats import load as load_format
from .image import same_file


@functools.cache
def descriptor_data(directory: str | None = None) -> dict:
    return load_format("contract-descriptor", directory)


@dataclass(frozen=True)
class ContractDescriptor:
    """What the runtime's contract descriptor says (types, globals, contracts) and where it was read."""

    address: int
    #: where its bytes came from: "the dump", "<path> on this machine", or both
    where: str
    pointer_size: int
    json_bytes: int
    version: int | None
    baseline: str | None
    #: type name -> {"!": size (when given), field name -> offset}
    types: dict
    #: global name -> a number or a string; an indirect global's value is the address its pointer data holds
    globals: dict
    #: the names of the globals that are addresses of runtime variables (indirect globals)
    indirect: frozenset = frozenset()
    contracts: dict = field(default_factory=dict)

    def value(self, ref: str) -> int | str | None:
        """``Type.Field`` (an offset), ``Type.!`` (a size) or ``globals.Name``; None where it says nothing."""
        kind, _, name = ref.partition(".")
        if kind == "globals":
            return self.globals.get(name)
        return self.types.get(kind, {}).get(name)


# --- finding and reading ---------------------------------------------------------------------------------


class _ModuleBytes:
    """The runtime module's bytes at their addresses in the process: the dump's copy, else the module's file
    on this machine (with its pointers relocated as the loader relocated them)."""

    def __init__(self, dump: DumpFile, module: Module, search: list | tuple = ()):
        self.dump = dump
        self.space = dump.memory
        self.module = module
        self.search = search
        self.ptr = dump.pointer_size
        self.used: set[str] = set()
        self._file = None

    @property
    def file(self):
        if self._file is None:
            self._file = _ImageFile.open(self.dump, self.module, self.search) or False
        return self._file or None

    def read(self, address: int, size: int) -> bytes | None:
        return self._take(address, size, "read", bytes)

    def pointer(self, address: int) -> int | None:
        """A pointer as the process holds it (a file's pointers relocated as the loader relocated them)."""
        return self._take(address, self.ptr, "pointer", lambda data: int.from_bytes(data, "little"))

    def _take(self, address: int, size: int, method: str, decode):
        data = self.space.try_read(address, size)
        if data is not None:
            self.space.note(address, size)  # trim keeps what a result rests on
            self.used.add("the dump")
            return decode(data)
        value = self.from_file(method, address, size) if self.file is not None else None
        if value is not None:
            self.used.add(f"{self.file.path} on this machine")
        return value

    def from_file(self, method: str, *args):
        """A method of the module's file; None, and the file set aside, when the file turns out unreadable."""
        try:
            return getattr(self.file, method)(*args)
        except Exception:
            self.close()
            self._file = False
            return None

    def close(self) -> None:
        if self._file:
            self._file.close()


class _ImageFile:
    """A runtime image file (ELF or PE) read at the addresses it is loaded at in the dumped process."""

    def __init__(self, f, module: Module):
        self.f = f
        self.path = f.name
        self.module = module
        self.size = os.fstat(f.fileno()).st_size

    @staticmethod
    def open(dump: DumpFile, module: Module, search=()) -> _ImageFile | None:
        """The module's file: at the path the dump names, else in a ``search`` directory; the dump's (same headers)."""
        candidates = [module.path] + [os.path.join(d, module.name) for d in search]
        path = next((p for p in candidates if p and same_file(dump, module, p)), None)
        if path is None:
            return None
        try:
            f = open(path, "rb")
        except OSError:
            return None
        try:
            head = f.read(4)
            f.seek(0)
            cls = _ElfFile if head == b"\x7fELF" else _PeFile if head[:2] == b"MZ" else None
            image = cls(f, module) if cls else None
            if image is not None and image.ok:
                return image
        except Exception:
            pass
        f.close()
        return None

    def close(self) -> None:
        self.f.close()

    def _pread(self, offset: int, size: int) -> bytes | None:
        if offset < 0 or offset + size > self.size:
            return None
        data = os.pread(self.f.fileno(), size, offset)
        return data if len(data) == size else None


#: e_machine -> its R_*_RELATIVE relocation type
RELATIVE = {"EM_X86_64": 8, "EM_AARCH64": 1027, "EM_386": 8, "EM_ARM": 23}


class _ElfFile(_ImageFile):
    """A shared object or executable: PT_LOAD segments for addresses, ``.dynsym`` for exports, RELA relative
    relocations for the pointers in its data."""

    def __init__(self, f, module: Module):
        from elftools.elf.elffile import ELFFile

        super().__init__(f, module)
        self.elf = ELFFile(f)
        loads = [s.header for s in self.elf.iter_segments() if s.header.p_type == "PT_LOAD"]
        self.ok = bool(loads)
        if not self.ok:
            return
        self.loads = [(h.p_vaddr, h.p_offset, h.p_filesz) for h in loads]
        self.bias = module.base - (min(h.p_vaddr for h in loads) & ~0xFFF)
        self._relocations = None
        self._rel = False  # the file has REL relocations: a relocated word holds its addend

    def read(self, address: int, size: int) -> bytes | None:
        vaddr = address - self.bias
        for start, offset, filesz in self.loads:
            if start <= vaddr and vaddr + size <= start + filesz:
                return self._pread(offset + vaddr - start, size)
        return None

    def export(self, name: str) -> int | None:
        """A dynamic symbol's address: through the symbol hash table (one lookup) where the file has one."""
        for table in (".gnu.hash", ".hash"):
            section = self.elf.get_section_by_name(table)
            if section is not None and hasattr(section, "get_symbol"):
                symbol = section.get_symbol(name)
                return self.bias + symbol["st_value"] if symbol else None
        dynsym = self.elf.get_section_by_name(".dynsym")
        symbols = dynsym.get_symbol_by_name(name) if dynsym is not None else None
        return self.bias + symbols[0]["st_value"] if symbols else None

    def pointer(self, address: int, size: int) -> int | None:
        raw = self.read(address, size)
        if raw is None:
            return None
        addend = self.relocations().get(address - self.bias)
        if addend is not None:
            return self.bias + addend
        value = int.from_bytes(raw, "little")
        return self.bias + value if value and self._rel else value

    def relocations(self) -> dict[int, int]:
        """Relative relocations: the place (a virtual address of the file) -> its addend."""
        if self._relocations is None:
            import numpy as np

            self._relocations = {}
            relative = RELATIVE.get(self.elf.header.e_machine)
            is64 = self.elf.elfclass == 64
            for section in self.elf.iter_sections():
                if section.header.sh_type == "SHT_REL":
                    self._rel = True  # REL: the addend is the word in place
                if section.header.sh_type != "SHT_RELA" or relative is None:
                    continue
                data = section.data()
                dtype = np.dtype([("offset", "<u8"), ("info", "<u8"), ("addend", "<i8")]) if is64 else \
                    np.dtype([("offset", "<u4"), ("info", "<u4"), ("addend", "<i4")])
                rows = np.frombuffer(data, dtype=dtype, count=len(data) // dtype.itemsize)
                # a relocation's type is the low 32 bits of r_info (64-bit) or its low byte (32-bit)
                kind = rows["info"] & (0xFFFFFFFF if is64 else 0xFF)
                rows = rows[kind == relative]
                self._relocations.update(zip(rows["offset"].tolist(), rows["addend"].tolist()))
        return self._relocations


class _PeFile(_ImageFile):
    """A PE image: its sections for addresses, its export directory, its preferred base for pointers."""

    def __init__(self, f, module: Module):
        import pefile

        super().__init__(f, module)
        self.pe = pefile.PE(name=f.name, fast_load=True)  # mapped, not read
        self.ok = True

    def close(self) -> None:
        self.pe.close()
        super().close()

    def read(self, address: int, size: int) -> bytes | None:
        rva = address - self.module.base
        try:
            offset = self.pe.get_offset_from_rva(rva)
        except Exception:
            return None
        return self._pread(offset, size) if offset is not None else None

    def export(self, name: str) -> int | None:
        import pefile

        self.pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"]])
        exports = getattr(self.pe, "DIRECTORY_ENTRY_EXPORT", None)
        for symbol in getattr(exports, "symbols", []):
            if symbol.name == name.encode():
                return self.module.base + symbol.address
        return None

    def pointer(self, address: int, size: int) -> int | None:
        raw = self.read(address, size)
        if raw is None:
            return None
        value = int.from_bytes(raw, "little")
        return value - self.pe.OPTIONAL_HEADER.ImageBase + self.module.base if value else 0


def _header_struct(fields: list, pointer_size: int) -> Struct:
    types = {"uint32": Int32ul, "uint64": Int64ul, "pointer": Int64ul if pointer_size == 8 else Int32ul}
    return Struct(*[name / types[kind] for name, kind in fields])


def find_contract_descriptor(dump: DumpFile, module: Module | None, search: list | tuple = (),
                             directory: str | None = None) -> ContractDescriptor | str:
    """The runtime's contract descriptor, or a sentence saying why there is none.  ``search``: directories
    where the runtime's file may be when it is not at the path the dump names (``--assemblies``)."""
    if module is None:
        return "no runtime module"
    spec = descriptor_data(directory)["descriptor"]
    header = _header_struct(spec["fields"], dump.pointer_size)
    image = _ModuleBytes(dump, module, search)
    try:
        address = _scan_dump(dump, module, spec, header)
        if address is None:
            if image.file is None:
                where = (f"nor in assemblies={','.join(search)}" if search else
                         "(give its folder as assemblies=DIR)")
                return (f"not in the dump, and {module.path or module.name} (which exports it from .NET 9 on) "
                        f"is not on this machine {where}")
            address = image.from_file("export", spec["symbol"])
            if address is None:
                return f"{module.name} does not export {spec['symbol']} (.NET 9 and later do)"
        return _read(image, address, spec, header, dump.pointer_size)
    finally:
        image.close()


def _scan_dump(dump: DumpFile, module: Module, spec: dict, header: Struct) -> int | None:
    """The descriptor in the dump's copy of the module: its magic, pointer-aligned, with valid flags."""
    magic = spec["magic"].to_bytes(8, "little")
    for at, data in dump.memory.iter_windows(module.base, module.end, record=False):
        i = data.find(magic)
        while i >= 0:
            address = at + i
            if address % dump.pointer_size == 0 and len(data) - i >= header.sizeof():
                flags = int.from_bytes(data[i + 8 : i + 12], "little")
                if _flags_ok(flags, spec, dump.pointer_size):
                    return address
            i = data.find(magic, i + 1)
    return None


def _flags_ok(flags: int, spec: dict, pointer_size: int) -> bool:
    return bool(flags & spec["flag_valid"]) and bool(flags & spec["flag_pointer_size_4"]) == (pointer_size == 4)


def _read(image: _ModuleBytes, address: int, spec: dict, header: Struct, pointer_size: int) \
        -> ContractDescriptor | str:
    raw = image.read(address, header.sizeof())
    if raw is None:
        return f"its {header.sizeof()} bytes at {address:#x} are neither in the dump nor in the runtime's file"
    try:
        h = header.parse(raw)
    except ConstructError as e:  # pragma: no cover -- a buffer of the struct's size always parses
        return f"unreadable at {address:#x}: {e}"
    if h.magic != spec["magic"] or not _flags_ok(h.flags, spec, pointer_size):
        return f"no descriptor at {address:#x} (magic {h.magic:#x}, flags {h.flags:#x})"
    at, positions = 0, {}
    for sub in header.subcons:
        positions[sub.name] = at
        at += sub.sizeof()
    # the pointers are read again through the image: in a file, only its relocations give their values
    text_at = image.pointer(address + positions["descriptor"])
    data_at = image.pointer(address + positions["pointer_data"])
    if not 0 < h.descriptor_size <= spec["max_descriptor_bytes"]:
        return f"its JSON is {h.descriptor_size:,} bytes (at most {spec['max_descriptor_bytes']:,} are read)"
    if h.pointer_data_count > spec["max_pointer_data"]:
        return f"{h.pointer_data_count:,} pointer data entries (at most {spec['max_pointer_data']:,} are read)"
    text = image.read(text_at, h.descriptor_size) if text_at else None
    if text is None:
        return f"its JSON ({h.descriptor_size:,} bytes at {text_at or 0:#x}) is not in the dump or the runtime's file"
    pointer_data = []
    for i in range(h.pointer_data_count):
        value = image.pointer(data_at + i * pointer_size) if data_at else None
        pointer_data.append(value)
    parsed = parse_descriptor(text, pointer_data)
    if isinstance(parsed, str):
        return parsed
    where = " and ".join(sorted(image.used, key=lambda w: w != "the dump"))
    return dataclasses.replace(parsed, address=address, where=where, pointer_size=pointer_size)


# --- the JSON ----------------------------------------------------------------------------------------------


def _number(value) -> int | None:
    """A descriptor number: an integer, or a string of one (decimal or 0x-hex)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return None
    return None


def parse_descriptor(text: bytes, pointer_data: list) -> ContractDescriptor | str:
    """The compact JSON of a descriptor (docs/design/datacontracts/data_descriptor.md), its indirect globals
    resolved through ``pointer_data``; a sentence when it is not one."""
    try:
        doc = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return f"its JSON does not parse ({type(e).__name__}: {str(e)[:80]})"
    if not isinstance(doc, dict) or not isinstance(doc.get("types", {}), dict) \
            or not isinstance(doc.get("globals", {}), dict):
        return "its JSON is not a data descriptor (no types and globals tables)"
    types = {}
    for name, fields in doc.get("types", {}).items():
        if not isinstance(fields, dict):
            continue
        entry = {}
        for fname, value in fields.items():
            number = _number(value[0] if isinstance(value, list) and value else value)
            if number is not None:
                entry[fname] = number
        types[name] = entry
    values, indirect = {}, set()
    for name, value in doc.get("globals", {}).items():
        kind = None
        if isinstance(value, list) and len(value) == 2 and isinstance(value[1], str):
            value, kind = value
        if isinstance(value, list) and len(value) == 1:  # [index]: the value is pointer_data[index]
            index = _number(value[0])
            if index is not None and 0 <= index < len(pointer_data) and pointer_data[index] is not None:
                values[name] = pointer_data[index]
                indirect.add(name)
            continue
        if kind == "string" and isinstance(value, str):
            values[name] = value
            continue
        number = _number(value)
        if number is not None:
            values[name] = number
    contracts = doc.get("contracts") if isinstance(doc.get("contracts"), dict) else {}
    version = doc.get("version") if isinstance(doc.get("version"), int) else None
    baseline = doc.get("baseline") if isinstance(doc.get("baseline"), str) else None
    return ContractDescriptor(0, "", 0, len(text), version, baseline, types, values, frozenset(indirect),
                              {k: v for k, v in contracts.items() if isinstance(v, int)})


def method_table_variables(descriptor: ContractDescriptor, space, directory: str | None = None) -> dict:
    """The runtime variables the descriptor's MethodTable globals point at (``[method_tables]`` of the data
    file): name -> (what clrlayout should find there, the MethodTable the variable holds or None when the
    dump lacks it)."""
    out = {}
    for name, expected in descriptor_data(directory)["method_tables"].items():
        variable = descriptor.globals.get(name) if name in descriptor.indirect else None
        if variable is not None:
            mt = space.try_read_pointer(variable)
            if mt is not None:
                space.note(variable, descriptor.pointer_size)
            out[name] = (expected, mt)
    return out


# --- checking the layouts against it -------------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    descriptor: str  # "String.m_StringLength"
    says: int | str
    layout: str  # "profile coreclr-x64 (10.0.0): string.length_offset"
    expected: int | str

    def __str__(self) -> str:
        return (f"the runtime's contract descriptor says {self.descriptor} = {self.says}, but {self.layout} "
                f"= {self.expected} (the profile's value is used)")


@dataclass
class CheckResult:
    checked: list = field(default_factory=list)  # descriptor references that agree
    mismatches: list = field(default_factory=list)
    #: checks whose value the descriptor does not give (older descriptors have fewer types)
    not_described: list = field(default_factory=list)


def _resolve(obj, key: str):
    """A dotted key of a profile or layout: attributes of dataclasses, keys of dicts; a field's offset."""
    for part in key.split("."):
        if obj is None:
            return None
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part, None)
    offset = getattr(obj, "offset", None)
    return offset if offset is not None and not isinstance(obj, (int, str)) else obj


def check_layouts(descriptor: ContractDescriptor, layouts: dict, labels: dict,
                  directory: str | None = None) -> CheckResult:
    """Each ``[[checks]]`` entry of the data file whose layout is at hand: ``layouts`` maps "profile" and
    "type_system" to the resolved profile and type-system layout (one may be missing), ``labels`` to how a
    mismatch names them."""
    result = CheckResult()
    for check in descriptor_data(directory)["checks"]:
        which = "profile" if "profile" in check else "type_system"
        layout = layouts.get(which)
        if layout is None:
            continue
        mine = _resolve(layout, check[which])
        if mine is None:
            continue  # the layout has no such value on this runtime
        says = descriptor.value(check["descriptor"])
        if says is None:
            result.not_described.append(check["descriptor"])
            continue
        expected = mine
        if "values" in check:
            expected = check["values"].get(mine, mine)
        elif isinstance(mine, int):
            expected = mine * check.get("scale", 1) * (descriptor.pointer_size if check.get("unit") == "pointers"
                                                       else 1)
        if says == expected:
            result.checked.append(check["descriptor"])
        else:
            result.mismatches.append(Mismatch(check["descriptor"], says, f"{labels[which]}: {check[which]}",
                                              mine))
    return result
