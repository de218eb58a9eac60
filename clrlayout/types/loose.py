"""Images no file mapping or module names: a single-file app's bundled assemblies, which the runtime copies
(inflated) into anonymous memory.  They are read from the dump's memory (the page-aligned image that holds a
Module's name pointer, in the file's layout or the loaded one), else from the bundle in the app's executable
(:mod:`.bundle`).  A mixin of :class:`~clrlayout.types.images.ManagedImages`, which keeps the images, the
files and the name check."""

from __future__ import annotations

import bisect

from .metadata import Metadata, MetadataError
from .pe import HEADER_BYTES, MAX_IMAGE_BYTES, Image, _essential, _extent, _file_offset, _headers


class LooseImages:
    """The part of :class:`~clrlayout.types.images.ManagedImages` that finds images in anonymous memory and in a
    single-file bundle (its ``_image``, ``_file``, ``_named_at`` and state are the class's)."""

    def _name_at(self, address: int) -> str | None:
        """The NUL-terminated identifier the dump holds at ``address`` (what an assembly's simple name looks
        like), or None."""
        data = self.space.read_available(address, 256) if address else b""
        end = data.find(b"\0")
        if end <= 0:
            return None
        text = data[:end]
        if not all(0x20 < b < 0x7F for b in text):
            return None
        return text.decode("ascii")

    def _memory_image(self, address: int) -> Image | None:
        """The image that holds ``address`` in the dump's memory: the nearest page that starts with a PE header
        at or below it, its headers and metadata read from memory in the file's layout (as .NET copies a
        bundled assembly) or the loaded one (sections at their RVAs); the name checked at its place.  One
        image per base address, whichever Module leads to it."""
        base = self._image_base(address)
        if base is None:
            return None
        key = ("anonymous memory", base)
        if key in self._images:
            image = self._images[key]
            if image is None:
                return None
            read, flat = self._memory_layouts[base]
            return image if self._named_in(image, read, address - base, flat) else None
        for flat in (True, False):
            section = (lambda rva, at, size: self.space.read_available(base + at, size)) if flat else \
                (lambda rva, at, size: self.space.read_available(base + rva, size))
            read = _essential(lambda off, size: self.space.try_read(base + off, size) or b"", section, whole=True)
            if read is None:
                continue
            pe = _headers(read(0, HEADER_BYTES))
            try:
                image = Image(f"<image in memory at {base:#x}>", "dump memory", pe, Metadata(read(0, _extent(pe))))
            except MetadataError:
                continue
            if self._named_in(image, read, address - base, flat):
                self._images[key] = image
                self._memory_layouts[base] = (read, flat)
                return image
        self._images[key] = None
        return None

    def _named_in(self, image: Image, read, offset: int, flat: bool) -> bool:
        """Whether the image's assembly name (NUL-terminated) is at ``offset`` from its base (a file offset in
        the file's layout, an RVA in the loaded one)."""
        at = offset if flat else _file_offset(image.headers, offset)
        return at is not None and self._named_at(image, lambda n: read(at, n))

    def _image_base(self, address: int) -> int | None:
        """The highest page at or below ``address`` (within an image's largest size) that starts with a PE
        header whose image reaches ``address``; the pages the dump does not hold are skipped (a trimmed dump
        keeps only what was read), and the probes are not recorded for trim."""
        from .bundle import PAGE

        for lo, hi in self._memory_images:
            if lo <= address < hi:
                return lo
        regions, starts = self.space.regions, [r.start for r in self.space.regions]
        lowest = max(0, address - MAX_IMAGE_BYTES)
        page = address - address % PAGE
        i = bisect.bisect_right(starts, page) - 1
        with self.space.paused_recording():
            while i >= 0 and page >= lowest:
                region = regions[i]
                page = min(page, (region.end - 1) - (region.end - 1) % PAGE)
                while page >= max(region.start, lowest):
                    if self.space.try_read(page, 2) == b"MZ":
                        pe = _headers(self.space.try_read(page, HEADER_BYTES) or b"")
                        reach = max(pe.OPTIONAL_HEADER.SizeOfImage, _extent(pe)) if pe is not None else 0
                        if address - page < reach:
                            self._memory_images.append((page, page + reach))
                            return page
                    page -= PAGE
                i -= 1
        return None

    def _bundled_image(self, address: int) -> Image | None:
        """The bundled assembly of the single-file app whose simple name the dump holds at ``address``, when
        that place is page-aligned with the name's offset in the image (flat or loaded layout)."""
        from .bundle import PAGE, name_offsets

        bundle = self._app_bundle()
        name = self._name_at(address)
        if bundle is None or name is None:
            return None
        host, found = bundle
        entry = found.assemblies().get(name.lower())
        if entry is None:
            return None
        key = ("bundle", host, entry.path)
        if key not in self._images:
            data = found.contents(entry, MAX_IMAGE_BYTES)
            image = None
            if data is None:
                self._why = f"bundled {entry.path} not readable from {host}"
            else:
                image = self._image(key, f"{host} (bundled {entry.path})", lambda o, n: data[o : o + n])
            if image is not None and image.metadata.assembly_name:
                offsets = name_offsets(data, image.metadata.assembly_name)
                rvas = [image.headers.get_rva_from_offset(o) for o in offsets]
                self._name_places[key] = offsets + [r for r in rvas if r]
        image = self._images.get(key)
        if image is None or (image.metadata.assembly_name or "").lower() != name.lower():
            return None
        at = self._host_offset(host, address)
        if at is not None:  # mapped from the host file itself, at the entry's own offset (flat layout)
            inside = not entry.compressed_size and entry.offset <= at < entry.offset + entry.size
            return image if inside and at - entry.offset in self._name_places.get(key, ()) else None
        if any((address - at) % PAGE == 0 for at in self._name_places.get(key, ())):
            return image
        return None

    def _host_offset(self, host: str, address: int) -> int | None:
        """The offset in the app's executable that the dump maps at ``address``, if a mapping of it does: the
        runtime maps a stored (not compressed) bundled assembly from there, at its offset in the bundle, which
        the bundler aligns to 16 bytes only (4 KB on some platforms), so its image need not start a page."""
        i = bisect.bisect_right(self._starts, address) - 1 if self._mappings else -1
        if i < 0 or address >= self._mappings[i].end or self._mappings[i].path != host:
            return None
        m = self._mappings[i]
        return m.offset + (address - m.start)

    def _app_bundle(self):
        """(host path, Bundle) of the dumped process when it is a single-file app whose executable is on this
        machine (at its path, or under --assemblies); None otherwise.  Looked for once."""
        if self._bundle is not None:
            return self._bundle or None
        from .bundle import find_bundle

        self._bundle = ()
        name = (self.dump.process_name or "").lower()
        paths = [m.path for m in self._mappings if m.offset == 0 and _named(m.path, name)]
        paths += [m.path for m in self._modules[:1]] if not self._mappings else []
        for path in dict.fromkeys(paths):
            f = self._file(path)
            if f is None:
                continue
            found = find_bundle(f.read, f.size)
            if found is not None:
                self._bundle = (path, found)
                break
        return self._bundle or None


#: the longest process name the kernel keeps (``comm``, TASK_COMM_LEN less its NUL): a longer one is cut
COMM_BYTES = 15


def _named(path: str, name: str) -> bool:
    """Whether the file at ``path`` is the executable of a process of that name (cut to 15 bytes by the
    kernel where it is longer)."""
    base = path.rsplit("/", 1)[-1].lower()
    return bool(name) and (base == name or (len(name) == COMM_BYTES and base.startswith(name)))
