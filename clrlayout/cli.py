"""The ``clrlayout`` command.  Commands are thin: options -> library -> presenter.

Errors are mapped to exit codes in one place (:func:`main`): a :class:`ClrLayoutError` prints one line on
stderr and exits with its code; anything else is a bug and exits 70 with one line (a traceback only with
``CLRLAYOUT_DEBUG=1``).  Data goes to stdout, warnings and errors to stderr.
"""

from __future__ import annotations

import os
import re
import sys

# numpy's OpenBLAS starts a thread per core when it is imported, which spins for about 0.1 s; clrlayout does
# no linear algebra, and on a small machine the spinning takes a core from the walk
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click
import numpy as np

from . import __version__
from .errors import (ClrLayoutError, ExitCode, HeapNotFound, NotExact, OutputError, TypeNotFound, UnsupportedType,
                     UsageError)
from .limits import limits_from_env

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


def warn(message: str) -> None:
    click.echo(f"clrlayout: warning: {message}", err=True)


# --- shared options ---------------------------------------------------------------------------------

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
    from .heap.segments import HEAP_CODES

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
    f = click.option("--max-length", type=click.IntRange(min=0), default=None, help="Only strings of at most N characters.")(f)
    f = click.option("--min-length", type=click.IntRange(min=0), default=None, help="Only strings of at least N characters.")(f)
    return f


def scan_options(f):
    """What every command that scans a dump takes: --strict, the filters, --mt, --profile, --heap, -q."""
    for option in (quiet_option, heap_option, profile_option, mt_option, filter_options,
                   click.option("--strict", is_flag=True, help="Exit 1 when the heap walk records anomalies.")):
        f = option(f)
    return f


def _open(file, mt, profile, heap, assemblies=()):
    from .session import open_session

    return open_session(file, mt=mt, profile=profile, heap=heap, limits=limits_from_env(),
                        assemblies=list(assemblies))


assemblies_option = click.option(
    "--assemblies", "assemblies", multiple=True, type=click.Path(file_okay=False, exists=True),
    help="A directory to find assemblies in when they are not at the paths the dump names (for type names, "
         "and the runtime's own file for its contract descriptor; may be given more than once).")


def make_filter(min_length, max_length, contains, regex, address_range, min_size=None, max_size=None,
                generations=None):
    from .analyses.filters import StringFilter

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
              "layout profile; 6 output not written; 7 live runtime not installed; 70 a bug in clrlayout.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="clrlayout")
def cli():
    """Show how .NET objects sit in memory, byte by byte, from a crash dump (no DAC needed).

    Reads Windows minidumps (x86, x64) and Linux ELF cores of .NET Framework 4.x and CoreCLR processes.
    """


# --- info -------------------------------------------------------------------------------------------


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@mt_option
@profile_option
@heap_option
@assemblies_option
@quiet_option
def info(file, fmt, mt, profile, heap, assemblies, quiet):
    """What the dump holds: format, architecture, runtime, GC heap, String MethodTable, the heap's types."""
    from .present import info as present

    with _open(file, mt, profile, heap, assemblies) as a:
        data = a.info
        _preamble(a, quiet)
        if fmt == "json":
            from .present.jsonout import dumps

            out(dumps(data))
        else:
            for line in present.info_lines(data):
                out(line)
        _report(a, quiet)


# --- dump -------------------------------------------------------------------------------------------


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--type", "type_name", default="System.String", show_default=True,
              help="The types to list: every type whose name contains TEXT, as SOS -type (as the DAC or as "
                   "reflection prints it; --exact: the whole name).")
@click.option("--exact", is_flag=True, help="--type is a whole type name, not a part of one.")
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl", "csv"]), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Stop after N objects.")
@click.option("--layout", is_flag=True, help="Print each object's field layout and an annotated hex dump.")
@click.option("--full", is_flag=True, help="Whole values in the table (not cut at 80 characters) and the whole hex "
              "dump with --layout (not cut at 64 lines).")
