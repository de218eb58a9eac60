"""What the dump is: the data ``info`` shows, the contract descriptor compared, the heap's types counted."""

from __future__ import annotations

from ..errors import ClrLayoutError
from ..util.arrays import distinct


class Describe:
    """What the dump is: the data ``info`` shows, the contract descriptor compared, the heap's types counted. (a part
    of :class:`~clrlayout.session.Session`)."""

    @property
    def info(self) -> dict:
        """What ``clrlayout info`` shows, as data (addresses as numbers: the presenter formats them): format, OS,
        arch, process, runtime, profile, memory, GC heap, String MethodTable and warnings — the session's and
        what finding these raised, which are the info's alone (the session's warnings are not added to).  No
        walk of the heap: ``types`` is None (:meth:`type_census` counts them)."""
        if self._info is None:
            self._info = self._make_info()
        return self._info

    def _make_info(self) -> dict:
        d = self.dump
        rt, heap = self.runtime, self.heap
        data = {
            "path": d.path,
            "format": d.format,
            "os": d.os,
            "os_version": d.os_version,
            "arch": d.arch,
            "pointer_size": d.pointer_size,
            "process": {"pid": d.pid, "name": d.process_name, "threads": len(d.threads)},
            #: the thread the dump was written for and its signal or exception code (None: a dump of a running
            #: process); the model adds the managed exception that thread has in flight (.NET 9+)
            "crash": dict(d.crash) if d.crash else None,
            #: the mark of a dump trim --redact wrote: what it lacks (None: not one)
            "redaction": d.redaction,
            "runtime": {
                "flavor": rt.flavor,
                "version": rt.version,
                "version_source": rt.version_source,
                "module": None if rt.module is None else {
                    "path": rt.module.path, "base": rt.module.base, "size": rt.module.size},
            },
            "profile": {"name": self.profile.name, "overrides": list(self.profile.applied_overrides),
                        "string_base_size": self.profile.string.base_size},
            "memory": {"ranges": len(d.memory.regions), "bytes": d.memory.total_bytes},
            #: a minidump's streams of types clrlayout does not read (a tool's own: Wine writes 0xfff0)
            "other_streams": list(getattr(d.container, "skipped_streams", None) or []),
            "gc_heap": {
                "method": heap.method,
                "exact": heap.exact,
                "missing_bytes": self.missing_heap_bytes(),
                "gc_mode": heap.gc_mode,
                "gc_dac_vars": None if heap.dac_vars is None else {
                    "address": heap.dac_vars.address,
                    "version": f"{heap.dac_vars.major}.{heap.dac_vars.minor}",
                    "generation_size": heap.dac_vars.generation_size},
                "segments": [{"kind": s.kind, "start": s.start, "end": s.end, "size": s.size,
                              "ephemeral": s.ephemeral} for s in heap.segments],
            },
        }
        found: list[str] = []  # the info's own warnings
        try:
            mt = self.string_method_table()
            m = self.mts.get(mt)
            data["string_method_table"] = mt
            data["string_method_table_base_size"] = m.base_size if m else None
        except ClrLayoutError as e:
            data["string_method_table"] = None
            data["string_method_table_base_size"] = None
            found.append(str(e))
        data["types"] = None  # counted by type_census (a walk of the heap), when asked for
        data["contract_descriptor"] = self._contract_info(found)
        data["warnings"] = list(self.warnings) + [w for w in found if w not in self.warnings]
        return data

    def _contract_info(self, found: list[str]) -> dict:
        """The contract descriptor as ``info`` shows it: where it is, what it holds, how the layouts and the
        MethodTables its globals point at compare with clrlayout's."""
        d, checks = self.contract, self.contract_checks
        if isinstance(d, str):
            return {"found": False, "reason": d}
        out = {"found": True, "address": d.address, "where": d.where, "json_bytes": d.json_bytes,
               "version": d.version, "baseline": d.baseline, "types": len(d.types), "globals": len(d.globals),
               "contracts": len(d.contracts)}
        if checks is not None:
            out["layout_values_checked"] = len(checks.checked)
            out["mismatches"] = [{"descriptor": m.descriptor, "says": m.says, "layout": m.layout,
                                  "expected": m.expected} for m in checks.mismatches]
            out["not_described"] = list(checks.not_described)
        out["method_tables"] = self.contract_method_tables(found)
        return out

    def contract_method_tables(self, found: list[str]) -> dict:
        """The MethodTables the contract descriptor's globals point at (String, free object, Object, ...), each
        with whether clrlayout finds the same: the String MethodTable it learned, the free-object shape, the
        name the metadata gives (``agrees`` None: the variable is not in the dump, or the type's name cannot be
        had); where clrlayout finds otherwise, a warning into ``found``."""
        out = {}
        from ..runtime.contract import method_table_variables

        for name, (expected, mt) in method_table_variables(self.contract, self.dump.memory).items():
            agrees = None
            if mt is not None:
                if expected == "string":
                    try:
                        agrees = self.string_method_table() == mt
                    except ClrLayoutError:  # none found: nothing to compare with
                        agrees = None
                elif expected == "free":
                    agrees = getattr(self.mts.get(mt), "kind", None) == "free"
                else:  # a MethodTable whose name cannot be had is not checked (agrees stays None)
                    found = self.type_name(mt)
                    agrees = None if found is None else found == expected
                if agrees is False:
                    found.append(f"the runtime's contract descriptor says {name} is {mt:#x}, which "
                                 f"clrlayout does not find to be {expected}")
            out[name] = {"method_table": mt, "expected": expected,
                         "agrees": agrees}
        return out

    def type_census(self) -> dict | None:
        """The heap's types: how many MethodTables its objects have (Free included), how many of them have
        a name, and why the others have none (reason -> count).  One walk of the exact heap; None without
        one, or without the MethodTable layout to name types by."""
        if not self.heap.exact or self.profile.method_table is None:
            return None
        seen: set[int] = set()
        for win in self.heap_steps().windows():
            seen.update(distinct(win.method_tables).tolist())
        why = self.why_unnamed(seen)
        unnamed = sum(why.values())
        return {"method_tables": len(seen), "named": len(seen) - unnamed, "unnamed": unnamed, "why_unnamed": why}

    def why_unnamed(self, method_tables) -> dict[str, int]:
        """Of these MethodTables, those without a name, by reason (most first)."""
        why: dict[str, int] = {}
        for mt in sorted(method_tables):
            if self.type_name(mt) is None:
                reason = self.names.why.get(mt, "unreadable MethodTable")
                why[reason] = why.get(reason, 0) + 1
        return dict(sorted(why.items(), key=lambda kv: -kv[1]))
