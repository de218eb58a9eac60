"""What a live check found: each case's checks and the runtime's, as data (the harness fills it, the
capture adds to it, the presenters print it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..objects.strings import StringObject
from ..runtime.profiles import Profile
from .host import LiveRuntime


@dataclass
class Check:
    name: str
    ok: bool
    expected: object = None
    actual: object = None

    def as_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "expected": _plain(self.expected), "actual": _plain(self.actual)}


def _plain(v):
    return v if isinstance(v, (int, str, bool, type(None))) else str(v)


@dataclass
class CaseSpec:
    name: str
    units: list
    header: str = "none"  # none | thin_lock | nested_lock | hash | hash_then_lock | released
    kind: str = "fresh"  # fresh | empty | interned
    large: bool = False
    expected_hash: int | None = None  # what RuntimeHelpers.GetHashCode returned


@dataclass
class CaseResult:
    spec: CaseSpec
    address: int
    string: StringObject | None = None
    checks: list = field(default_factory=list)

    @property
    def failures(self) -> list:
        return [c for c in self.checks if not c.ok]

    def as_dict(self, profile: Profile) -> dict:
        s = self.string
        return {
            "name": self.spec.name, "address": f"{self.address:#x}", "length": len(self.spec.units),
            "size": s.size if s else None, "aligned_size": s.aligned_size if s else None,
            "header": s.header if s else None,
            "header_state": s.header_state(profile).describe() if s else None,
            "checks": [c.as_dict() for c in self.checks],
        }


@dataclass
class LiveReport:
    runtime: LiveRuntime
    profile: Profile
    runtime_checks: list
    cases: list
    capture: str | None = None

    @property
    def all_checks(self) -> list:
        return self.runtime_checks + [c for case in self.cases for c in case.checks]

    @property
    def checks(self) -> int:
        return len(self.all_checks)

    @property
    def failures(self) -> int:
        return sum(1 for c in self.all_checks if not c.ok)

    def as_dict(self) -> dict:
        return {
            "runtime": self.runtime.as_dict(),
            "profile": self.profile.name,
            "checks": self.checks,
            "failures": self.failures,
            "runtime_checks": [c.as_dict() for c in self.runtime_checks],
            "cases": [c.as_dict(self.profile) for c in self.cases],
            "capture": self.capture,
        }
