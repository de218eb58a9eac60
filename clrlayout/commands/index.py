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
    from ..model.indexing import write_graph, write_layers

    with _open(file, None, profile, heap, assemblies) as dump:
        _preamble(dump, quiet)
        try:
            built = write_graph(dump)
        except ValueError as e:
            raise UsageError(str(e)) from None
        _report(dump, quiet)
        if built.why_not is not None:
            warn(f"no index written: {built.why_not}")
            ctx.exit(1)
        out(f"{'Written' if built.written else 'Already there'}: {built.where} ({built.objects:,} objects, "
            f"{built.references:,} references)")
        try:
            key = write_layers(dump, kinds)
        except RootsNotFound as e:  # the graph is kept; what depends on these roots is not
            warn(f"no layers for the roots {','.join(kinds)}: {e}")
            return
        out(f"Layers for the roots {','.join(kinds)}: {key}")
