"""``clrlayout dump``: every object of a type (SOS ``!dumpheap -type`` + ``!DumpObj``), optionally with its layout."""

from __future__ import annotations

import sys

import click
import numpy as np

from ..errors import UsageError
from .common import (
    STRING_TYPES,
    _open,
    _preamble,
    _print_object_layout,
    _progress,
    _redacted_values,
    _report,
    assemblies_option,
    emit,
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
    from ..model import listing
    from ..present import batchlines, text
    from ..present.listing import string_listing

    if layout and fmt == "csv":
        raise UsageError("--layout has no CSV form: use --format table or jsonl")
    if fields and layout:
        raise UsageError("--fields lists the fields' values; --layout shows them with their offsets: give one")
    by_mt = None  # --mt of a type other than System.String: the objects of that MethodTable (SOS -mt)
    if mt is not None and type_name in STRING_TYPES and \
            click.get_current_context().get_parameter_source("type_name") is click.core.ParameterSource.DEFAULT:
        with _open(file, None, profile, heap, assemblies) as dump_:
            if not dump_.runtime.is_string_method_table(mt):
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
    with _open(file, mt, profile, heap, assemblies) as dump_:
        ptr = dump_.runtime.pointer_size
        dump_.runtime.string_method_table()
        selected = with_liveness(dump_, selected, live, kinds)
        _redacted_values(dump_, quiet, [f for f, v in (("--contains", contains), ("--regex",
                                                                                  regex)) if v is not None])
        _preamble(dump_, quiet)
        lines = string_listing(fmt, ptr, with_layout=layout)
        for line in lines.head:
            out(line)
        render = batchlines.renderer(fmt, ptr, value_limit=None if full else text.VALUE_LIMIT,
                                     heap_bytes=listing.heap_bytes(dump_))
        progress = _progress(dump_, fmt, rows_to=sys.stdout)
        if not layout and limit is None and listing.windowed(dump_):
            def render_window(window_batches):
                step = listing.StepOutput()
                chunks = []
                for batch in window_batches:
                    batch = selected.apply(batch)
                    if len(batch):
                        step.count += len(batch)
                        step.size += int(batch.sizes.sum())
                        step.aligned += int(batch.aligned_sizes.sum())
                        chunks += render(batch)
                step.data = chunks
                return step

            sys.stdout.flush()
            count, size, aligned = listing.run_windows(dump_, render_window, jobs, writes=True,
                                                       progress=progress.advance, on_found=progress.found)
        else:
            count = size = aligned = 0
            for batch in listing.batches(dump_, progress.advance):
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
                        _print_layout(dump_, s, fmt, full)
                else:
                    sys.stdout.flush()
                    listing.write_out(render(batch))  # a list of bytes
        progress.close()
        for line in lines.tail(count, size, aligned):
            out(line)
        _report(dump_, quiet, strict)


def _dump_objects(file, type_name, exact, fmt, limit, layout, full, assemblies, strict, selected, mt, profile,
                  heap, quiet, live=None, kinds=(), fields=False):
    """dump --type NAME (a type other than System.String: every type whose name contains it, or is it with
    ``exact``) and/or --mt MT (a MethodTable other than String's): Address, MT, Size and the name (!dumpheap
    -type / -mt), each object's JOL layout with --layout; ``selected``: the objects the other filters keep."""
    from ..model import listing
    from ..model.layouts import field_values
    from ..model.lookup import no_objects_of, not_of_name, type_not_found
    from ..present.listing import object_listing

    asked = " ".join(([f"--type {type_name}"] if type_name else []) + ([f"--mt {mt:#x}"] if mt is not None else []))
    with _open(file, None, profile, heap, assemblies) as dump_:
        dump_.require_exact(asked)
        selected = with_liveness(dump_, selected, live, kinds)
        _redacted_values(dump_, quiet)
        _preamble(dump_, quiet)
        lines = object_listing(fmt, dump_.runtime.pointer_size, fields, layout)
        count = size = aligned = 0
        found = False
        for obj in listing.objects_of(dump_, type_name, mt, exact):
            if not found:  # the head once the type is known to be there
                found = True
                for line in lines.head:
                    out(line)
            if not selected.accepts(obj):
                continue
            if limit is not None and count >= limit:
                break
            heap_name = obj.segment.generation(obj.address)
            count += 1
            size += obj.size
            aligned += obj.aligned_size
            if layout:
                _print_object_layout(dump_, obj, heap_name, fmt, full)
            else:
                out(lines.line(obj, heap_name, field_values(dump_, obj, full) if fields else None))
        if not found and mt is not None:
            raise (type_name and not_of_name(dump_, mt, type_name, exact)) or no_objects_of(dump_, mt, asked)
        if not found:
            raise type_not_found(dump_, type_name, exact)
        for line in lines.tail(count, size, aligned):
            out(line)
        _report(dump_, quiet, strict)


def _print_layout(dump_, s, fmt: str = "table", full: bool = False) -> None:
    from ..model.layouts import runtime_label, string_object_layout
    from ..present.jsonout import string_record
    from ..present.listing import layout_result

    lay = string_object_layout(dump_, s, full or fmt == "jsonl")  # a record holds the whole value
    title = f"System.String at {s.address:#x} (MethodTable {s.method_table:#x}, {runtime_label(dump_)}, {s.heap}):"
    emit(layout_result(string_record(s), lay, title, [], full), fmt)
