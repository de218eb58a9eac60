"""The GC heap: where it is (segments, regions), its own memory (bookkeeping, handle tables) and how to walk it
(the per-object reference walker, the vectorised walker, the checked scan)."""
