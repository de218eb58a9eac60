"""What the commands share: the output and warning writers, the shared options and filters, opening a dump,
what qualifies an answer (before and after it), and the messages for a type or MethodTable not found."""

from __future__ import annotations

import re

import click

from ..errors import NotExact, OutputError, RedactedPart, TypeNotFound, UnsupportedType, UsageError, as_flags
from ..limits import limits_from_env

STRING_TYPES = {"System.String", "string", "String"}


class Address(click.ParamType):
    """An address: ``0x…`` hex, or a hex string as WinDbg prints it (backticks allowed)."""

    name = "address"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).replace("`", "").strip().lower()
        try:
            return int(text, 16)  # WinDbg and SOS print addresses in hex, with or without 0x
        except ValueError:
            self.fail(f"{value!r} is not a hexadecimal address", param, ctx)


ADDRESS = Address()


def out(line: str = "") -> None:
    try:
        click.echo(line)
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OutputError(f"cannot write the output: {e.strerror or e}") from None


def flags_in(data):
    """``data`` (a model value: dicts, lists, strings) with every option named as the command line's flag."""
    if isinstance(data, str):
        return as_flags(data)
    if isinstance(data, dict):
        return {flags_in(k): flags_in(v) for k, v in data.items()}
    if isinstance(data, list):
        return [flags_in(v) for v in data]
    return data


def warn(message: str) -> None:
    click.echo(f"clrlayout: warning: {as_flags(message)}", err=True)


jobs_option = click.option(
    "--jobs", type=click.IntRange(min=1, max=64), default=None,
    help="Processes that share the heap walk (default: one per core available and per 64 MB of heap, so 1 "
         "for heaps under 128 MB). The results are the same either way.")


mt_option = click.option("--mt", type=ADDRESS, default=None,
                         help="Only the objects of this MethodTable (SOS -mt). A System.String MethodTable also "
                              "serves as the String MethodTable where the dump's cannot be found.")


profile_option = click.option("--profile", "profile", default=None, metavar="NAME[@VERSION]",
                              help="Use this layout profile (a file name in formats/, e.g. coreclr-x64@3.1).")


quiet_option = click.option("-q", "--quiet", is_flag=True, help="Do not print warnings.")


heap_option = click.option("--heap", "heap", type=click.Choice(["auto", "walk", "scan"]), default="auto",
                           show_default=True,
                           help="walk: exact heap walk from the GC's own data (fail if impossible); scan: checked "
                                "object scan; auto: walk when possible.")


def _regex(ctx, param, value):
    if value is None:
        return None
    try:
        return re.compile(value)
    except re.error as e:
        raise click.BadParameter(f"not a valid regular expression: {e}") from None


def _generations(ctx, param, value):
    """--gen 0,1,2,loh,poh,frozen (3 and 4 as SOS numbers the LOH and the POH) -> heap codes."""
    if not value:
        return None
    from ..heap.segments import HEAP_CODES

    names = {"0": "gen0", "1": "gen1", "2": "gen2", "3": "loh", "4": "poh"}
    codes = set()
    for item in value.split(","):
        name = names.get(item.strip().lower(), item.strip().lower())
        name = name if name in HEAP_CODES else "gen" + name if "gen" + name in HEAP_CODES else name
        if name not in HEAP_CODES or name == "soh":
            raise click.BadParameter(f"{item!r}: give 0, 1, 2, loh, poh or frozen")
        codes.add(HEAP_CODES[name])
    return frozenset(codes)


def filter_options(f):
    """--min-length, --max-length, --min-size, --max-size, --gen, --contains, --regex, --address-range:
    they compose (AND)."""
    f = click.option("--address-range", nargs=2, type=ADDRESS, default=None, metavar="START END",
                     help="Only objects at START <= address < END.")(f)
    f = click.option("--gen", "generations", callback=_generations, default=None, metavar="LIST",
                     help="Only objects on these heaps: 0, 1, 2, loh (3), poh (4), frozen (SOS -gen); a comma "
                          "list.")(f)
    f = click.option("--max-size", type=click.IntRange(min=0), default=None,
                     help="Only objects of at most N bytes (SOS size, as -max).")(f)
    f = click.option("--min-size", type=click.IntRange(min=0), default=None,
                     help="Only objects of at least N bytes (SOS size, as -min).")(f)
    f = click.option("--regex", callback=_regex, default=None, metavar="RE",
                     help="Only strings whose full value matches RE (Python syntax, searched anywhere).")(f)
    f = click.option("--contains", default=None, metavar="TEXT", help="Only strings whose value contains TEXT.")(f)
    f = click.option("--max-length", type=click.IntRange(min=0), default=None,
                     help="Only strings of at most N characters.")(f)
    f = click.option("--min-length", type=click.IntRange(min=0), default=None,
                     help="Only strings of at least N characters.")(f)
    return f


