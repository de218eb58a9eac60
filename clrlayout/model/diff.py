"""What grew between dumps (the managed heap's UMDH): per type, matched by name (MethodTable addresses differ
between processes and runs), the count and bytes in each dump and the change; with the object graph, only
the reachable objects and each type's retained bytes; and the duplicated string values whose count grew most.

``diff(paths)`` reads each dump once (its statistics by type, as ``stats`` computes them) and compares them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..graph.roots import ROOT_KINDS

if TYPE_CHECKING:
    from ..analyses.filters import ObjectFilter
    from ..graph.objectgraph import ObjectGraph
    from ..session import Session
    from .dump import Dump

UNNAMED = "<unknown type, MT {:#x}>"


@dataclass
class DumpTotals:
    """One dump's side of a comparison."""

    path: str
    runtime: str
    arch: str
    types: dict[str, list[Any]]  # name -> [count, SOS bytes, aligned bytes, retained bytes or None]
    strings: Counter[str] | None = None  # value -> count (with strings asked for)

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "runtime": self.runtime, "arch": self.arch,
                "count": sum(v[0] for v in self.types.values()), "bytes": sum(v[1] for v in self.types.values())}


@dataclass
class DiffRow:
    """One type across the dumps: its count and bytes in each (0 where it is not there)."""

    name: str
    counts: list[int]
    sizes: list[int]
    retained: list[int] = field(default_factory=list)  # with the object graph only

    @property
    def delta_count(self) -> int:
        return self.counts[-1] - self.counts[0]

    @property
    def delta_bytes(self) -> int:
        return self.sizes[-1] - self.sizes[0]

    @property
    def delta_retained(self) -> int | None:
        return self.retained[-1] - self.retained[0] if self.retained else None

    @property
    def status(self) -> str:
        """new (only in the last), gone (not in the last), or changed / same (count, bytes and, with the object
        graph, retained bytes: a type whose objects stay while what they hold grows has changed)."""
        if not self.counts[0] and self.counts[-1]:
            return "new"
        if self.counts[0] and not self.counts[-1]:
            return "gone"
        return "changed" if self.delta_count or self.delta_bytes or self.delta_retained else "same"

    @property
    def grew_every_step(self) -> bool:
        return len(self.sizes) > 2 and all(b > a for a, b in zip(self.sizes, self.sizes[1:]))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status}
        if len(self.counts) == 2:
            out.update(count_before=self.counts[0], count_after=self.counts[1], bytes_before=self.sizes[0],
                       bytes_after=self.sizes[1])
            if self.retained:
                out.update(retained_before=self.retained[0], retained_after=self.retained[1])
        else:
            out.update(counts=self.counts, bytes=self.sizes, grew_every_step=self.grew_every_step)
            if self.retained:
                out["retained"] = self.retained
        out.update(delta_count=self.delta_count, delta_bytes=self.delta_bytes)
        if self.retained:
            out["delta_retained"] = self.delta_retained
        return out


