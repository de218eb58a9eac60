"""The runtime's managed threads: its ``ThreadStore`` list, each ``Thread``'s fields at the offsets the contract
descriptor gives (.NET 9+: dotnet/runtime docs/design/datacontracts/Thread.md), the state bits named from
``formats/thread-state.toml``.  Before .NET 9 the runtime publishes no descriptor: the offsets are that file's
``[[layouts]]`` for the version, used only once the dump's own threads fit them (:func:`threads_by_layout`), and
the ThreadStore is found by the tail of its list, which the managed Thread objects' native Threads lead to."""

from __future__ import annotations

from dataclasses import dataclass

from .. import formats

#: threads followed at the most along the runtime's list (a bound on what a dump controls)
MAX_THREADS = 1 << 16
FIELDS = ("Id", "OSId", "State", "PreemptiveGCDisabled", "Frame", "GCHandle", "LastThrownObject", "LinkNext")


@dataclass(frozen=True)
class ManagedThread:
    """One Thread of the runtime's list: where it is, its ids, state, GC mode and the handles to its managed
    Thread object and to the exception it last threw."""

    address: int
    managed_id: int
    os_id: int
    state: int
    #: 1: cooperative (running managed code, the GC waits for it); 0: preemptive
    preemptive_gc_disabled: int
    #: the top of its explicit Frame chain (transitions to native code and the runtime), 0 or -1: none
    frame: int
    exposed_handle: int
    last_thrown_handle: int
    #: "finalizer", "gc" (the runtime's special threads), or ""
    special: str = ""
    #: the locks it holds (Thread::m_dwLockCount); None where the runtime does not count them (.NET 8 and later)
    lock_count: int | None = None

    def flags(self) -> list[str]:
        """The names of the state bits set."""
        return [name for name, bit in state_flags().items() if self.state & bit]


def state_flags() -> dict[str, int]:
    return formats.load("thread-state")["flags"]


def managed_threads(space, contract) -> list[ManagedThread] | str:
    """The runtime's threads in list order, or why they cannot be read (a sentence)."""
    if contract is None or isinstance(contract, str):
        return contract or ("the runtime's threads are read through its contract descriptor (.NET 9 and later), or "
                            "at the offsets formats/thread-state.toml gives for .NET Core 2.2, 3.1 and .NET 8 on "
                            "Linux; this runtime has neither")
    thread, store_type = contract.types.get("Thread", {}), contract.types.get("ThreadStore", {})
    missing = [f for f in FIELDS if f not in thread] + [f for f in ("FirstThreadLink",) if f not in store_type]
    if missing or "ThreadStore" not in contract.globals:
        return f"the contract descriptor does not describe the runtime's threads (missing {', '.join(missing)})"
    special = {}
    for name, key in (("finalizer", "FinalizerThread"), ("gc", "GCThread")):
        at = contract.globals.get(key)
        value = space.try_read_pointer(at) if isinstance(at, int) else None
        if value:
            special[value] = name
    natives = thread_list(space, contract)
    if isinstance(natives, str):
        return natives
    return _read_threads(space, thread, natives, special)


def _read_threads(space, thread: dict, natives: list[int], special: dict) -> list[ManagedThread] | str:
    out = []
    for native in natives:

        def u32(name: str, at: int = native) -> int:
            data = space.try_read(at + thread[name], 4)
            return int.from_bytes(data, "little") if data else 0

        def word(name: str, at: int = native) -> int:
            return space.try_read_pointer(at + thread[name]) or 0

        if space.try_read(native, max(thread[f] for f in FIELDS) + space.pointer_size) is None:
            return f"a Thread of the runtime's list ({native:#x}) is not in the dump"
        out.append(ManagedThread(native, u32("Id"), word("OSId") & 0xFFFFFFFF, u32("State"),
                                 u32("PreemptiveGCDisabled"), word("Frame"), word("GCHandle"), word("LastThrownObject"),
                                 special.get(native, ""), u32("LockCount") if "LockCount" in thread else None))
    return out


