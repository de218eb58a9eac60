"""``clrlayout live``: the report as a table of cases and checks."""

from __future__ import annotations

from .text import table


def live_lines(report) -> list[str]:
    rt = report.runtime
    lines = [f"Live check: {rt.description} on {rt.arch}, profile {report.profile.label}", ""]
    rows = []
    for case in report.cases:
        s = case.string
        passed = len(case.checks) - len(case.failures)
        rows.append([case.spec.name, f"{case.address:#x}", len(case.spec.units), s.size if s else "-",
                     s.aligned_size if s else "-", s.header_state(report.profile).describe() if s else "-",
                     f"{passed}/{len(case.checks)}" + ("" if not case.failures else "  FAIL")])
    lines += table(["CASE", "ADDRESS", "LEN", "SIZE", "ALIGNED", "HEADER", "CHECKS"], rows, "llrrrll", indent="  ")
    lines += ["", "Runtime checks:"]
    for c in report.runtime_checks:
        lines.append(f"  {'ok  ' if c.ok else 'FAIL'} {c.name}: {c.actual}"
                     + ("" if c.ok else f" (expected {c.expected})"))
    failed = [(case.spec.name, c) for case in report.cases for c in case.failures]
    if failed:
        lines += ["", "Failures:"]
        for name, c in failed:
            lines.append(f"  {name}: {c.name}: expected {c.expected}, got {c.actual}")
    lines.append("")
    if report.failures:
        lines.append(f"{report.checks} checks, {report.failures} failures: the profile {report.profile.label} "
                     f"does not match this runtime.")
    else:
        lines.append(f"{report.checks} checks, 0 failures: every case matches the profile {report.profile.label}"
                     + (f" and the capture {report.capture}" if report.capture else "") + ".")
    return lines
