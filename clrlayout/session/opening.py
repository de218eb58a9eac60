"""Opening a dump: its runtime found, a layout profile chosen, its GC heap located, the contract descriptor
(.NET 9+) checked against the layouts: a :class:`~clrlayout.session.core.Session`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..dump import DumpFile, open_dump
from ..errors import HeapNotFound, RuntimeNotFound, TruncatedDump, UsageError
from ..findings import Findings
from ..heap.segments import GcHeap, find_gc_heap
from ..limits import DEFAULT_LIMITS, Limits
from ..runtime.detect import RuntimeInfo, detect_runtime, profile_for
from ..runtime.methodtable import MethodTables
from ..runtime.monovtable import MonoVTables
from ..runtime.profiles import Profile, load_named_profile
from .core import Session

if TYPE_CHECKING:
    from ..runtime.contract import CheckResult, ContractDescriptor


def open_session(path, *, mt: int | None = None, profile: str | None = None, heap: str = "auto",
                 limits: Limits = DEFAULT_LIMITS, assemblies=None, index=None) -> Session:
    """Open a dump and find its runtime, layout profile and GC heap.

    ``path``: a minidump or ELF core (or an already opened :class:`~clrlayout.dump.DumpFile`).
    ``mt``: the System.String MethodTable, if it cannot be found (Mono).
    ``profile``: a layout profile ``NAME[@VERSION]`` to use instead of the one the runtime selects.
    ``heap``: "auto" walks the heap exactly when its bounds are found and scans otherwise; "scan" always
    uses the checked object scan; "walk" fails unless the exact walk is possible.
    ``limits``: the :class:`~clrlayout.limits.Limits` on everything the dump controls.
    ``assemblies``: directories to find assemblies in when they are not at the paths the dump names.
    ``index``: where the heap graph's index is kept (:mod:`clrlayout.graph.index`): None the default directory,
    a directory, False none.

    Raises only :class:`~clrlayout.errors.ClrLayoutError` subclasses, each with its exit code.
    """
    dump = path if isinstance(path, DumpFile) else open_dump(os.fspath(path), limits)
    path = dump.path
    try:
        warnings = list(dump.warnings)
        try:
            runtime = detect_runtime(dump)
        except RuntimeNotFound as e:
            truncation = dump.truncation()
            raise TruncatedDump(f"{truncation}; {e}") if truncation else e from None
        if profile:
            prof = load_named_profile(profile, runtime.version_tuple)
            if prof.pointer_size != dump.pointer_size:
                raise UsageError(f"profile={profile}: {prof.pointer_size * 8}-bit, but the dump is of a "
                                 f"{dump.pointer_size * 8}-bit process ({dump.arch})")
        else:
            prof = profile_for(dump, runtime)
        if runtime.version is None:
            warnings.append(f"runtime version unknown: using profile {prof.label}")
        gc = find_gc_heap(dump, runtime.module, limits)
        if heap == "walk" and not gc.exact:
            raise HeapNotFound(f"{path}: no exact heap walk possible: " + "; ".join(gc.warnings[-1:]))
        if heap == "scan" and gc.exact:
            gc = GcHeap(method="object-scan", gc_mode=gc.gc_mode, dac_vars=gc.dac_vars, bounds=gc.bounds)
            warnings.append("heap=scan: using the checked object scan although the exact walk is possible")
        elif not gc.exact:
            warnings.append("no exact heap walk: strings are found by a checked scan, which cannot tell dead "
                            "bytes past the heap's end from live objects (reason below)")
        warnings += gc.warnings
        mts = MethodTables(dump.memory, prof, limits) if prof.method_table is not None \
            else MonoVTables(dump.memory, prof, limits)
        search = [os.fspath(a) for a in (assemblies or [])]
        contract, checks = _contract(dump, runtime, prof, search)
        if checks is not None:
            warnings += [str(m) for m in checks.mismatches]
        return Session(dump, runtime, prof, gc, mts, Findings(limits.max_findings), warnings, mt_override=mt,
                       assemblies=search, contract=contract,
                       contract_checks=checks, graph_index=index)
    except BaseException:
        dump.close()
        raise


def _contract(dump: DumpFile, runtime: RuntimeInfo, profile: Profile, search: list) \
        -> tuple[ContractDescriptor | str, CheckResult | None]:
    """The runtime's contract descriptor (or why there is none) and the profile and type-system layout checked
    against it; ``search``: directories the runtime's file may be in (``assemblies``)."""
    if runtime.flavor != "coreclr":
        name = {"netfx": "the .NET Framework", "mono": "Mono"}.get(runtime.flavor, runtime.flavor)
        return f"{name} has none (CoreCLR exports one from .NET 9 on)", None
    version = runtime.version_tuple
    if version is not None and version < (9,):
        return f"CoreCLR {runtime.version} is older than .NET 9, which introduced it", None
    from ..runtime.contract import check_layouts, find_contract_descriptor
    from ..types.eeclass import type_system_layout

    found = find_contract_descriptor(dump, runtime.module, search)
    if isinstance(found, str):
        return found, None

    system = type_system_layout(runtime.flavor, dump.arch, dump.os, version, profile.pointer_size)
    layouts = {"profile": profile, "type_system": None if isinstance(system, str) else system}
    labels = {"profile": f"profile {profile.label}", "type_system": "formats/type-system.toml"}
    return found, check_layouts(found, layouts, labels)