@dataclass
class Diff:
    """What :func:`diff` found: iterating over it gives its rows (:class:`DiffRow`), as ``len`` counts them."""

    dumps: list[DumpTotals]  # in the order given
    rows: list[DiffRow]  # sorted
    #: (value, [count per dump]) of duplicated values that grew
    strings: list[tuple[str, list[int]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[DiffRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> DiffRow:
        return self.rows[i]


def totals_of(dump: Dump, live: bool = False, roots: tuple[str, ...] = ROOT_KINDS, strings: bool = False,
              jobs: int | None = None) -> DumpTotals:
    """One dump's per-type totals (by name).

    Args:
        dump: the open dump.
        live: only the objects the roots reach, with each type's retained bytes.
        roots: the root kinds liveness starts from.
        strings: also count every string value.
        jobs: processes that share the heap walk (None: by the heap's size).
    """
    return _session_totals(dump._session, live, roots, strings, jobs)


def _session_totals(session: Session, live: bool = False, roots: tuple[str, ...] = ROOT_KINDS,
                   strings: bool = False, jobs: int | None = None) -> DumpTotals:
    """:func:`totals_of` over the engine's session (the model's own callers)."""
    from ..analyses.filters import ObjectFilter
    from .summaries import type_totals

    session.require_exact("comparing dumps by type")
    selected: ObjectFilter | None = None
    retained_by_name: dict[str, int] = {}
    if live:
        graph = session.object_graph(tuple(roots))
        free = frozenset(m for m, t in session.mts.known().items() if t.kind == "free")
        selected = ObjectFilter(live_addresses=graph.graph.addresses[graph.live], live=True, free_method_tables=free)
        retained_by_name = _retained_by_type(session, graph)
    result = type_totals(session, selected, jobs)
    types: dict[str, list[Any]] = {}
    for mt, (n, size, aligned) in result.totals.items():
        name = session.type_name(mt) or UNNAMED.format(mt)
        row = types.setdefault(name, [0, 0, 0, None])
        row[0] += n
        row[1] += size
        row[2] += aligned
    for name, value in retained_by_name.items():
        if name in types:
            types[name][3] = value
    counter: Counter[str] | None = None
    if strings:
        counter = Counter(s.value for s in session.strings()  # (a string whose value is unreadable is none)
                          if s.value is not None and (not live or bool(_is_live(selected, s.address))))
    rt = session.runtime
    return DumpTotals(session.dump.path, f"{rt.flavor} {rt.version or '?'}", session.dump.arch, types, counter)


def _is_live(selected: ObjectFilter | None, address: int) -> bool:
    from ..analyses.filters import is_in

    assert selected is not None  # asked only with the live objects selected
    return bool(is_in(selected.live_addresses, [address])[0])


def _retained_by_type(session: Session, graph: ObjectGraph) -> dict[str, int]:
    """Each type's retained bytes, by name."""
    out: dict[str, int] = {}
    for mt, (_, _, retained) in graph.by_type().items():
        name = session.type_name(mt) or UNNAMED.format(mt)
        out[name] = out.get(name, 0) + retained
    return out


def compare(sides: list[DumpTotals], sort: str = "bytes") -> Diff:
    """The rows of a comparison, the largest growth first.

    Args:
        sides: each dump's totals, oldest first.
        sort: "bytes", "count" or "retained".
    """
    names = sorted(set[str]().union(*(s.types for s in sides)))
    with_retained = all(any(v[3] is not None for v in s.types.values()) for s in sides)
    rows: list[DiffRow] = []
    for name in names:
        values = [s.types.get(name, [0, 0, 0, None]) for s in sides]
        rows.append(DiffRow(name, [v[0] for v in values], [v[1] for v in values],
                            [v[3] or 0 for v in values] if with_retained else []))
    key = {"bytes": lambda r: (-r.delta_bytes, -r.delta_count, r.name),
           "count": lambda r: (-r.delta_count, -r.delta_bytes, r.name),
           "retained": lambda r: (-(r.delta_retained or 0), -r.delta_bytes, r.name)}[sort]
    rows.sort(key=key)
    warnings: list[str] = []
    first = sides[0]
    for s in sides[1:]:
        if (s.runtime, s.arch) != (first.runtime, first.arch):
            warnings.append(f"{s.path} is {s.runtime} {s.arch} and {first.path} {first.runtime} {first.arch}: "
                            "object sizes differ between runtimes and architectures, so bytes are not comparable "
                            "(both are shown)")
    strings: list[tuple[str, list[int]]] = []
    counters = [s.strings for s in sides if s.strings is not None]
    if len(counters) == len(sides):
        every = set[str]().union(*counters)
        grown = [(v, [c.get(v, 0) for c in counters]) for v in every]
        grown = [(v, c) for v, c in grown if c[-1] > 1 and c[-1] > c[0]]
        grown.sort(key=lambda vc: (-(vc[1][-1] - vc[1][0]), vc[0]))
        strings = grown
    return Diff(sides, rows, strings, warnings)


def diff(*paths: str, live: bool = False, roots: tuple[str, ...] = ROOT_KINDS, strings: bool = False,
         sort: str = "bytes") -> Diff:
    """Compare dumps of one application, oldest first.

    Args:
        *paths: two dumps or more, oldest first.
        live: only the objects the roots reach, with each type's retained bytes.
        roots: the root kinds liveness starts from (with ``live``).
        strings: also the duplicated string values whose count grew most.
        sort: the rows' order: "bytes", "count" or "retained" (the largest growth first).

    Returns:
        A :class:`Diff`: iterating over it gives its rows (:class:`DiffRow`).
    """
    from ..limits import DEFAULT_LIMITS
    from .dump import open as open_dump

    if len(paths) < 2:
        raise ValueError("diff compares two dumps or more")
    sides = []
    for path in paths:
        with open_dump(path, limits=DEFAULT_LIMITS) as dump:
            sides.append(totals_of(dump, live, roots, strings))
    return compare(sides, sort)


def native_totals(dump: Dump) -> dict[str, dict[str, tuple[int, int]]]:
    """A dump's native heap for ``diff --native``.

    Args:
        dump: the open dump.

    Returns:
        ``size_classes`` (in-use chunks by size class) and ``owners`` (native chunks and bytes by owning managed
        type, :mod:`clrlayout.model.native`), each a (count, bytes) by key.

    Raises:
        clrlayout.errors.NativeHeapNotFound: the dump has no glibc heap to read.
    """
    from ..native import figures
    from .native import native_heap

    session = dump._session
    view = native_heap(session.dump, session if session.heap.exact else None)
    classes = {f"{c['from']}-{c['to']}": (c["in_use"]["count"], c["in_use"]["bytes"])
               for c in figures.size_classes(view.heap)}
    owners = {r["type"]: (r["chunks"], r["bytes"]) for r in view.by_owner()}
    return {"size_classes": classes, "owners": owners}


def native_compare(sides: list[dict[str, dict[str, tuple[int, int]]]]) -> list[dict[str, Any]]:
    """Rows of ``diff --native``.

    Args:
        sides: each dump's :func:`native_totals`, oldest first.

    Returns:
        Each size class (in-use chunks) and each owning type, its count and bytes in every dump and the change
        from the first to the last, the largest growth first within each kind.
    """
    rows: list[dict[str, Any]] = []
    for kind in ("size_classes", "owners"):
        keys = sorted({k for s in sides for k in s[kind]})
        part = []
        for key in keys:
            counts = [s[kind].get(key, (0, 0))[0] for s in sides]
            sizes = [s[kind].get(key, (0, 0))[1] for s in sides]
            part.append({"kind": "size class" if kind == "size_classes" else "owner", "key": key, "counts": counts,
                         "bytes": sizes, "delta_count": counts[-1] - counts[0], "delta_bytes": sizes[-1] - sizes[0]})
        rows += sorted(part, key=lambda r: (-r["delta_bytes"], r["key"]))
    return rows
