"""The runtime's managed threads (.NET 9+): its ``ThreadStore`` list, each ``Thread``'s fields at the offsets the
contract descriptor gives (dotnet/runtime docs/design/datacontracts/Thread.md), the state bits named from
``formats/thread-state.toml``.  Before .NET 9 the runtime publishes no descriptor: the layout of its Thread class
is not known without the DAC, and :func:`managed_threads` says so."""

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

    def flags(self) -> list[str]:
        """The names of the state bits set."""
        return [name for name, bit in state_flags().items() if self.state & bit]


def state_flags() -> dict[str, int]:
    return formats.load("thread-state")["flags"]


def managed_threads(space, contract) -> list[ManagedThread] | str:
    """The runtime's threads in list order, or why they cannot be read (a sentence)."""
    if contract is None or isinstance(contract, str):
        return contract or ("the runtime's threads are read through its contract descriptor (.NET 9 and later); "
                            "this runtime publishes none")
    thread, store_type = contract.types.get("Thread", {}), contract.types.get("ThreadStore", {})
    missing = [f for f in FIELDS if f not in thread] + [f for f in ("FirstThreadLink",) if f not in store_type]
    if missing or "ThreadStore" not in contract.globals:
        return f"the contract descriptor does not describe the runtime's threads (missing {', '.join(missing)})"
    ptr = space.pointer_size
    special = {}
    for name, key in (("finalizer", "FinalizerThread"), ("gc", "GCThread")):
        at = contract.globals.get(key)
        value = space.try_read_pointer(at) if isinstance(at, int) else None
        if value:
            special[value] = name
    natives = thread_list(space, contract)
    if isinstance(natives, str):
        return natives
    out = []
    for native in natives:

        def u32(name: str, at: int = native) -> int:
            data = space.try_read(at + thread[name], 4)
            return int.from_bytes(data, "little") if data else 0

        def word(name: str, at: int = native) -> int:
            return space.try_read_pointer(at + thread[name]) or 0

        if space.try_read(native, max(thread[f] for f in FIELDS) + ptr) is None:
            return f"a Thread of the runtime's list ({native:#x}) is not in the dump"
        out.append(ManagedThread(native, u32("Id"), word("OSId") & 0xFFFFFFFF, u32("State"),
                                 u32("PreemptiveGCDisabled"), word("Frame"), word("GCHandle"), word("LastThrownObject"),
                                 special.get(native, "")))
    return out


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