def scan_options(f):
    """What every command that scans a dump takes: --strict, the filters, --live/--dead and --roots, --mt,
    --profile, --heap, -q."""
    for option in (quiet_option, heap_option, profile_option, mt_option, filter_options, roots_option,
                   with_frozen_option, liveness_option, index_options,
                   click.option("--strict", is_flag=True, help="Exit 1 when the heap walk records anomalies.")):
        f = option(f)
    return f


def _open(file, mt, profile, heap, assemblies=()):
    from ..session import open_session

    ctx = click.get_current_context(silent=True)
    index = ctx.meta.get("clrlayout.index") if ctx is not None else None
    return open_session(file, mt=mt, profile=profile, heap=heap, limits=limits_from_env(),
                        assemblies=list(assemblies), index=index)


def _index_choice(ctx, param, value):
    if param.name == "no_index" and value:
        if "clrlayout.index" in ctx.meta:
            raise UsageError("--index and --no-index: give one of them")
        ctx.meta["clrlayout.index"] = False
    elif param.name == "index_dir" and value is not None:
        if ctx.meta.get("clrlayout.index") is False:
            raise UsageError("--index and --no-index: give one of them")
        ctx.meta["clrlayout.index"] = value
    return value


def index_options(f):
    """--index DIR and --no-index: where the heap graph's index is kept (clrlayout.graph.index)."""
    f = click.option("--no-index", "no_index", is_flag=True, expose_value=False, callback=_index_choice,
                     help="Neither read nor write the heap graph's index: walk the heap.")(f)
    return click.option("--index", "index_dir", type=click.Path(file_okay=False), default=None, expose_value=False,
                        callback=_index_choice, metavar="DIR",
                        help="Keep the heap graph's index in DIR (default: ~/.cache/clrlayout/index, for heaps of "
                             "200,000 objects or more): a second command on the dump maps it instead of walking "
                             "the heap.")(f)


def index_given() -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and "clrlayout.index" in ctx.meta


assemblies_option = click.option(
    "--assemblies", "assemblies", multiple=True, type=click.Path(file_okay=False, exists=True),
    help="A directory to find assemblies in when they are not at the paths the dump names (for type names, "
         "and the runtime's own file for its contract descriptor; may be given more than once).")


def make_filter(min_length, max_length, contains, regex, address_range, min_size=None, max_size=None,
                generations=None):
    from ..analyses.filters import StringFilter

    if min_length is not None and max_length is not None and min_length > max_length:
        raise UsageError(f"--min-length {min_length} is more than --max-length {max_length}: nothing can match")
    if min_size is not None and max_size is not None and min_size > max_size:
        raise UsageError(f"--min-size {min_size} is more than --max-size {max_size}: nothing can match")
    if address_range and address_range[1] <= address_range[0]:
        raise UsageError(f"--address-range {address_range[0]:#x} {address_range[1]:#x}: the end is not above "
                         f"the start")
    return StringFilter(min_length, max_length, contains, regex, tuple(address_range) if address_range else None,
                        min_size, max_size, generations)


def _type_check(type_name: str) -> None:
    if type_name not in STRING_TYPES:
        raise UnsupportedType(f"--type {type_name}: only System.String is supported")


def _preamble(session, quiet: bool) -> None:
    """What qualifies the whole answer (a heuristic scan, a truncated file, memory the dump lacks), on
    stderr before the answer: on a big dump the listing would bury it."""
    if not quiet:
        for w in session.warnings:
            warn(w)
    session.warned = len(session.warnings)


def _redacted_values(session, quiet: bool, by_value=()) -> None:
    """On a dump ``trim --redact`` wrote, whose values are zeros: options that select by value (``by_value``, the
    flags given) refuse, since every answer would be wrong; values that are printed are said to be zeros."""
    mark = session.dump.redaction
    if mark is None:
        return
    from ..dump.redaction import describe

    if by_value:
        raise RedactedPart(f"{', '.join(by_value)}: this dump was {describe(mark)}; an answer by value would be "
                           "wrong (use the original dump)")
    if not quiet:
        warn(f"this dump was {describe(mark)}: the values shown are zeros, not the program's")