@jobs_option
@assemblies_option
@scan_options
def dump(file, type_name, exact, fmt, limit, layout, full, jobs, assemblies, strict, min_length, max_length,
         min_size, max_size, generations, contains, regex, address_range, mt, profile, heap, quiet):
    """List every object of a type (SOS !dumpheap -type + !DumpObj), optionally with its layout."""
    from . import parallel
    from .present import batchlines, text

    if layout and fmt == "csv":
        raise UsageError("--layout has no CSV form: use --format table or jsonl")
    by_mt = None  # --mt of a type other than System.String: the objects of that MethodTable (SOS -mt)
    if mt is not None and type_name in STRING_TYPES and \
            click.get_current_context().get_parameter_source("type_name") is click.core.ParameterSource.DEFAULT:
        with _open(file, None, profile, heap) as a:
            if not a.is_string_method_table(mt):
                by_mt, type_name = mt, None
    elif mt is not None and type_name not in STRING_TYPES:
        by_mt = mt
    if type_name not in STRING_TYPES:
        string_only = [n for n, v in (("--min-length", min_length), ("--max-length", max_length),
                                      ("--contains", contains), ("--regex", regex)) if v is not None]
        if string_only:
            raise UsageError(f"{', '.join(string_only)}: only for System.String, not --type {type_name}")
        return _dump_objects(file, type_name, exact, fmt, limit, layout, full, assemblies, strict,
                             make_object_filter(min_size, max_size, generations, address_range, None), by_mt,
                             profile, heap, quiet)
    selected = make_filter(min_length, max_length, contains, regex, address_range, min_size, max_size, generations)
    with _open(file, mt, profile, heap) as a:
        ptr = a.profile.pointer_size
        a.string_method_table()
        _preamble(a, quiet)
        if fmt == "table" and not layout:
            out(text.dumpheap_header(ptr))
        if fmt == "csv":
            out(batchlines.CSV_HEADER)
        render = batchlines.renderer(fmt, ptr, value_limit=None if full else text.VALUE_LIMIT,
                                     heap_bytes=sum(seg.size for seg in a.heap.segments) or a.dump.memory.total_bytes)
        progress = _progress(a, enabled=fmt == "table", rows_to=sys.stdout)
        if not layout and limit is None and a.windowed:
            def render_window(win):
                step = parallel.StepOutput()
                chunks = []
                for batch in a.window_batches(win):
                    batch = selected.apply(batch)
                    if len(batch):
                        step.count += len(batch)
                        step.size += int(batch.sizes.sum())
                        step.aligned += int(batch.aligned_sizes.sum())
                        chunks += render(batch)
                step.data = chunks
                return step

            sys.stdout.flush()
            count, size, aligned = parallel.run_steps(a, render_window, share=parallel.can_share(a, jobs),
                                                      progress=progress.advance, on_found=progress.found)
        else:
            count = size = aligned = 0
            for batch in a.iter_batches(progress.advance):
                progress.found(len(batch))
                batch = selected.apply(batch)
                if limit is not None and count + len(batch) > limit:
                    batch = batch.select(np.arange(len(batch)) < limit - count)
                if not len(batch):
                    if limit is not None and count >= limit:
                        break
                    continue
                count += len(batch)
                size += int(batch.sizes.sum())
                aligned += int(batch.aligned_sizes.sum())
                if layout:
                    for s in batch.objects():
                        _print_layout(a, s, fmt, full)
                else:
                    sys.stdout.flush()
                    parallel.write_out(render(batch))  # a list of bytes
        progress.close()
        if fmt == "table":
            out(text.total_line(count, size, aligned))
        _report(a, quiet, strict)


def _dump_objects(file, type_name, exact, fmt, limit, layout, full, assemblies, strict, selected, mt, profile,
                  heap, quiet):
    """dump --type NAME (a type other than System.String: every type whose name contains it, or is it with
    ``exact``) and/or --mt MT (a MethodTable other than String's): Address, MT, Size and the name (!dumpheap
    -type / -mt), each object's JOL layout with --layout; ``selected``: the objects the other filters keep."""
    from .present import jsonout, text

    asked = " ".join(([f"--type {type_name}"] if type_name else []) + ([f"--mt {mt:#x}"] if mt is not None else []))
    with _open(file, None, profile, heap, assemblies) as a:
        a.require_exact(asked)
        _preamble(a, quiet)
        ptr = a.profile.pointer_size
        count = size = aligned = 0
        found = False
        for obj in a.objects_named(type_name, mt, exact=exact):
            if not found:  # the header once the type is known to be there
                found = True
                if fmt == "table" and not layout:
                    out(text.objects_header(ptr))
                if fmt == "csv":
                    out("address,method_table,size,aligned_size,length,heap,type")
            if not selected.accepts(obj):
                continue
            if limit is not None and count >= limit:
                break
            heap_name = obj.segment.generation(obj.address)
            count += 1
            size += obj.size
            aligned += obj.aligned_size
            if layout:
                _print_object_layout(a, obj, heap_name, fmt, full)
            elif fmt == "table":
                out(text.object_line(obj, ptr))
            elif fmt == "jsonl":
                out(jsonout.dumps(jsonout.object_record(obj, heap_name)))
            else:
                out(",".join([f"{obj.address:#x}", f"{obj.method_table:#x}", str(obj.size), str(obj.aligned_size),
                              str(obj.count) if obj.type.component_size else "", heap_name,
                              _csv_field(jsonout.csv_value(obj.type_name or ""))]))
        if not found and mt is not None:
            if type_name and a.mts.get(mt) is not None and not a.is_named(mt, type_name, exact):
                raise TypeNotFound(f"--mt {mt:#x} is {a.type_name(mt) or 'a type without a name'}, not a type "
                                   f"{'named' if exact else 'whose name contains'} {type_name!r} (--type)")
            raise _no_objects_of(a, mt, asked)
        if not found:
            raise _type_not_found(a, type_name, exact)
        if fmt == "table":
            out(text.total_line(count, size, aligned, noun=("object", "objects")))
        _report(a, quiet, strict)


