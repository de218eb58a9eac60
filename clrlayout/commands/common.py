"""What the commands share: the output and warning writers, the shared options and filters, opening a dump,
what qualifies an answer (before and after it), and the messages for a type or MethodTable not found."""

from __future__ import annotations

import re

import click

from ..errors import NotExact, OutputError, RedactedPart, UnsupportedType, UsageError, as_flags
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


def emit(result, fmt: str) -> None:
    """Write a command's :class:`~clrlayout.present.results.Result` in the format asked for."""
    from ..present.results import render

    for line in render(result, fmt):
        out(line)


def format_option(*formats: str, help: str | None = None):
    """--format: the forms of the command's answer (the first is the default)."""
    return click.option("--format", "fmt", type=click.Choice(list(formats)), default=formats[0], show_default=True,
                        help=help)


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
    from ..model.heap import HEAP_CODES

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
    """The dump, opened through the model (:func:`clrlayout.model.open`) with the command line's index choice."""
    from ..model import open as open_dump

    ctx = click.get_current_context(silent=True)
    index = ctx.meta.get("clrlayout.index") if ctx is not None else None
    return open_dump(file, method_table=mt, profile=profile, heap=heap, limits=limits_from_env(),
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
    from ..model.listing import StringFilter

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


def _preamble(dump, quiet: bool) -> None:
    """What qualifies the whole answer (a heuristic scan, a truncated file, memory the dump lacks), on
    stderr before the answer: on a big dump the listing would bury it."""
    for w in dump.unshown_warnings():
        if not quiet:
            warn(w)


def _redacted_values(dump, quiet: bool, by_value=()) -> None:
    """On a dump ``trim --redact`` wrote, whose values are zeros: options that select by value (``by_value``, the
    flags given) refuse, since every answer would be wrong; values that are printed are said to be zeros."""
    redacted = dump.redacted
    if redacted is None:
        return
    if by_value:
        raise RedactedPart(f"{', '.join(by_value)}: this dump was {redacted}; an answer by value would be "
                           "wrong (use the original dump)")
    if not quiet:
        warn(f"this dump was {redacted}: the values shown are zeros, not the program's")


def _report(dump, quiet: bool, strict: bool = False) -> None:
    """After the answer: what the walk found (heap anomalies, each at its address) and any warning that came
    up since the preamble.  Under --strict, an answer that is not exact and complete is an error."""
    later = dump.unshown_warnings()
    if not quiet:
        for w in later:
            warn(w)
        f = dump.findings
        for item in f:
            warn(str(item))
        if f.count > len(f.items):
            warn(f"... and {f.count - len(f.items)} more findings")
    if strict:
        problems = dump.problems()
        if problems:
            raise NotExact("not exact and complete (--strict): " + "; ".join(problems))


EXIT_CODES = ("Exit codes: 0 ok; 1 an answer not exact and complete under --strict, or a failed live check; "
              "2 usage; 3 unreadable, "
              "truncated or unsupported dump; 4 no .NET runtime, GC heap or System.String type found; 5 bad "
              "layout profile; 6 output not written; 7 live runtime not installed; 8 out of memory; 70 a bug in "
              "clrlayout.")


def _print_object_layout(dump, obj, heap_name: str, fmt: str, full: bool, lay=None) -> None:
    from ..model.layouts import object_layout, runtime_label, type_problems
    from ..present.jsonout import object_record
    from ..present.listing import layout_result

    lay = lay or object_layout(dump, obj, full)
    name = obj.type_name or f"<unknown type, MT {obj.method_table:#x}>"
    title = f"{name} at {obj.address:#x} (MethodTable {obj.method_table:#x}, {runtime_label(dump)}, {heap_name}):"
    emit(layout_result(object_record(obj, heap_name), lay, title, type_problems(dump, obj.method_table), full), fmt)


def _progress(dump, fmt: str, rows_to=None):
    """The progress bar of a walk of the heap, on a terminal, for the table form (a program reads the others)."""
    from ..model.listing import heap_bytes
    from ..present.progress import ScanProgress

    return ScanProgress(heap_bytes(dump), fmt == "table", rows_to)


def make_object_filter(min_size, max_size, generations, address_range, mt):
    from ..model.listing import ObjectFilter

    make_filter(None, None, None, None, address_range, min_size, max_size)  # the same checks as for strings
    return ObjectFilter(tuple(address_range) if address_range else None, min_size, max_size, generations, mt)


# --- roots and liveness: --roots KINDS, --live / --dead ----------------------------------------------------


def _kinds(ctx, param, value):
    from ..model.heap import ROOT_KINDS

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


def with_liveness(dump, selected, live, kinds, totals=False):
    """``selected`` keeping only the live (or dead) objects of the dump's object graph (--live, --dead), after
    the checks of the options that go with them (``totals``: for totals by type, see ``select_live``)."""
    from ..model.liveness import select_live

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
    selected, unreached = select_live(dump, selected, live, kinds, with_frozen, totals)
    if unreached and not ctx.params.get("quiet"):
        click.echo(f"clrlayout: {unreached:,} objects of frozen segments that no root reaches are not listed as "
                   "dead: the GC never frees them (string literals, frozen objects); --gen frozen lists them, "
                   "--with-frozen adds them to --dead as SOS's -dead does", err=True)
    return selected