def _report(session, quiet: bool, strict: bool = False) -> None:
    """After the answer: what the walk found (heap anomalies, each at its address) and any warning that came
    up since the preamble.  Under --strict, an answer that is not exact and complete is an error."""
    if not quiet:
        for w in session.warnings[getattr(session, "warned", 0):]:
            warn(w)
        f = session.findings
        for item in f:
            warn(str(item))
        if f.count > len(f.items):
            warn(f"... and {f.count - len(f.items)} more findings")
    if strict:
        problems = session.problems()
        if problems:
            raise NotExact("not exact and complete (--strict): " + "; ".join(problems))


EXIT_CODES = ("Exit codes: 0 ok; 1 an answer not exact and complete under --strict, or a failed live check; "
              "2 usage; 3 unreadable, "
              "truncated or unsupported dump; 4 no .NET runtime, GC heap or System.String type found; 5 bad "
              "layout profile; 6 output not written; 7 live runtime not installed; 8 out of memory; 70 a bug in "
              "clrlayout.")


def _no_objects_of(session, mt: int, asked: str, also: str = "") -> TypeNotFound:
    """--mt MT found nothing: either the dump holds no MethodTable there, or no object has it."""
    if session.mts.get(mt) is None:
        return TypeNotFound(f"--mt {mt:#x}: no MethodTable in the dump there")
    return TypeNotFound(f"{asked}: no object of this MethodTable{also} on the heap")


def _csv_field(value: str) -> str:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([value])
    return buf.getvalue()


def _object_layout(session, obj, full: bool):
    """The rows and bytes of one object of any type (strings included)."""
    from ..objects.instances import instance_layout

    h = session.profile.object.header_size
    data = session.dump.memory.read(obj.address - h, obj.aligned_size)
    if obj.method_table == session.mts.string_mt:  # a string: its own rows (length, characters, terminator)
        from ..findings import Findings
        from ..objects.layout import string_layout
        from ..objects.strings import read_strings

        s = read_strings(session.dump.memory, session.profile, [obj.address], obj.segment.large, Findings(0))
        if s:
            return string_layout(session.profile, s[0].length, s[0], data, obj.segment.large,
                                 max_value_chars=None if full else 60)
    element = session.array_element(obj.method_table) if obj.type.component_size else None
    referent = (lambda address: session.referent(address, None)) if full else session.referent
    return instance_layout(session.profile, session.type_layout(obj.method_table), obj.address, data, obj.size,
                           obj.aligned_size,
                           obj.count, element, referent, obj.segment.large, max_elements=None if full else 16)


def _print_object_layout(session, obj, heap_name: str, fmt: str, full: bool, lay=None) -> None:
    from ..present import hexview, jsonout, text

    lay_type = session.type_layout(obj.method_table)
    lay = lay or _object_layout(session, obj, full)
    if fmt == "jsonl":
        out(jsonout.dumps({**jsonout.object_record(obj, heap_name), "layout": jsonout.layout_record(lay),
                           **({"problems": list(lay_type.problems)} if lay_type.problems else {})}))
        return
    name = obj.type_name or f"<unknown type, MT {obj.method_table:#x}>"
    title = (f"{name} at {obj.address:#x} (MethodTable {obj.method_table:#x}, {session.runtime.flavor} "
             f"{session.runtime.version or '?'} {session.dump.arch}, {heap_name}):")
    for line in text.layout_table(lay, title):
        out(line)
    for problem in lay_type.problems:
        out(f"  (incomplete: {problem})")
    out()
    for line in hexview.hex_dump(lay, max_lines=None if full else hexview.MAX_LINES):
        out(line)
    out()


def _progress(session, enabled: bool, rows_to=None):
    from ..present.progress import ScanProgress

    return ScanProgress(sum(seg.size for seg in session.heap.segments) or session.dump.memory.total_bytes, enabled,
                        rows_to)


def make_object_filter(min_size, max_size, generations, address_range, mt):
    from ..analyses.filters import ObjectFilter

    make_filter(None, None, None, None, address_range, min_size, max_size)  # the same checks as for strings
    return ObjectFilter(tuple(address_range) if address_range else None, min_size, max_size, generations, mt)


def _named(session, method_tables, type_name: str, exact: bool) -> bool:
    """Whether one of ``method_tables`` has a name (as the DAC or reflection prints it) that is ``type_name``
    (``exact``) or contains it."""
    return any(session.is_named(mt, type_name, exact) for mt in method_tables)


