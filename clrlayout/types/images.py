"""Managed images (assemblies) of the dumped process, and the runtime Module each belongs to.

A runtime ``Module`` keeps a pointer to its assembly's simple name, which points into the #Strings heap of
the image's own mapped metadata (``Module::m_pSimpleName``; on .NET 9+ the Module also holds the image
base).  Which image holds an address is told by the dump: an ELF core's NT_FILE mappings (path and file
offset of every mapping), a minidump's module list (path, base, size).  The image's bytes come from the
file at that path, else from a file of that name under ``--assemblies`` directories (as the DAC's metadata
locator does), else, for a minidump that holds the image's memory, from the dump.

Nothing is taken on trust: an image is the Module's only if the name pointer, read at its offset in the
image, is the assembly's simple name that the image's own metadata gives.  So a wrong file (another
version at the same path), a Module at an unknown offset or a damaged pointer gives no image, never a
wrong one.
"""

from __future__ import annotations

import bisect
import os

from .loose import LooseImages
from .metadata import Metadata, MetadataError
from .pe import (
    HEADER_BYTES,
    MAX_ASSEMBLY_FILES,
    MAX_IMAGE_BYTES,
    MAX_MAPPINGS_BACK,
    MODULE_SEARCH_BYTES,
    Image,
    _essential,
    _extent,
    _file_offset,
    _headers,
)


def _shared_library(path: str) -> bool:
    """Whether a mapped file is a shared library by its name (``libcoreclr.so``, ``libc.so.6``)."""
    base = path.rsplit("/", 1)[-1].lower()
    return base.endswith(".so") or ".so." in base


class _File:
    """Bytes of one file on disk, read with pread."""

    def __init__(self, path: str):
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset >= self.size:
            return b""
        return os.pread(self.fd, min(size, self.size - offset), offset)

    def close(self) -> None:
        os.close(self.fd)


class _MappedFile:
    """Bytes of a file that is not on this machine, from the dump's copy of its mappings (a full core holds
    the pages a process mapped from its files): ``read`` gives the file's bytes at an offset where a mapping
    of it covers them and the dump holds them, up to the first byte it cannot give."""

    def __init__(self, path: str, mappings: list, space):
        self.path = f"{path} (the dump's copy of its mappings)"
        self._pieces = sorted((m.offset, m.offset + (m.end - m.start), m.start) for m in mappings)
        self._space = space
        self.size = max(hi for _, hi, _ in self._pieces)

    def read(self, offset: int, size: int) -> bytes:
        out = bytearray()
        while size > 0:
            piece = next(((lo, hi, at) for lo, hi, at in self._pieces if lo <= offset < hi), None)
            if piece is None:
                break
            lo, hi, at = piece
            data = self._space.read_available(at + offset - lo, min(size, hi - offset))
            out += data
            if len(data) < min(size, hi - offset):
                break
            offset, size = offset + len(data), size - len(data)
        return bytes(out)

    @staticmethod
    def of(path: str, mappings: list, space) -> _MappedFile | None:
        """The dump's copy of ``path`` when it holds the first page of one of its mappings."""
        mine = [m for m in mappings if m.path == path]
        if not mine or not any(space.try_read(m.start, 2) is not None for m in mine):
            return None
        return _MappedFile(path, mine, space)

    def close(self) -> None:
        pass


def _reader(f, start: int, essential: bool):
    """read(offset, size) over the image that starts at ``start`` of ``f``: all of it, or (``essential``) what
    names need only (:func:`_essential`), None when ``f`` does not hold all of that (a core that kept some of
    an image's pages: the file on disk is read instead)."""
    if not essential:
        return lambda offset, size: f.read(start + offset, size)
    return _essential(lambda offset, size: f.read(start + offset, size),
                      lambda rva, at, size: f.read(start + at, size), whole=True)


