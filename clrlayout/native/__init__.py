"""The native heap of a Linux core: glibc's malloc state found without symbols (:mod:`.libc`), its layouts per
glibc version kept as data (:mod:`.layout`, ``formats/glibc-malloc.toml``), every arena, heap and chunk walked
(:mod:`.arenas`, :mod:`.chunks`), the figures glibc itself reports (:mod:`.figures`), which managed object owns
which block (:mod:`.owners`) and which blocks nothing reaches (:mod:`.leaks`).  Entry:
:func:`clrlayout.native.arenas.read_native_heap`, or the
model's :func:`clrlayout.model.native.native_heap`."""