def _type_not_found(session, type_name: str, exact: bool) -> TypeNotFound:
    """No object on the heap has a type of that name."""
    flag = f"--type {type_name}" + (" --exact" if exact else "")
    if session.method_tables_named(type_name):  # a parent, element or argument type of the heap's
        return TypeNotFound(f"{flag}: no object of this type on the heap (the type is there as another's "
                            f"parent, element or argument: `clrlayout type` shows its layout)")
    key = type_name.split("[")[0].split("`")[0].split(".")[-1]  # List`1[System.Int32] -> List
    similar = session.type_names_containing(key) if key else []
    return TypeNotFound(f"{flag}: no type " + ("of that name" if exact else "whose name contains it")
                        + " on the heap" + (f" (names like it: {'; '.join(similar)})" if similar else
                                            " (stats lists the heap's types)"))


# --- roots and liveness: --roots KINDS, --live / --dead ----------------------------------------------------


def _kinds(ctx, param, value):
    from ..graph.roots import ROOT_KINDS

    if value is None:
        return ROOT_KINDS
    kinds = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    wrong = [k for k in kinds if k not in ROOT_KINDS]
    if wrong or not kinds:
        raise click.BadParameter(f"{', '.join(wrong) or value!r}: give a comma list of {', '.join(ROOT_KINDS)}")
    return kinds


roots_option = click.option(
    "--roots", "kinds", callback=_kinds, default=None, metavar="KINDS",
    help="The roots: a comma list of handles (strong, pinned, async pinned, ref-counted, sized-ref handles), "
         "finalizer (objects ready for finalization), stacks (each managed thread's live references by its frames' GC "
         "info in x64 Linux cores of .NET Core 3.1 and .NET 8+; elsewhere every thread's stack, scanned "
         "conservatively), "
         "statics (each thread's thread statics on .NET 9+; before, handles hold the statics); default all.")


liveness_option = click.option(
    "--live/--dead", "live", default=None,
    help="Only the objects reachable from the roots (--live), or only those that are not (--dead), as SOS's "
         "-live/-dead; free space is neither, and neither are the objects of frozen segments no root reaches "
         "(string literals the GC never frees: --gen frozen lists them).")


def _with_frozen(ctx, param, value):
    ctx.meta["clrlayout.with_frozen"] = value
    return value


with_frozen_option = click.option(
    "--with-frozen", is_flag=True, expose_value=False, callback=_with_frozen,
    help="With --dead: also the objects of frozen segments that no root reaches, as SOS's -dead lists them.")


def with_liveness(session, selected, live, kinds):
    """``selected`` keeping only the live (or dead) objects of the session's object graph."""
    import dataclasses

    import numpy as np

    ctx = click.get_current_context()
    with_frozen = ctx.meta.get("clrlayout.with_frozen", False)
    if with_frozen and live is not False:
        raise UsageError("--with-frozen adds the frozen segments' unreachable objects to --dead: give --dead")
    if live is None:
        source = ctx.get_parameter_source("kinds")
        if source is not None and source is not click.core.ParameterSource.DEFAULT:
            raise UsageError("--roots chooses the roots of --live or --dead: give one of them")
        if index_given():
            raise UsageError("--index and --no-index are for the object graph of --live or --dead: give one of them")
        return selected
    graph = session.object_graph(kinds)
    keep = graph.live
    frozen = [(seg.start, seg.end) for seg in session.heap.segments if seg.kind == "frozen"]
    if live is False and frozen and not with_frozen:  # the GC never frees them: not dead
        addresses = graph.graph.addresses
        in_frozen = np.zeros(len(addresses), dtype=bool)
        for lo, hi in frozen:
            in_frozen |= (addresses >= lo) & (addresses < hi)
        unreached = int(np.count_nonzero(in_frozen & ~keep))
        keep = keep | in_frozen
        if unreached and not ctx.params.get("quiet"):
            click.echo(f"clrlayout: {unreached:,} objects of frozen segments that no root reaches are not listed as "
                       "dead: the GC never frees them (string literals, frozen objects); --gen frozen lists them, "
                       "--with-frozen adds them to --dead as SOS's -dead does", err=True)
    live_addresses = graph.graph.addresses[keep]
    if hasattr(selected, "free_method_tables"):
        free = frozenset(m for m, t in session.mts.known().items() if t.kind == "free")
        return dataclasses.replace(selected, live_addresses=live_addresses, live=live, free_method_tables=free)
    return dataclasses.replace(selected, live_addresses=live_addresses, live=live)
