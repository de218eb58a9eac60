"""``clrlayout dump``: every object of a type (SOS ``!dumpheap -type`` + ``!DumpObj``), optionally with its layout."""

from __future__ import annotations

import sys

import click
import numpy as np

from ..errors import TypeNotFound, UsageError
from .common import (
    STRING_TYPES,
    _csv_field,
    _no_objects_of,
    _open,
    _preamble,
    _print_object_layout,
    _progress,
    _redacted_values,
    _report,
    _type_not_found,
    assemblies_option,
    jobs_option,
    make_filter,
    make_object_filter,
    out,
    scan_options,
    with_liveness,
)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--type", "type_name", default="System.String", show_default=True,
              help="The types to list: every type whose name contains TEXT, as SOS -type (as the DAC or as "
                   "reflection prints it; --exact: the whole name).")
@click.option("--exact", is_flag=True, help="--type is a whole type name, not a part of one.")
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl", "csv"]), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Stop after N objects.")
@click.option("--layout", is_flag=True, help="Print each object's field layout and an annotated hex dump.")
@click.option("--fields", is_flag=True,
              help="With --type (not System.String): each object's instance fields and their values, as object "
                   "prints them (the table: name=value after the object; jsonl: \"fields\"; csv: a \"fields\" column "
                   "of JSON).")
@click.option("--full", is_flag=True, help="Whole values in the table (not cut at 80 characters) and the whole hex "
              "dump with --layout (not cut at 64 lines).")
@jobs_option
@assemblies_option
@scan_options
def dump(file, type_name, exact, fmt, limit, layout, fields, full, jobs, assemblies, strict, min_length, max_length,
         min_size, max_size, generations, contains, regex, address_range, mt, profile, heap, quiet, live, kinds):
    """List every object of a type (SOS !dumpheap -type + !DumpObj), optionally with its layout."""
    from .. import parallel
    from ..present import batchlines, text

    if layout and fmt == "csv":
        raise UsageError("--layout has no CSV form: use --format table or jsonl")
    if fields and layout:
        raise UsageError("--fields lists the fields' values; --layout shows them with their offsets: give one")
    by_mt = None  # --mt of a type other than System.String: the objects of that MethodTable (SOS -mt)
    if mt is not None and type_name in STRING_TYPES and \
            click.get_current_context().get_parameter_source("type_name") is click.core.ParameterSource.DEFAULT:
        with _open(file, None, profile, heap, assemblies) as session:
            if not session.is_string_method_table(mt):
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
                             profile, heap, quiet, live, kinds, fields)
    if fields:
        raise UsageError("--fields: for --type of a type other than System.String (a string's value is shown)")
    selected = make_filter(min_length, max_length, contains, regex, address_range, min_size, max_size, generations)
    with _open(file, mt, profile, heap, assemblies) as session:
        ptr = session.profile.pointer_size
        session.string_method_table()
        selected = with_liveness(session, selected, live, kinds)
        _redacted_values(session, quiet, [f for f, v in (("--contains", contains), ("--regex",
                                                                                    regex)) if v is not None])
        _preamble(session, quiet)
        if fmt == "table" and not layout:
            out(text.dumpheap_header(ptr))
        if fmt == "csv":
            out(batchlines.CSV_HEADER)
        heap_bytes = sum(seg.size for seg in session.heap.segments) or session.dump.memory.total_bytes
        render = batchlines.renderer(fmt, ptr, value_limit=None if full else text.VALUE_LIMIT, heap_bytes=heap_bytes)
        progress = _progress(session, enabled=fmt == "table", rows_to=sys.stdout)
        if not layout and limit is None and session.windowed:
            def render_window(win):
                step = parallel.StepOutput()
                chunks = []
                for batch in session.window_batches(win):
                    batch = selected.apply(batch)
                    if len(batch):
                        step.count += len(batch)
                        step.size += int(batch.sizes.sum())
                        step.aligned += int(batch.aligned_sizes.sum())
                        chunks += render(batch)
                step.data = chunks
                return step

            sys.stdout.flush()
            count, size, aligned = parallel.run_steps(session, render_window, share=parallel.can_share(session, jobs),
                                                      progress=progress.advance, on_found=progress.found)
        else:
            count = size = aligned = 0
            for batch in session.iter_batches(progress.advance):
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
                        _print_layout(session, s, fmt, full)
                else:
                    sys.stdout.flush()
                    parallel.write_out(render(batch))  # a list of bytes
        progress.close()
        if fmt == "table":
            out(text.total_line(count, size, aligned))
        _report(session, quiet, strict)