def _no_objects_of(a, mt: int, asked: str, also: str = "") -> TypeNotFound:
    """--mt MT found nothing: either the dump holds no MethodTable there, or no object has it."""
    if a.mts.get(mt) is None:
        return TypeNotFound(f"--mt {mt:#x}: no MethodTable in the dump there")
    return TypeNotFound(f"{asked}: no object of this MethodTable{also} on the heap")


def _csv_field(value: str) -> str:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([value])
    return buf.getvalue()


def _object_layout(a, obj, full: bool):
    """The rows and bytes of one object of any type (strings included)."""
    from .objects.instances import instance_layout

    h = a.profile.object.header_size
    data = a.dump.memory.read(obj.address - h, obj.aligned_size)
    if obj.method_table == a.mts.string_mt:  # a string: its own rows (length, characters, terminator)
        from .findings import Findings
        from .objects.layout import string_layout
        from .objects.strings import read_strings

        s = read_strings(a.dump.memory, a.profile, [obj.address], obj.segment.large, Findings(0))
        if s:
            return string_layout(a.profile, s[0].length, s[0], data, obj.segment.large,
                                 max_value_chars=None if full else 60)
    element = a.array_element(obj.method_table) if obj.type.component_size else None
    referent = (lambda address: a.referent(address, None)) if full else a.referent
    return instance_layout(a.profile, a.type_layout(obj.method_table), obj.address, data, obj.size, obj.aligned_size,
                           obj.count, element, referent, obj.segment.large, max_elements=None if full else 16)


def _print_object_layout(a, obj, heap_name: str, fmt: str, full: bool, lay=None) -> None:
    from .present import hexview, jsonout, text

    lay_type = a.type_layout(obj.method_table)
    lay = lay or _object_layout(a, obj, full)
    if fmt == "jsonl":
        out(jsonout.dumps({**jsonout.object_record(obj, heap_name), "layout": jsonout.layout_record(lay),
                           **({"problems": list(lay_type.problems)} if lay_type.problems else {})}))
        return
    name = obj.type_name or f"<unknown type, MT {obj.method_table:#x}>"
    title = (f"{name} at {obj.address:#x} (MethodTable {obj.method_table:#x}, {a.runtime.flavor} "
             f"{a.runtime.version or '?'} {a.dump.arch}, {heap_name}):")
    for line in text.layout_table(lay, title):
        out(line)
    for problem in lay_type.problems:
        out(f"  (incomplete: {problem})")
    out()
    for line in hexview.hex_dump(lay, max_lines=None if full else hexview.MAX_LINES):
        out(line)
    out()


def _progress(a, enabled: bool, rows_to=None):
    from .present.progress import ScanProgress

    return ScanProgress(sum(seg.size for seg in a.heap.segments) or a.dump.memory.total_bytes, enabled, rows_to)


def _print_layout(a, s, fmt: str = "table", full: bool = False) -> None:
    from .objects.layout import string_layout
    from .present import hexview, text
    from .objects.strings import object_span

    start, span = object_span(a.profile, s.address, s.length, s.large)
    data = a.dump.memory.read(start, span)
    if fmt == "jsonl":
        from .present.jsonout import dumps, layout_record, string_record

        lay = string_layout(a.profile, s.length, s, data, s.large)
        out(dumps({**string_record(s), "layout": layout_record(lay)}))
        return
    lay = string_layout(a.profile, s.length, s, data, s.large, max_value_chars=None if full else 60)
    title = (f"System.String at {s.address:#x} (MethodTable {s.method_table:#x}, "
             f"{a.runtime.flavor} {a.runtime.version or '?'} {a.dump.arch}, {s.heap}):")
    for line in text.layout_table(lay, title):
        out(line)
    out()
    for line in hexview.hex_dump(lay, max_lines=None if full else hexview.MAX_LINES):
        out(line)
    out()


