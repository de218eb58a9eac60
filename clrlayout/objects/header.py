"""The object header word (ObjHeader::m_SyncBlockValue), decoded with the profile's bit masks."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.profiles import HeaderSpec

# String high-char states in bits 31:30 (object.h STRING_STATE_*), on runtimes that keep them
STRING_STATES = {0: "undetermined", 1: "high chars", 2: "no high chars", 3: "special sort"}


@dataclass(frozen=True)
class HeaderState:
    value: int
    kind: str  # "none" | "thin_lock" | "hash" | "sync_block"
    thread_id: int = 0
    recursion: int = 0
    hash_code: int = 0
    sync_block_index: int = 0
    appdomain: int = 0
    flags: tuple[str, ...] = ()
    string_state: str | None = None

    def describe(self) -> str:
        """One line, as the JOL-style table shows it."""
        if self.kind == "thin_lock":
            text = f"thin lock: thread {self.thread_id}"
            if self.recursion:
                text += f", recursion {self.recursion}"
        elif self.kind == "hash":
            text = f"hash code {self.hash_code:#x}"
        elif self.kind == "sync_block":
            text = (f"sync block #{self.sync_block_index}" if self.sync_block_index < 1 << 26
                    else f"inflated: MonoThreadsSync at {self.sync_block_index:#x}")
        else:
            text = "unlocked, no hash"
        if self.appdomain:
            text += f", AppDomain {self.appdomain}"
        if self.string_state and self.string_state != "undetermined":
            text += f"; string: {self.string_state}"
        if self.flags:
            text += "; " + ", ".join(self.flags)
        return text

    def as_dict(self) -> dict:
        out = {"value": self.value, "kind": self.kind}
        if self.kind == "thin_lock":
            out.update(thread_id=self.thread_id, recursion=self.recursion)
        elif self.kind == "hash":
            out["hash_code"] = self.hash_code
        elif self.kind == "sync_block":
            out["sync_block_index"] = self.sync_block_index
        if self.appdomain:
            out["appdomain"] = self.appdomain
        if self.string_state is not None:
            out["string_state"] = self.string_state
        if self.flags:
            out["flags"] = list(self.flags)
        return out


def decode_mono_lock_word(value: int, spec: HeaderSpec) -> HeaderState:
    """Mono's LockWord (monitor.h): status in the low bits; flat = owner small id and nest count, thin
    hash = hash code, inflated = a MonoThreadsSync* (with the hash flag when it also holds a hash)."""
    status = value & spec.status_mask
    if status & spec.status_inflated:
        flags = ("has hash",) if status & spec.status_hash else ()
        return HeaderState(value, "sync_block", sync_block_index=value & ~spec.status_mask, flags=flags)
    if status == spec.status_hash:
        return HeaderState(value, "hash", hash_code=(value >> spec.hash_shift) & 0xFFFFFFFF)
    owner = value >> spec.owner_shift
    if owner:
        return HeaderState(value, "thin_lock", thread_id=owner,
                           recursion=(value & spec.recursion_mask) >> spec.recursion_shift)
    return HeaderState(value, "none")


def decode_header(value: int, spec: HeaderSpec, is_string: bool = True) -> HeaderState:
    """Decode a 32-bit sync block word (syncblk.h).  Bits 31:30 of a string are its high-char state on
    runtimes that keep one (.NET Framework, CoreCLR <= 3.1), else bit 30 is FINALIZER_RUN."""
    if spec.kind == "mono-lock-word":
        return decode_mono_lock_word(value, spec)
    value &= 0xFFFFFFFF
    flags = []
    string_state = None
    string_bits = spec.string_has_no_high_chars | spec.string_high_chars_known
    if is_string and string_bits:
        state = (1 if value & spec.string_high_chars_known else 0) | (2 if value & spec.string_has_no_high_chars else 0)
        string_state = STRING_STATES[state]
    elif spec.finalizer_run and value & spec.finalizer_run:
        flags.append("finalizer run")
    if spec.spin_lock and value & spec.spin_lock:
        flags.append("spin lock")
    if spec.gc_reserve and value & spec.gc_reserve:
        flags.append("GC reserve")

    if value & spec.is_hash_or_syncblk:
        if value & spec.is_hashcode:
            return HeaderState(value, "hash", hash_code=value & spec.hashcode_mask, flags=tuple(flags),
                               string_state=string_state)
        return HeaderState(value, "sync_block", sync_block_index=value & spec.syncblock_index_mask,
                           flags=tuple(flags), string_state=string_state)
    thread_id = value & spec.thread_id_mask
    recursion = (value & spec.recursion_mask) >> spec.recursion_shift if spec.recursion_mask else 0
    appdomain = (value & spec.appdomain_mask) >> spec.appdomain_shift if spec.appdomain_mask else 0
    kind = "thin_lock" if thread_id else "none"
    return HeaderState(value, kind, thread_id=thread_id, recursion=recursion, appdomain=appdomain,
                       flags=tuple(flags), string_state=string_state)
