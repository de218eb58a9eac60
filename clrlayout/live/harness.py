"""The live harness: strings allocated in a hosted runtime, checked against clrlayout's own decoders.

Every case is allocated inside .NET, pinned, and read back from this process's memory (``/proc/self/mem``)
through the same :class:`~clrlayout.addrspace.AddressSpace`, profile and construct structs that the dump
path uses, then checked field by field against what the runtime says: the MethodTable
(``typeof(string).TypeHandle``), the length, every UTF-16 unit, the terminator, the SOS size against the
BaseSize read from the MethodTable, the aligned size against the distance to a string allocated right
after it, the padding bytes, and the header word against the state the harness put it in.
"""

from __future__ import annotations

import os

from ..dump.addrspace import AddressSpace
from ..findings import Findings
from ..objects.header import decode_header
from ..objects.layout import string_layout
from ..objects.strings import StringObject, object_span, read_string
from ..runtime.methodtable import MethodTables
from ..runtime.profiles import Profile, load_named_profile, parse_version, select_profile
from .host import LiveRuntime, load
from .report import CaseResult, CaseSpec, Check, LiveReport

LARGE_LENGTH = 50_000  # 100,022+ bytes: the large object heap on CoreCLR, the LOS on Mono
FOLLOWER = [0x7A]  # the string allocated right after each case ("z")


# --- reading this process's memory ------------------------------------------------------------------


class ProcessMemory:
    """This process's memory through /proc/self/mem: an unmapped address reads as missing, not a crash."""

    path = "/proc/self/mem"

    def __init__(self):
        self._fd = os.open(self.path, os.O_RDONLY)
        self.size = 1 << 64

    def pread(self, offset: int, size: int) -> bytes:
        try:
            return os.pread(self._fd, size, offset)
        except OSError:
            return b""

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def process_space(pointer_size: int) -> AddressSpace:
    top = (1 << 47) if pointer_size == 8 else (1 << 32)
    return AddressSpace(ProcessMemory(), [(0x10000, top - 0x10000, 0x10000)], pointer_size)


# --- the cases --------------------------------------------------------------------------------------