# --- memory -----------------------------------------------------------------------------------------


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--ranges", "with_ranges", is_flag=True, help="Also list every range: start, size, kind, owner.")
@jobs_option
@quiet_option
@heap_option
@profile_option
def memory(file, fmt, with_ranges, jobs, quiet, heap, profile):
    """Where the memory went (!address -summary + !eeheap -gc): every byte of the dump by kind (GC heap,
    stacks, images, the runtime's loader heaps, mapped files, native), the address space by state, type and
    protection (minidumps), and the GC heap's object and free bytes per heap and generation."""
    from . import parallel
    from .analyses import memory as analysis
    from .present import memory as present

    with _open(file, None, profile, heap) as a:
        _preamble(a, quiet)
        heaps, bookkeeping, handles = a.loader_heaps(), a.gc_bookkeeping(), a.gc_handle_tables()
        pieces = analysis.paint(list(a.dump.memory.iter_runs()), analysis.claims(a, heaps, bookkeeping, handles))
        gc = None
        if a.heap.exact and a.profile.method_table is not None:
            gc = analysis.GcFigures()

            def collect(win):
                return parallel.StepOutput(extra=analysis.gc_window(win, a.mts))

            a.string_method_table()
            with _progress(a, enabled=fmt == "table") as progress:
                parallel.run_steps(a, collect, share=parallel.can_share(a, jobs, writes=False),
                                   progress=progress.advance, on_found=progress.found, absorb=gc.merge)
            gc.segments = analysis.segment_figures(a.heap.segments)
        mm = analysis.MemoryMap(a.dump.memory.total_bytes, pieces, gc, analysis.address_space(a.dump.memory_info),
                                heaps, bookkeeping, handles)
        for line in present.render(mm, fmt, with_ranges, a.profile.pointer_size):
            out(line)
        _report(a, quiet)


# --- object -----------------------------------------------------------------------------------------


@cli.command("object")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("address", type=ADDRESS)
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True)
@click.option("--full", is_flag=True, help="Whole values and the whole hex dump.")
@assemblies_option
@quiet_option
@heap_option
@profile_option
def object_(file, address, fmt, full, assemblies, quiet, heap, profile):
    """The object that holds ADDRESS (any address inside it, header included): its type, where it starts,
    the field ADDRESS falls in, and its layout (like dump --layout)."""
    from .present import jsonout

    with _open(file, None, profile, heap, assemblies) as a:
        if a.profile.method_table is None:
            raise UnsupportedType("object: Mono objects are not walked (no exact heap walk)")
        obj = a.object_at(address)
        if obj is None:
            raise TypeNotFound(f"object {address:#x}: no object of the GC heap holds this address"
                               + ("" if a.heap.segment_at(address) else " (it is outside every heap segment)"))
        _preamble(a, quiet)
        offset = address - obj.address
        heap_name = obj.segment.generation(obj.address)
        if obj.is_free:
            where = "free space between objects"
            lay = None
        else:
            lay = _object_layout(a, obj, full)
            held = [r for r in lay.rows if r.offset <= offset < r.end]  # a struct, then its field
            where = "".join(r.description.strip() for r in held) if held else "past its fields"
        if fmt == "jsonl":
            from .present.jsonout import layout_record

            record = {"address": f"{address:#x}", "offset": offset, "in": where,
                      "object": jsonout.object_record(obj, heap_name) | {"type": obj.type_name or (
                          "Free" if obj.is_free else None)}}
            if lay is not None:
                record["layout"] = layout_record(lay)
            out(jsonout.dumps(record))
        else:
            name = "Free" if obj.is_free else obj.type_name or f"<unknown type, MT {obj.method_table:#x}>"
            sign = "+" if offset >= 0 else "-"
            out(f"{address:#x} is at {sign}{abs(offset):#x} in {name} at {obj.address:#x} "
                f"(MethodTable {obj.method_table:#x}, size {obj.size}, {heap_name}): {where}")
            if lay is not None:
                out()
                _print_object_layout(a, obj, heap_name, "table", full, lay)
        _report(a, quiet)


# --- type -------------------------------------------------------------------------------------------


