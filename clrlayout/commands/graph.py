"""``clrlayout refs``, ``roots`` and ``retained``: why an object is still there, and what it keeps (SOS
``!gcroot``, ``!objsize``; MAT's and dotMemory's dominator tree).  ``--roots`` chooses the root kinds."""

from __future__ import annotations

import click

from ..errors import UsageError
from .common import (
    ADDRESS,
    _open,
    _preamble,
    _report,
    assemblies_option,
    emit,
    format_option,
    heap_option,
    index_options,
    profile_option,
    quiet_option,
    roots_option,
    warn,
)


def graph_options(f):
    for option in (quiet_option, heap_option, profile_option, assemblies_option, roots_option, index_options):
        f = option(f)
    return f


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("address", type=ADDRESS, required=False)
@click.option("--to", "to", type=ADDRESS, default=None, metavar="ADDRESS",
              help="Only what references the object at ADDRESS (its referrers, each with the field that holds the "
                   "reference), instead of an ADDRESS argument.")
@format_option("table", "json")
@graph_options
def refs(file, address, to, fmt, quiet, heap, profile, assemblies, kinds):
    """What the object at ADDRESS references and what references it, each with the field (or array index)
    that holds the reference, and its retained size; with --to ADDRESS, only what references it."""
    from ..model.graphanswers import object_graph, refs_record
    from ..present.graph import refs_result

    if (address is None) == (to is None):
        raise UsageError("give the object's ADDRESS, or --to ADDRESS for only what references it (not both)")
    address = address if to is None else to
    with _open(file, None, profile, heap, assemblies) as dump:
        og = object_graph(dump, kinds)
        _preamble(dump, quiet)
        node = _node(dump, og, address, quiet)
        emit(refs_result(refs_record(dump, og, node, with_references=to is None)), fmt)
        _report(dump, quiet)


def _node(dump, og, address: int, quiet: bool) -> int:
    from ..model.graphanswers import object_node

    node, note = object_node(dump, og, address)
    if note and not quiet:
        warn(note)
    return node


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("address", type=ADDRESS)
@format_option("table", "json")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Paths shown at the most (one per root, nearest roots first).")
@click.option("--max-length", type=click.IntRange(min=2), default=None,
              help="Links shown of each path at the most: a longer one is cut in its middle, the links left out "
                   "counted (the table collapses runs of one field of one type either way: ._next ×598).")
@graph_options
def roots(file, address, fmt, limit, max_length, quiet, heap, profile, assemblies, kinds):
    """Why the object at ADDRESS is alive (SOS !gcroot): for each root that reaches it, a shortest chain of
    references from that root to it."""
    from ..model.graphanswers import object_graph, roots_record
    from ..present.graph import roots_result

    with _open(file, None, profile, heap, assemblies) as dump:
        og = object_graph(dump, kinds)
        _preamble(dump, quiet)
        node = _node(dump, og, address, quiet)
        emit(roots_result(roots_record(dump, og, node, limit, max_length), kinds), fmt)
        _report(dump, quiet)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True,
              help="How many objects (or types) to list, the largest retainers first.")
@click.option("--by", "by", type=click.Choice(["object", "type"]), default="object", show_default=True)
@format_option("table", "json")
@graph_options
def retained(file, top, by, fmt, quiet, heap, profile, assemblies, kinds):
    """Retained sizes (the dominator tree of the live heap, Semi-NCA, from a virtual root above every
    root): the bytes each object would free if it became unreachable; the largest retainers, or by type."""
    from ..model.graphanswers import retained_record
    from ..present.graph import retained_result

    with _open(file, None, profile, heap, assemblies) as dump:
        record, with_native = retained_record(dump, kinds, top)
        _preamble(dump, quiet)
        emit(retained_result(record, by, kinds, with_native), fmt)
        _report(dump, quiet)