class ManagedImages(LooseImages):
    """The managed images of a dump, found from the addresses that point into them (each read once)."""

    def __init__(self, dump, assemblies: list[str] | None = None):
        self.dump = dump
        self.space = dump.memory
        self._mappings = sorted(dump.file_mappings)
        self._starts = [m.start for m in self._mappings]
        self._modules = sorted(dump.modules, key=lambda m: m.base)
        self._module_bases = [m.base for m in self._modules]
        self._files: dict[str, _File | None] = {}
        self._images: dict[tuple, Image | None] = {}
        self._by_module: dict[int, Image | None] = {}
        self._assembly_dirs = list(assemblies or [])
        self._starts_of: dict[tuple, int | None] = {}
        #: the one source of each mapped file's images: the dump's copy of its mappings, or the file on disk
        self._sources: dict[str, object] = {}
        self._why = "module's image not found"
        self._by_name: dict[str, str] | None = None
        #: why a runtime Module's image could not be had, by Module address
        self.failures: dict[int, str] = {}
        #: (start, end) of the images found in anonymous memory
        self._memory_images: list[tuple[int, int]] = []
        self._memory_layouts: dict[int, tuple] = {}  # base -> (read, flat) of the image found there
        self._bundle = None  # (host path, Bundle); () once looked for in vain
        #: a bundled image's offsets and RVAs of its assembly's name (its #Strings entry)
        self._name_places: dict[tuple, list[int]] = {}

    # --- files ------------------------------------------------------------------------------------

    def _assembly_index(self) -> dict[str, str]:
        if self._by_name is None:
            self._by_name = {}
            seen = 0
            for root in self._assembly_dirs:
                for dirpath, _, files in os.walk(root):
                    for f in files:
                        seen += 1
                        if seen > MAX_ASSEMBLY_FILES:
                            return self._by_name
                        self._by_name.setdefault(f.lower(), os.path.join(dirpath, f))
        return self._by_name

    def _file(self, path: str) -> _File | None:
        """The file the dump names, on disk at its path or by its name under --assemblies."""
        if path in self._files:
            return self._files[path]
        found = None
        name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
        candidates = [path] if not path.startswith(("\\", "[")) and "/" in path else []
        if self._assembly_dirs and name in self._assembly_index():
            candidates.insert(0, self._assembly_index()[name])  # given explicitly: preferred
        for c in candidates:
            try:
                found = _File(c)
                break
            except OSError:
                continue
        self._files[path] = found
        return found

    def file(self, path: str) -> _File | None:
        """The file a mapping names (``read(offset, size)``), on disk at its path or by its name under
        --assemblies; None where neither has it."""
        return self._file(path)

    def close(self) -> None:
        for f in self._files.values():
            if f is not None:
                f.close()
        self._files.clear()

    # --- images -----------------------------------------------------------------------------------

    def _image(self, key: tuple, path: str, read) -> Image | None:
        """The image at ``key``, parsed from ``read(offset, size)`` of its flat file bytes."""
        if key in self._images:
            return self._images[key]
        image = None
        head = read(0, HEADER_BYTES)
        pe = _headers(head)
        if not head:
            self._why = "image neither in the dump nor on disk (give its folder as assemblies=DIR)"
        elif pe is None:
            self._why = "not a PE image"
        elif _extent(pe) > MAX_IMAGE_BYTES:
            self._why = "image too large"
        else:
            try:
                image = Image(path, key[0], pe, Metadata(read(0, _extent(pe))))
            except MetadataError:
                self._why = "no readable metadata"
        self._images[key] = image
        return image

    def _named_at(self, image: Image, data_at) -> bool:
        name = image.metadata.assembly_name
        if not name:
            return False
        want = name.encode("utf-8") + b"\0"
        return data_at(len(want)) == want

    def image_of_name_pointer(self, address: int) -> Image | None:
        """The image whose metadata holds, at ``address``, its own assembly's simple name; else None.  An image
        no file mapping or module names (a single-file app's bundled assemblies, which the runtime copies into
        anonymous memory) is read from the dump's memory, else from the bundle in the app's executable."""
        image = self._elf_image(address) if self._mappings else self._module_image(address)
        if image is None and self._name_at(address) is not None:
            bundle = self._app_bundle()
            mapped = bundle is not None and self._host_offset(bundle[0], address) is not None
            image = (None if mapped else self._memory_image(address)) or self._bundled_image(address)
        return image

    def _elf_image(self, address: int) -> Image | None:
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0:
            return None
        m = self._mappings[i]
        if address >= m.end or m.path.startswith("/dev/"):
            # sections the loader copied into anonymous memory, after the mapping of the image's headers
            for j in range(i, max(-1, i - MAX_MAPPINGS_BACK), -1):
                image = self._beyond_mapping(j, address)
                if image is not None:
                    return image
            return None
        if _shared_library(m.path):
            return None  # no assembly inside (a single-file app's bundle is an executable: any name, dots too)
        at = m.offset + (address - m.start)
        found = self._elf_source(i)
        if found is None:
            return None
        f, image = found
        return image if self._named_at(image, lambda n: f.read(at, n)) else None

    def _elf_source(self, i: int):
        """(the file's bytes, the image) of the image that mapping ``i`` belongs to: read from the dump's copy
        of the file's mappings when it holds the image's headers and metadata (full cores; only those are
        read), else from the file on disk; None when neither gives one.  One source per file, so that a type's
        image is one object whatever address led to it."""
        m = self._mappings[i]
        chosen = self._sources.get(m.path)
        if chosen is None:
            copy = _MappedFile.of(m.path, self._mappings, self.space)
            candidates = [f for f in (copy, self._file(m.path)) if f is not None]
        else:
            candidates = [chosen]
        for f in candidates:
            start = self._image_start(i, f)
            if start is None:
                continue
            read = _reader(f, start, essential=isinstance(f, _MappedFile))
            image = self._image((f.path, start), m.path, read) if read is not None else None
            if image is not None:
                self._sources[m.path] = f
                return f, image
        if not candidates:
            self._why = "assembly file not found (give its folder as assemblies=DIR)"
        return None

    def _beyond_mapping(self, i: int, address: int) -> Image | None:
        """The image whose sections the loader copied into memory after mapping only its headers from the file
        (CoreCLR's PAL does so for IL images whose sections are not page-aligned): ``address`` lies within
        SizeOfImage of the mapping of its MZ header, and its RVA's bytes are the name (in the file, or in the
        dump's memory where the image is read from the dump's copy)."""
        m = self._mappings[i]
        if m.offset != 0 or not m.path.lower().endswith((".dll", ".exe")):
            return None
        found = self._elf_source(i)
        if found is None:
            return None
        f, image = found
        if address - m.start >= image.headers.OPTIONAL_HEADER.SizeOfImage:
            return None
        at = _file_offset(image.headers, address - m.start)
        if at is None:
            return None
        name_at = (lambda n: f.read(at, n)) if isinstance(f, _File) else \
            (lambda n: self.space.try_read(address, n) or b"")
        return image if self._named_at(image, name_at) else None

    def _image_start(self, i: int, f) -> int | None:
        """The file offset where the image holding mapping ``i`` starts: that of the nearest mapping of the
        same file, at or below it, that starts with MZ (a single-file app maps its assemblies from inside
        one bundle file; an R2R image maps its sections separately)."""
        if (i, f.path) in self._starts_of:
            return self._starts_of[(i, f.path)]
        m = self._mappings[i]
        found = None
        for j in range(i, -1, -1):
            n = self._mappings[j]
            if n.path == m.path and n.offset <= m.offset and f.read(n.offset, 2) == b"MZ":
                found = n.offset
                break
        self._starts_of[(i, f.path)] = found
        return found

    def _module_image(self, address: int) -> Image | None:
        i = bisect.bisect_right(self._module_bases, address) - 1
        if i < 0 or address >= self._modules[i].end:
            return None
        mod = self._modules[i]
        rva = address - mod.base
        f = self._file(mod.path)
        if f is not None:
            image = self._image((f.path, 0), mod.path, f.read)
            if image is not None:
                for off in (_file_offset(image.headers, rva), rva):  # mapped as an image, or flat
                    if off is not None and self._named_at(image, lambda n, at=off: f.read(at, n)):
                        return image
        # the image's memory, if the dump holds it (mapped layout: sections at their RVAs)
        image = self._image(("dump memory", mod.base), mod.path, self._flat_from_memory(mod))
        if image is not None and self._named_at(image, lambda n: self.space.try_read(address, n)):
            return image
        return None

    def _flat_from_memory(self, mod):
        """read(offset, size) over the flat file bytes rebuilt from an image mapped in the dump's memory (its
        sections at their RVAs): :func:`_essential`."""
        return _essential(lambda off, size: self.space.try_read(mod.base + off, size) or b"",
                          lambda rva, at, size: self.space.read_available(mod.base + rva, size))

    def loaded(self) -> list[Image]:
        """The images read so far (each once)."""
        out = []
        for image in self._images.values():
            if image is not None and image not in out:
                out.append(image)
        return out

    def by_assembly(self, name: str) -> list[Image]:
        """The images read so far whose assembly has the simple name ``name`` (case as the loader: ignored)."""
        want = name.lower()
        return [i for i in self.loaded() if (i.metadata.assembly_name or "").lower() == want]

    # --- modules ----------------------------------------------------------------------------------

    def of_module(self, module: int) -> Image | None:
        """The image of the runtime Module at ``module``: the first pointer in the Module that is its image's
        assembly name, by the image's own metadata."""
        if module in self._by_module:
            return self._by_module[module]
        image = None
        self._why = "no pointer to the assembly's name in the runtime Module"
        ptr = self.space.pointer_size
        data = self.space.read_available(module, MODULE_SEARCH_BYTES) if module else b""
        if len(data) < ptr:
            self._why = "runtime Module not in the dump"
        order = "little" if self.space.little_endian else "big"
        for at in range(0, len(data) - ptr + 1, ptr):
            value = int.from_bytes(data[at : at + ptr], order)
            if value:
                image = self.image_of_name_pointer(value)
                if image is not None:
                    break
        if image is None:
            self.failures[module] = self._why
        self._by_module[module] = image
        return image