@cli.command("type")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@assemblies_option
@quiet_option
@heap_option
@profile_option
def type_(file, name, fmt, assemblies, quiet, heap, profile):
    """The layout of a type without an instance (!dumpmt + JOL's class layout): NAME as the DAC prints it
    (or as reflection does), or a MethodTable address."""
    from .present import typelayout

    with _open(file, None, profile, heap, assemblies) as a:
        if a.profile.method_table is None:
            raise UnsupportedType("type: Mono dumps have MonoVTables, whose classes are not read")
        try:
            address = ADDRESS.convert(name, None, None)
        except click.BadParameter:
            address = None
        if address is not None and a.mts.get(address) is not None:
            mts = [address]
        else:
            mts = a.method_tables_named(name) if a.heap.exact else []
            if not mts and address is not None and (name.lower().startswith("0x") or any(c.isdigit() for c in name)):
                raise TypeNotFound(f"type {name}: no MethodTable in the dump at {address:#x}"
                                   + ("" if a.dump.memory.try_read(address, 1) else " (the dump holds no memory there)"))
            if not mts:
                similar = a.type_names_containing(name) if a.heap.exact else []
                raise TypeNotFound(f"type {name}: no type of that name among the heap's types"
                                   + (f" (names that contain it: {'; '.join(similar)})" if similar else "")
                                   + ("" if a.heap.exact else " (no exact heap walk: give a MethodTable address)"))
        _preamble(a, quiet)
        for i, mt in enumerate(mts):
            if i:
                out()
            for line in typelayout.render(a, a.type_layout(mt), fmt):
                out(line)
        _report(a, quiet)


# --- stats ------------------------------------------------------------------------------------------


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--type", "type_name", default=None,
              help="System.String: the string statistics; other TEXT: only types whose name contains it, as SOS "
                   "-type (default: every type, as !dumpheap -stat).")
@click.option("--exact", is_flag=True, help="--type is a whole type name, not a part of one.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--sort", type=click.Choice(["size", "count", "name"]), default=None,
              help="The order of the type rows: size (SOS's order: total size, smallest first; the default), "
                   "count, or name.")
@click.option("--duplicates", is_flag=True,
              help="With --type System.String: list values that occur more than once, by wasted bytes.")
@click.option("--top", type=click.IntRange(min=0), default=None,
              help="By type: only the N types with the most bytes (the most objects with --sort count, the first "
                   "N names with --sort name). With --duplicates: how many duplicated values to list (default 20; "
                   "0: all). Totals always count all.")
@jobs_option
@assemblies_option
@scan_options
def stats(file, type_name, exact, fmt, sort, duplicates, top, jobs, assemblies, strict, min_length, max_length,
          min_size, max_size, generations, contains, regex, address_range, mt, profile, heap, quiet):
    """Heap statistics by type (!dumpheap -stat); with --type System.String, totals, where the bytes go,
    length histogram and largest strings, or exact duplicates and their waste."""
    from .present import stats as present
    from .analyses.stats import DuplicateCollector

    string_only = [name for name, v in (("--min-length", min_length), ("--max-length", max_length),
                                        ("--contains", contains), ("--regex", regex),
                                        ("--duplicates", duplicates or None)) if v is not None]
    if type_name not in STRING_TYPES:
        if string_only:
            raise UsageError(f"{', '.join(string_only)}: only for strings (add --type System.String)"
                             + ("" if type_name is None else f", not --type {type_name}"))
        if exact and type_name is None:
            raise UsageError("--exact: give the type's name with --type")
        return _type_stats(file, type_name, exact, fmt, sort, top, jobs, assemblies, strict,
                           make_object_filter(min_size, max_size, generations, address_range, mt), profile, heap,
                           quiet)
    if sort is not None:
        raise UsageError("--sort orders the rows of the statistics by type; the string statistics have none")
    if top is not None and not duplicates:
        raise UsageError("--top with --type System.String limits the duplicated values: add --duplicates")
    selected = make_filter(min_length, max_length, contains, regex, address_range, min_size, max_size, generations)
    with _open(file, mt, profile, heap) as a:
        a.string_method_table()
        _preamble(a, quiet)
        dups = DuplicateCollector(a.profile, a.dump.memory) if duplicates else None
        try:
            result, found = _collect_stats(a, jobs, fmt, selected, dups)
        finally:
            if dups is not None:
                dups.close()
        for line in present.render(a, result, found, fmt, 20 if top is None else top):
            out(line)
        _report(a, quiet, strict)


def make_object_filter(min_size, max_size, generations, address_range, mt):
    from .analyses.filters import ObjectFilter

    make_filter(None, None, None, None, address_range, min_size, max_size)  # the same checks as for strings
    return ObjectFilter(tuple(address_range) if address_range else None, min_size, max_size, generations, mt)