def _units(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def case_specs(max_length: int) -> list[CaseSpec]:
    cases = [CaseSpec(f"length {n}", [0x61 + i % 26 for i in range(n)], kind="empty" if n == 0 else "fresh")
             for n in range(max_length + 1)]
    cases += [
        CaseSpec("latin-1", _units("Grüße aus Köln")),
        CaseSpec("cyrillic", _units("Привет, мир")),
        CaseSpec("cjk", _units("日本語のテキスト")),
        CaseSpec("surrogate pair", _units("emoji \U0001F600 pair")),
        CaseSpec("lone high surrogate", _units("lone ") + [0xD800] + _units(" high")),
        CaseSpec("lone low surrogate", [0xDC00] + _units(" lone low")),
        CaseSpec("embedded U+0000", _units("nul") + [0] + _units("inside") + [0]),
        CaseSpec("large object heap", [0x4C] * LARGE_LENGTH, large=True),
        CaseSpec("String.Empty", [], kind="empty"),
        CaseSpec("interned literal", _units("clrlayout live: an interned literal"), kind="interned"),
        CaseSpec("thin lock", _units("held with Monitor.Enter"), header="thin_lock"),
        CaseSpec("nested lock", _units("entered twice"), header="nested_lock"),
        CaseSpec("identity hash", _units("RuntimeHelpers.GetHashCode"), header="hash"),
        CaseSpec("hash, then lock", _units("hashed, then locked"), header="hash_then_lock"),
        CaseSpec("lock released", _units("locked, then released"), header="released"),
    ]
    return cases


def _profile_for(runtime: LiveRuntime, profile_name: str | None) -> Profile:
    if profile_name:
        return load_named_profile(profile_name, parse_version(runtime.version))
    return select_profile(runtime.flavor, runtime.arch, runtime.version)


def run(runtime: str = "coreclr", max_length: int = 64, capture: str | None = None,
        profile_name: str | None = None, dotnet_root: str | None = None, framework: str | None = None) -> LiveReport:
    """Allocate the cases in a hosted runtime and check them; ``capture`` also writes and checks a dump.
    ``dotnet_root`` (and ``framework``): the CoreCLR of that .NET installation instead of the embedded one."""
    host = load(runtime, dotnet_root, framework)
    from .dotnet import DotNet

    net = DotNet()
    profile = _profile_for(host, profile_name)
    space = process_space(net.pointer_size)
    findings = Findings()

    # allocate every case first (the handles pin them), then put the headers in their states
    results: list[CaseResult] = []
    followers: dict[int, int] = {}
    handles: dict[int, int] = {}
    for spec in case_specs(max_length):
        if spec.kind == "empty":
            # `new string(char[0])` gives String.Empty itself: no fresh object, no follower to measure
            h = net.new_pair(spec.units, FOLLOWER)[0] if spec.name.startswith("length") else net.empty()
            follower = None
        elif spec.kind == "interned":
            h, follower = net.interned(spec.units), None
        else:
            h, follower = _adjacent_pair(net, profile, spec)
        result = CaseResult(spec, net.address(h))
        handles[id(result)] = h
        if follower is not None and not spec.large:
            followers[id(result)] = net.address(follower)
        results.append(result)
    for r in results:
        h = handles[id(r)]
        state = r.spec.header
        if state in ("thin_lock", "nested_lock", "released"):
            net.enter(h)
        if state == "nested_lock":
            net.enter(h)
        if state == "released":
            net.exit(h)
        if state in ("hash", "hash_then_lock"):
            r.spec.expected_hash = net.hash_code(h)
        if state == "hash_then_lock":
            net.enter(h)

    runtime_checks = _runtime_checks(space, profile, net, host)
    reference_mt = net.string_type_handle if host.flavor != "mono" else space.read_pointer(net.address(net.empty()))
    for r in results:
        _check_case(space, profile, net, host, r, followers.get(id(r)), reference_mt, findings)

    report = LiveReport(host, profile, runtime_checks, results)
    if capture:
        from .capture import check_capture

        report.capture = capture
        check_capture(report, capture, reference_mt)
    return report


def _adjacent_pair(net, profile: Profile, spec: CaseSpec, attempts: int = 4) -> tuple[int, int]:
    """A fresh string and a follower allocated right after it.  The allocator may put the follower past an
    object pinned in between (allocation fragments, conservatively pinned temporaries); a few attempts get
    an adjacent pair.  A wrong profile cannot pass this way: no attempt would end where it predicts."""
    for _ in range(attempts):
        h, follower = net.new_pair(spec.units, FOLLOWER)
        if net.address(follower) - net.address(h) == profile.string_aligned_size(len(spec.units), spec.large):
            break
    return h, follower


def _runtime_checks(space: AddressSpace, profile: Profile, net, host: LiveRuntime) -> list[Check]:
    checks = [
        Check("pointer size", net.pointer_size == profile.pointer_size, profile.pointer_size, net.pointer_size),
        Check("OffsetToStringData = profile chars_offset", net.offset_to_string_data == profile.string.chars_offset,
              profile.string.chars_offset, net.offset_to_string_data),
        Check("String's field names = profile length_field, chars_field",
              net.string_fields == [profile.string.length_field, profile.string.chars_field],
              [profile.string.length_field, profile.string.chars_field], net.string_fields),
    ]
    if host.flavor != "mono":
        mts = MethodTables(space, profile)
        raw = mts.read_raw(net.string_type_handle)
        checks.append(Check("String MethodTable BaseSize",
                            raw is not None and raw.m_BaseSize == profile.string.base_size,
                            profile.string.base_size, raw.m_BaseSize if raw is not None else None))
        checks.append(Check("String MethodTable component size", raw is not None and raw.component_size == 2,
                            2, raw.component_size if raw is not None else None))
        mt = mts.get(net.string_type_handle)
        checks.append(Check("String MethodTable recognised by shape", mt is not None and mt.kind == "string",
                            "string", mt.kind if mt else None))
    else:
        checks.append(Check("BaseSize = OffsetToStringData + terminator",
                            profile.string.base_size == net.offset_to_string_data + profile.string.terminator_size,
                            profile.string.base_size, net.offset_to_string_data + profile.string.terminator_size))
    return checks


def _check_case(space, profile: Profile, net, host: LiveRuntime, r: CaseResult, follower: int | None,
                reference_mt: int, findings: Findings) -> None:
    spec = r.spec
    add = r.checks.append
    try:
        s = read_string(space, profile, r.address, spec.large, findings)
    except Exception as e:  # a decoding failure is a failed check, reported like the others
        add(Check("decode", False, "a string", f"{type(e).__name__}: {e}"))
        return
    r.string = s
    n = len(spec.units)
    add(Check("MethodTable", s.method_table == reference_mt, f"{reference_mt:#x}", f"{s.method_table:#x}"))
    add(Check("length", s.length == n, n, s.length))
    got = _units(s.value) if s.value is not None else None
    add(Check("UTF-16 units", got == spec.units, f"{n} units",
              "equal" if got == spec.units else _first_diff(spec.units, got)))
    add(Check("terminator", s.terminated, 0, "0" if s.terminated else "not 0"))
    if host.flavor != "mono":
        base = MethodTables(space, profile).read_raw(s.method_table).m_BaseSize
        add(Check("SOS size = MethodTable BaseSize + 2n", s.size == base + 2 * n, base + 2 * n, s.size))
    if follower is not None:
        hops = _walk_to(space, profile, r.address + s.aligned_size, follower, reference_mt)
        add(Check("aligned size: the next object starts where it ends", hops is not None,
                  f"{follower:#x} reached", "reached" if hops is not None else "not reached"))
    start, span = object_span(profile, r.address, s.length, s.large)
    lay = string_layout(profile, s.length, s, space.read(start, span), s.large)
    gaps = b"".join(lay.bytes_of(row) for row in lay.rows if row.role in ("alignment", "extra"))
    add(Check("padding bytes are zero", gaps == b"\0" * len(gaps), "00" * len(gaps), gaps.hex()))
    if profile.object.header_size > 4:
        add(Check("header padding DWORD", s.header_padding == 0, 0, s.header_padding))
    add(_header_check(profile, net, host, spec, s))


def _walk_to(space, profile: Profile, pos: int, target: int, reference_mt: int, max_hops: int = 16) -> int | None:
    """Step from ``pos`` object by object (strings only, each by its decoded aligned size) until
    ``target``: the number of objects stepped over, or None if the walk misses it.  Usually 0 hops (the
    follower is adjacent); other pinned strings may sit in between when the allocator fills fragments."""
    for hops in range(max_hops + 1):
        if pos == target:
            return hops
        if pos > target or space.try_read_pointer(pos) != reference_mt:
            return None
        pos += read_string(space, profile, pos).aligned_size
    return None


def _header_check(profile: Profile, net, host: LiveRuntime, spec: CaseSpec, s: StringObject) -> Check:
    state = decode_header(s.header, profile.header)
    want = spec.header
    if want in ("none", "released"):
        ok = state.kind == "none"
        expected = "unlocked, no hash"
    elif want in ("thin_lock", "nested_lock"):
        recursion = 1 if want == "nested_lock" else 0
        owner_ok = state.thread_id == net.managed_thread_id if host.flavor != "mono" else state.thread_id > 0
        ok = state.kind == "thin_lock" and owner_ok and state.recursion == recursion
        expected = f"thin lock, recursion {recursion}" + \
            (f", thread {net.managed_thread_id}" if host.flavor != "mono" else "")
    elif want == "hash":
        mask = profile.header.hashcode_mask or 0xFFFFFFFF
        ok = state.kind == "hash" and state.hash_code == spec.expected_hash & mask
        expected = f"hash code {spec.expected_hash & mask:#x}"
    else:  # hash_then_lock: the hash moves to a sync block (CLR) / the lock word inflates (Mono)
        ok = state.kind == "sync_block" and state.sync_block_index > 0
        expected = "sync block"
    return Check("header: " + want.replace("_", " "), ok, expected, f"{s.header:#x} {state.describe()}")


def _first_diff(want: list, got: list | None) -> str:
    if got is None:
        return "not decoded"
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return f"unit {i}: {b:#06x} instead of {a:#06x}"
    return f"{len(got)} units instead of {len(want)}"