def _dump_objects(file, type_name, exact, fmt, limit, layout, full, assemblies, strict, selected, mt, profile,
                  heap, quiet, live=None, kinds=(), fields=False):
    """dump --type NAME (a type other than System.String: every type whose name contains it, or is it with
    ``exact``) and/or --mt MT (a MethodTable other than String's): Address, MT, Size and the name (!dumpheap
    -type / -mt), each object's JOL layout with --layout; ``selected``: the objects the other filters keep."""
    from ..present import jsonout, text

    asked = " ".join(([f"--type {type_name}"] if type_name else []) + ([f"--mt {mt:#x}"] if mt is not None else []))
    with _open(file, None, profile, heap, assemblies) as session:
        session.require_exact(asked)
        selected = with_liveness(session, selected, live, kinds)
        _redacted_values(session, quiet)
        _preamble(session, quiet)
        ptr = session.profile.pointer_size
        count = size = aligned = 0
        found = False
        for obj in session.objects_named(type_name, mt, exact=exact):
            if not found:  # the header once the type is known to be there
                found = True
                if fmt == "table" and not layout:
                    out(text.objects_header(ptr))
                if fmt == "csv":
                    out("address,method_table,size,aligned_size,length,heap,type" + (",fields" if fields else ""))
            if not selected.accepts(obj):
                continue
            if limit is not None and count >= limit:
                break
            heap_name = obj.segment.generation(obj.address)
            count += 1
            size += obj.size
            aligned += obj.aligned_size
            values = _field_values(session, obj, full) if fields else None
            if layout:
                _print_object_layout(session, obj, heap_name, fmt, full)
            elif fmt == "table":
                out(text.object_line(obj, ptr) + "".join(f"  {n}={v}" for n, v in (values or ())))
            elif fmt == "jsonl":
                record = jsonout.object_record(obj, heap_name)
                if values is not None:
                    record["fields"] = dict(values)
                out(jsonout.dumps(record))
            else:
                out(",".join([f"{obj.address:#x}", f"{obj.method_table:#x}", str(obj.size), str(obj.aligned_size),
                              str(obj.count) if obj.type.component_size else "", heap_name,
                              _csv_field(jsonout.csv_value(obj.type_name or ""))]
                             + ([_csv_field(jsonout.dumps(dict(values)))] if values is not None else [])))
        if not found and mt is not None:
            if type_name and session.mts.get(mt) is not None and not session.is_named(mt, type_name, exact):
                raise TypeNotFound(f"--mt {mt:#x} is {session.type_name(mt) or 'a type without a name'}, not a type "
                                   f"{'named' if exact else 'whose name contains'} {type_name!r} (--type)")
            raise _no_objects_of(session, mt, asked)
        if not found:
            raise _type_not_found(session, type_name, exact)
        if fmt == "table":
            out(text.total_line(count, size, aligned, noun=("object", "objects")))
        _report(session, quiet, strict)


def _field_values(session, obj, full: bool) -> list:
    """(name, value) of the object's instance fields (none for an array), as ``object`` shows them."""
    from ..objects.instances import field_values

    lay = session.type_layout(obj.method_table)
    if lay is None or obj.type.component_size:
        return []
    data = session.dump.memory.read_available(obj.address, obj.aligned_size)
    referent = (lambda address: session.referent(address, None)) if full else session.referent
    return field_values(session.profile, lay.fields, data, referent)


def _print_layout(session, s, fmt: str = "table", full: bool = False) -> None:
    from ..objects.layout import string_layout
    from ..objects.strings import object_span
    from ..present import hexview, text

    start, span = object_span(session.profile, s.address, s.length, s.large)
    data = session.dump.memory.read(start, span)
    if fmt == "jsonl":
        from ..present.jsonout import dumps, layout_record, string_record

        lay = string_layout(session.profile, s.length, s, data, s.large)
        out(dumps({**string_record(s), "layout": layout_record(lay)}))
        return
    lay = string_layout(session.profile, s.length, s, data, s.large, max_value_chars=None if full else 60)
    title = (f"System.String at {s.address:#x} (MethodTable {s.method_table:#x}, "
             f"{session.runtime.flavor} {session.runtime.version or '?'} {session.dump.arch}, {s.heap}):")
    for line in text.layout_table(lay, title):
        out(line)
    out()
    for line in hexview.hex_dump(lay, max_lines=None if full else hexview.MAX_LINES):
        out(line)
    out()