def _type_stats(file, type_name, exact, fmt, sort, top, jobs, assemblies, strict, selected, profile, heap, quiet):
    """!dumpheap -stat: count and bytes per MethodTable of the objects ``selected`` accepts, with names from
    metadata, of the types whose name contains ``type_name`` (or is it, ``exact``)."""
    from . import parallel
    from .analyses.typestats import TypeStats, top_rows
    from .present import typestats as present

    with _open(file, None, profile, heap, assemblies) as a:
        a.require_exact("statistics by type")
        _preamble(a, quiet)
        result = TypeStats()

        def collect(win):
            part = TypeStats()
            part.add(win, a.mts, selected)
            return parallel.StepOutput(count=sum(v[0] for v in part.totals.values()), extra=part)

        with _progress(a, enabled=fmt == "table") as progress:
            parallel.run_steps(a, collect, share=parallel.can_share(a, jobs, writes=False),
                               progress=progress.advance, on_found=progress.found, absorb=result.merge)
        if type_name is not None and not _named(a, result.seen, type_name, exact):
            raise _type_not_found(a, type_name, exact)
        mt = selected.method_table
        if mt is not None and mt not in result.seen:
            raise _no_objects_of(a, mt, f"--mt {mt:#x}")
        if mt is not None and type_name is not None and not _named(a, [mt], type_name, exact):
            raise TypeNotFound(f"--mt {mt:#x} is {a.type_name(mt) or 'a type without a name'}, not a type "
                               f"{'named' if exact else 'whose name contains'} {type_name!r} (--type)")
        rows = result.rows(a.type_name, type_name, exact, sort or "size")
        for line in present.render(a, rows, fmt, top_rows(rows, top, sort or "size")):
            out(line)
        unnamed = a.why_unnamed(result.totals) if a.profile.method_table is not None else {}
        if unnamed and not quiet:
            from .present.info import reasons

            n = sum(unnamed.values())
            warn(f"{n:,} {'type has' if n == 1 else 'types have'} no name ({reasons(unnamed)})")
        _report(a, quiet, strict)


def _named(a, method_tables, type_name: str, exact: bool) -> bool:
    """Whether one of ``method_tables`` has a name (as the DAC or reflection prints it) that is ``type_name``
    (``exact``) or contains it."""
    return any(a.is_named(mt, type_name, exact) for mt in method_tables)


def _type_not_found(a, type_name: str, exact: bool) -> TypeNotFound:
    """No object on the heap has a type of that name."""
    flag = f"--type {type_name}" + (" --exact" if exact else "")
    if a.method_tables_named(type_name):  # a parent, element or argument type of the heap's
        return TypeNotFound(f"{flag}: no object of this type on the heap (the type is there as another's "
                            f"parent, element or argument: `clrlayout type` shows its layout)")
    key = type_name.split("[")[0].split("`")[0].split(".")[-1]  # List`1[System.Int32] -> List
    similar = a.type_names_containing(key) if key else []
    return TypeNotFound(f"{flag}: no type " + ("of that name" if exact else "whose name contains it")
                        + " on the heap" + (f" (names like it: {'; '.join(similar)})" if similar else
                                            " (stats lists the heap's types)"))


def _collect_stats(a, jobs, fmt, selected, dups):
    """The statistics (and, into ``dups``, the duplicates) of every string that passes the filters."""
    from .analyses.stats import DuplicateCollector, StatsCollector

    servers = a.heap.heap_count if a.heap.gc_mode == "server" and a.heap.exact else 0
    collector = StatsCollector(a.profile, top=10, gc_heaps=servers)
    with _progress(a, enabled=fmt == "table") as progress:
        if a.windowed:
            from . import parallel

            def collect(win):  # one step's statistics, merged in heap order by absorb
                part = StatsCollector(a.profile, top=10, gc_heaps=servers)
                dpart = DuplicateCollector(a.profile, None) if dups is not None else None
                for batch in a.window_batches(win):
                    batch = selected.apply(batch)
                    part.add(batch)
                    if dpart is not None:
                        dpart.add(batch)
                return parallel.StepOutput(count=part.count, extra=(part, dpart))

            def absorb(extra):
                collector.merge(extra[0])
                if dups is not None:
                    dups.merge(extra[1])

            parallel.run_steps(a, collect, share=parallel.can_share(a, jobs, writes=False),
                               progress=progress.advance, on_found=progress.found, absorb=absorb)
        else:
            for batch in a.iter_batches(progress.advance):
                progress.found(len(batch))
                batch = selected.apply(batch)
                collector.add(batch)
                if dups is not None:
                    dups.add(batch)
    return collector.finish(), (dups.finish() if dups is not None else None)