def layout_for(version: tuple[int, ...] | None, os: str) -> dict | None:
    """formats/thread-state.toml's Thread and ThreadStore offsets for a runtime before .NET 9 on ``os``, or None."""
    from .profiles import version_matches

    if not version:
        return None
    return next((e for e in formats.load("thread-state").get("layouts", [])
                 if e.get("os", os) == os and version_matches(e["versions"], version)), None)


#: bytes past the end of the runtime module's segments searched for its globals (its .bss)
BSS_SLACK = 1 << 20
#: bytes of the runtime module read at the most for its table of DAC globals (libcoreclr.so is 7-8 MB)
MAX_MODULE_READ = 64 << 20
#: bytes of a ThreadStore before its list of threads at the most
STORE_SPAN = 0x1000
#: bytes of the memory around the known threads searched for the ThreadStore at the most
MAX_STORE_SEARCH = 512 << 20


def threads_by_layout(space, layout: dict, known: dict[int, tuple[int, int]],
                      module: tuple[int, int] | None = None, out: dict | None = None) -> list[ManagedThread] | str:
    """Before .NET 9: the runtime's threads in list order at the offsets of ``layout`` (:func:`layout_for`), or why
    not.  ``known``: native Thread -> (managed id, managed Thread object) of every managed Thread object of the heap
    (``_DONT_USE_InternalThread``, ``_managedThreadId``): the layout is used only if each of them holds its object's
    id and a handle to it; the ThreadStore is the SList whose tail is where their links lead.  ``module``: the
    runtime module's (base, end), where its table of DAC globals names the finalizer thread
    (:func:`finalizer_thread`; ``out``: given, it gets where that table is)."""
    import numpy as np

    thread, store_t = layout["Thread"], layout["ThreadStore"]
    if not known:
        return "no managed Thread object in the heap leads to the runtime's threads"
    for native, (managed_id, obj) in known.items():
        if space.try_read(native, max(thread.values()) + space.pointer_size) is None:
            return f"the runtime's Thread at {native:#x} (a managed Thread object's) is not in the dump"
        data = space.try_read(native + thread["Id"], 4)
        handle = space.try_read_pointer(native + thread["GCHandle"])
        if data is None or int.from_bytes(data, "little") != managed_id or not handle \
                or space.try_read_pointer(handle) != obj:
            return (f"the runtime's Thread at {native:#x} does not fit the Thread layout formats/thread-state.toml "
                    f"gives for this version ({layout['versions']}): its fields are not read")
    native = next(iter(known))
    tail, seen = native + thread["LinkNext"], set()
    while len(seen) < MAX_THREADS:  # the list's last link: where every thread's links lead
        seen.add(tail)
        nxt = space.try_read_pointer(tail)
        if not nxt or nxt in seen:
            break
        tail = nxt
    store, searched = None, 0
    for lo, hi in sorted({(space.mapped_start(n), space.mapped_end(n)) for n in known}):
        for at in range(lo, hi, 64 << 20):
            data = space.read_available(at, min(64 << 20, hi - at))
            searched += len(data)
            words = np.frombuffer(data[: len(data) // 8 * 8], dtype="<u8")
            for i in np.flatnonzero(words == np.uint64(tail)).tolist():
                candidate = at + 8 * i - store_t["Tail"]
                if space.try_read_pointer(candidate + store_t["Head"]) == candidate + store_t["FirstThreadLink"]:
                    store = candidate
                    break
            if store is not None or searched >= MAX_STORE_SEARCH:
                break
        if store is not None:
            break
    if store is None:
        return "the runtime's ThreadStore (the list of its threads) is not found where its threads are"
    natives, link, seen = [], space.try_read_pointer(store + store_t["FirstThreadLink"]), set()
    while link and link not in seen and len(seen) < MAX_THREADS:
        seen.add(link)
        natives.append(link - thread["LinkNext"])
        link = space.try_read_pointer(link)
    if not set(known) <= set(natives):
        return "the runtime's thread list does not hold every thread its managed Thread objects point at"
    finalizer = finalizer_thread(space, module, store, layout.get("dac_table"), natives, out) if module else None
    return _read_threads(space, thread, natives, {finalizer: "finalizer"} if finalizer else {})


def finalizer_thread(space, module: tuple[int, int], store: int, table: dict | None, natives: list[int],
                     out: dict | None = None) -> int | None:
    """The finalizer thread before .NET 9, from the runtime's table of its DAC globals (``g_dacTable``, one entry
    per global of dacvars.h; ``table``: its form and the entries of ``ThreadStore::s_pThreadStore`` and
    ``g_pFinalizerThread``, formats/thread-state.toml): the variable that holds the ThreadStore's address (``store``
    is its list of threads, a field of it) is looked for in the runtime module's memory, then the table by its
    entry that leads there; the finalizer's entry is taken only if it leads to one of the list's threads
    (``natives``).  None where any of it is not found.  ``out``: given, it gets ``dac_table``, where the table
    starts, its form and the module's base."""
    import numpy as np

    if not table or table.get("form") not in ("rva32", "address"):
        return None
    rva = table["form"] == "rva32"
    width, dtype = (4, "<u4") if rva else (8, "<u8")
    base, end = module
    end += BSS_SLACK  # the module's zero-filled data (.bss: the globals) lies past its file's segments
    memory, budget = [], MAX_MODULE_READ
    for lo, hi in space.iter_runs():  # the module's memory the dump holds (a bounded part of a hostile one's)
        lo, hi = max(lo, base), min(hi, end)
        if lo < hi and budget > 0:
            memory.append((lo, space.read_available(lo, min(hi - lo, budget))))
            budget -= min(hi - lo, budget)
    threads = set(natives)
    # as entries
    tables = [(t_lo, np.frombuffer(data[: len(data) // width * width], dtype=dtype)) for t_lo, data in memory]
    for lo, data in memory:
        words = np.frombuffer(data[: len(data) // 8 * 8], dtype="<u8")
        near = (words <= np.uint64(store)) & (words >= np.uint64(max(0, store - STORE_SPAN)))
        for i in np.flatnonzero(near).tolist()[:64]:
            variable = lo + 8 * i  # ThreadStore::s_pThreadStore (the list is a field of it), if the table leads here
            for t_lo, entries in tables:
                wanted = variable - base if rva else variable
                for k in np.flatnonzero(entries == wanted).tolist()[:8]:
                    at = k - table["thread_store"] + table["finalizer"]
                    if not 0 <= at < len(entries) or k < table["thread_store"]:
                        continue
                    found = space.try_read_pointer(base + int(entries[at]) if rva else int(entries[at]))
                    if found in threads:
                        if out is not None:  # where the table starts, for what else it names (the stack walk's)
                            out["dac_table"] = {"address": t_lo + width * (k - table["thread_store"]),
                                                "form": table["form"], "module": base}
                        return found
    return None


def thread_list(space, contract) -> list[int] | str:
    """The address of each native Thread of the runtime's list (``ThreadStore``, linked through
    ``Thread.LinkNext``), in list order; or why the list cannot be read."""
    try:
        link_next, first = contract.types["Thread"]["LinkNext"], contract.types["ThreadStore"]["FirstThreadLink"]
        store = space.try_read_pointer(contract.globals["ThreadStore"])
    except KeyError:
        return "the contract descriptor does not describe the runtime's thread list"
    if not store:
        return "the runtime's ThreadStore is not in the dump"
    out, seen = [], set()
    link = space.try_read_pointer(store + first)
    if link is None:
        return "the head of the runtime's thread list is not in the dump"
    while link and link not in seen and len(seen) < MAX_THREADS:
        seen.add(link)
        out.append(link - link_next)
        link = space.try_read_pointer(link)
    return out
