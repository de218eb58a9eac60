"""``clrlayout index``: the heap graph's index built ahead (Eclipse MAT's parsing of a heap dump), so that the
graph commands after it (``roots``, ``refs``, ``retained``, ``stats --live``...) map it instead of walking the heap
(:mod:`clrlayout.graph.index`)."""

from __future__ import annotations

import click

from ..errors import RootsNotFound, UsageError
from .common import _open, _preamble, _report, assemblies_option, heap_option, out, profile_option, quiet_option, warn
from .common import roots_option as roots


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--index", "index_dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Where to keep it (default: ~/.cache/clrlayout/index).")
@roots
@quiet_option
@heap_option
@profile_option
@assemblies_option
def index(file, index_dir, kinds, quiet, heap, profile, assemblies):
    """Build the dump's heap graph once and keep it, for every graph command after this one; with it, what the
    graph commands compute from it for the roots (--roots, default all): the reversed references, the
    breadth-first tree, the dominator tree with retained sizes, the per-type sums, the native chunks live objects
    own; and where each module's statics begin."""
    ctx = click.get_current_context()
    ctx.meta["clrlayout.index"] = index_dir
    with _open(file, None, profile, heap, assemblies) as session:
        _preamble(session, quiet)
        try:
            where, written, why = session.build_index()
        except ValueError as e:
            raise UsageError(str(e)) from None
        _report(session, quiet)
        if why is not None:
            warn(f"no index written: {why}")
            ctx.exit(1)
        out(f"{'Written' if written else 'Already there'}: {where} ({session._heap_graph.count:,} objects, "
            f"{session._heap_graph.edge_count:,} references)")
        try:
            og = session.object_graph(kinds)
        except RootsNotFound as e:  # the graph is kept; what depends on these roots is not
            warn(f"no layers for the roots {','.join(kinds)}: {e}")
            return
        og.reverse, og.parent, og.by_type()  # each written as a layer when first computed (graph.index.Layers)
        from ..model.native import retained_native_of

        retained_native_of(session, og, [])  # the native chunks live objects own, where there is a native heap
        session.statics().arrays()  # where each module's statics begin (a note: static fields named)
        out(f"Layers for the roots {','.join(kinds)}: {og.roots_key}")