# --- trim -------------------------------------------------------------------------------------------


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("output", type=click.Path(dir_okay=False))
@click.option("--max-strings", type=click.IntRange(min=0), default=None,
              help="Keep only what the first N strings need (a small dump to share or to test with).")
@click.option("--types", is_flag=True,
              help="Also keep every object's bytes and what naming and laying out the heap's types reads "
                   "(stats, type and object then answer as on the original).")
@mt_option
@profile_option
@quiet_option
def trim(file, output, max_strings, types, mt, profile, quiet):
    """Write a smaller dump of the same format that keeps what the string analysis reads."""
    from .trim import trim as do_trim

    if os.path.abspath(file) == os.path.abspath(output):
        raise click.UsageError("OUTPUT must not be the input file")
    r = do_trim(file, output, mt, profile, limits=limits_from_env(), max_strings=max_strings, types=types)
    if not quiet:
        from .present.text import counted

        held = counted(r.strings_in_output, "string")
        if max_strings is not None and r.strings_in_output != r.strings:
            held += f" (the first {r.strings:,} asked for; the pages kept hold the rest)"
        out(f"{output}: {r.output_bytes:,} bytes (from {r.input_bytes:,}); kept {r.kept_memory:,} of "
            f"{r.total_memory:,} bytes of memory in {counted(r.ranges, 'range')}; {held}")
        if r.missing_in_output:
            out(f"{output}: its heap runs on past the memory kept ({r.missing_in_output:,} places): info and dump "
                "on it say so with memory-missing warnings")


# --- layout -----------------------------------------------------------------------------------------


def _csv(ctx, param, value):
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@cli.command()
@click.option("--type", "type_name", default="System.String", show_default=True)
@click.option("--length", "lengths", required=True, metavar="N|A..B", help="A length, or a range A..B.")
@click.option("--runtime", "runtimes", callback=_csv, default=None, metavar="LIST",
              help="netfx,coreclr,mono (default: all).")
