"""``live --capture``: a dump of this very process, run through the dump path and checked against the
live cases (every allocated string found at its address with the same bytes and decoding)."""

from __future__ import annotations

import os
import subprocess

from ..errors import LiveRuntimeUnavailable
from . import embedded
from .report import Check, LiveReport


def write_dump(path: str, flavor: str, library: str | None = None) -> None:
    """A dump of this process: the hosted CoreCLR's own createdump (beside ``library``, its libcoreclr.so), or,
    for Mono, a minidump written here."""
    if flavor != "coreclr":
        from .minidump_writer import write_process_minidump

        write_process_minidump(path)
        return
    tool = os.path.join(os.path.dirname(library), "createdump") if library else str(embedded.createdump())
    if not os.access(tool, os.X_OK):
        raise LiveRuntimeUnavailable(f"{tool} is missing or not executable")
    r = subprocess.run([tool, "-f", path, str(os.getpid())],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not os.path.exists(path):
        raise LiveRuntimeUnavailable(f"createdump failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-300:]}")


def check_capture(report: LiveReport, path: str, reference_mt: int) -> None:
    from ..session import open_session

    flavor = report.runtime.flavor
    write_dump(path, flavor, report.runtime.library)
    with open_session(path, mt=reference_mt if flavor == "mono" else None) as a:
        report.runtime_checks.append(Check("capture: String MethodTable found in the dump",
                                           a.string_method_table() == reference_mt, f"{reference_mt:#x}",
                                           f"{a.string_method_table():#x}"))
        if flavor == "coreclr":
            report.runtime_checks.append(Check("capture: exact heap walk", a.heap.exact, True, a.heap.method))
        found = {s.address: s for s in a.iter_strings()}
    for case in report.cases:
        live = case.string
        if live is None:
            continue
        s = found.get(case.address)
        ok = s is not None and (s.value, s.length, s.header, s.size, s.aligned_size) == \
            (live.value, live.length, live.header, live.size, live.aligned_size)
        case.checks.append(Check("capture: found in the dump with the same decoding", ok, "found, equal",
                                 "missing" if s is None else ("equal" if ok else "different")))