@click.option("--arch", "archs", callback=_csv, default=None, metavar="LIST", help="x86,x64,arm64 (default: all).")
@click.option("--runtime-version", default=None, metavar="V",
              help="Resolve each profile for this runtime version instead of showing every layout variant.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def layout(type_name, lengths, runtimes, archs, runtime_version, fmt):
    """The layout of a string on every runtime and architecture, from the profiles alone (no dump)."""
    from .analyses.estimates import parse_lengths, select_variants
    from .objects.layout import string_layout
    from .present import estimates as present
    from .present.jsonout import dumps

    _type_check(type_name)
    try:
        ns = parse_lengths(lengths)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--length") from None
    if len(ns) > 100_000:
        raise click.BadParameter("at most 100,000 lengths", param_hint="--length")
    chosen = select_variants(runtimes, archs, runtime_version)
    if not chosen:
        raise click.BadParameter("no profile matches", param_hint="--runtime/--arch")
    longest = min(v.profile.string.max_length for v in chosen)
    if ns[-1] > longest:
        raise UsageError(f"--length {lengths}: no runtime makes a string longer than {longest:,} characters "
                         f"({longest:#x}, String.MaxLength)")
    layouts = [(v.label, string_layout(v.profile, n)) for n in ns for v in chosen]
    if fmt == "json":
        out(dumps([present.layout_record(label, lay) for label, lay in layouts]))
    elif len(ns) == 1:
        for line in present.single_lines(layouts):
            out(line)
    else:
        for line in present.range_lines(layouts):
            out(line)


# --- live -------------------------------------------------------------------------------------------


@cli.command()
@click.option("--runtime", type=click.Choice(["coreclr", "mono"]), default="coreclr", show_default=True,
              help="coreclr: the embedded CoreCLR 3.1.23 (pip install 'clrlayout[live]'), or that of --dotnet-root; "
                   "mono: the system's Mono.")
@click.option("--max-length", type=click.IntRange(0, 100_000), default=64, show_default=True,
              help="Check every length from 0 to N (plus the special cases).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--capture", type=click.Path(dir_okay=False), default=None, metavar="OUT",
              help="Also write a dump of this process to OUT, run the dump path on it, and check every case.")
@click.option("--dotnet-root", type=click.Path(file_okay=False, exists=True), default=None, metavar="DIR",
              help="Host the CoreCLR of this .NET installation (the folder that holds `dotnet`, e.g. "
                   "/usr/share/dotnet) instead of the embedded 3.1.23.")
@click.option("--framework", default=None, metavar="VERSION",
              help="With --dotnet-root: which Microsoft.NETCore.App to host (a version or its prefix: 8, 10.0; "
                   "default the newest installed).")
@profile_option
@click.pass_context
def live(ctx, runtime, max_length, fmt, capture, dotnet_root, framework, profile):
    """Host a real runtime, allocate strings, and check them against clrlayout's decoders and profile.

    Exits 1 if any check fails (a profile that does not match the runtime), 7 if the runtime is missing."""
    from .live.harness import run
    from .present.jsonout import dumps
    from .present.live import live_lines

    if runtime != "coreclr" and (dotnet_root or framework):
        raise UsageError("--dotnet-root and --framework choose a CoreCLR installation, not --runtime mono")
    if framework is not None and dotnet_root is None:
        raise UsageError("--framework chooses among the runtimes of --dotnet-root DIR: give that too")
    report = run(runtime, max_length, capture, profile, dotnet_root, framework)
    if fmt == "json":
        out(dumps(report.as_dict()))
    else:
        for line in live_lines(report):
            out(line)
    if report.failures:
        ctx.exit(int(ExitCode.FINDINGS))


# --- entry point ------------------------------------------------------------------------------------


def _utf8_output() -> None:
    """Values hold any character: stdout is UTF-8 whatever the console encoding says when it goes to a file
    or a pipe (Python on Windows often gets cp1252 there); on a terminal, and on stderr, what the encoding
    cannot hold is written as a backslash escape instead of failing."""
    import io

    for stream, terminal_only in ((sys.stdout, False), (sys.stderr, True)):
        if not isinstance(stream, io.TextIOWrapper):
            continue
        try:
            if stream.isatty() or terminal_only:
                stream.reconfigure(errors="backslashreplace")
            elif (stream.encoding or "").lower().replace("-", "") != "utf8":
                stream.reconfigure(encoding="utf-8", errors="strict")
        except (OSError, ValueError):
            pass


def _usage_line(e: click.ClickException) -> str:
    """click's usage error as the one line every other error is."""
    hint = ""
    if isinstance(e, click.UsageError) and e.ctx is not None:
        hint = f" (see '{e.ctx.command_path} --help')"
    return f"clrlayout: error: {e.format_message()}{hint}"


def main(argv=None) -> int:
    from .util.allocator import reuse_freed_memory

    reuse_freed_memory()
    _utf8_output()
    try:
        rv = cli.main(args=argv, prog_name="clrlayout", standalone_mode=False)
        return int(rv or 0)
    except click.exceptions.Exit as e:
        return e.exit_code
    except SystemExit:
        from click.utils import PacifyFlushWrapper

        if isinstance(sys.stdout, PacifyFlushWrapper):  # click's answer to a broken pipe (`| head`): exit 1
            return 0
        raise
    except click.ClickException as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # `clrlayout` alone: the help, as `clrlayout --help`
            click.echo(e.format_message())
            return 0
        click.echo(_usage_line(e), err=True)
        return ExitCode.USAGE if isinstance(e, click.UsageError) else e.exit_code
    except click.exceptions.Abort:
        click.echo("clrlayout: aborted", err=True)
        return 130
    except ClrLayoutError as e:
        click.echo(f"clrlayout: error: {e}", err=True)
        return int(e.exit_code)
    except BrokenPipeError:
        # the reader of stdout went away (| head): not an error
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        click.echo("clrlayout: interrupted", err=True)
        return 130
    except MemoryError:
        click.echo("clrlayout: error: out of memory", err=True)
        return int(ExitCode.INTERNAL)
    except Exception as e:  # a bug: one line, traceback on request
        if os.environ.get("CLRLAYOUT_DEBUG"):
            raise
        click.echo(f"clrlayout: internal error: {type(e).__name__}: {e} (set CLRLAYOUT_DEBUG=1 for a traceback; "
                   f"please report it)", err=True)
        return int(ExitCode.INTERNAL)


def entry_point() -> None:
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # `clrlayout ... | head`: the reader left; not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError as e:  # the last of the output could not be written (a full disk)
        click.echo(f"clrlayout: error: cannot write the output: {e.strerror or e}", err=True)
        code = int(ExitCode.OUTPUT)
    if sys.argv[1:2] != ["live"]:  # `live` exits normally, which shuts the hosted runtime down
        # all is written: leave without tearing the interpreter down (30 ms of a 0.5 s `stats`)
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)

