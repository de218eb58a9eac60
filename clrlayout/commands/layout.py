"""``clrlayout layout``: string layouts from the profiles alone, on every runtime and architecture."""

from __future__ import annotations

import click

from ..errors import UsageError
from .common import _type_check, emit, format_option


def _csv(ctx, param, value):
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@click.command()
@click.option("--type", "type_name", default="System.String", show_default=True)
@click.option("--length", "lengths", required=True, metavar="N|A..B", help="A length, or a range A..B.")
@click.option("--runtime", "runtimes", callback=_csv, default=None, metavar="LIST",
              help="netfx,coreclr,mono (default: all).")
@click.option("--arch", "archs", callback=_csv, default=None, metavar="LIST", help="x86,x64,arm64 (default: all).")
@click.option("--runtime-version", default=None, metavar="V",
              help="Resolve each profile for this runtime version instead of showing every layout variant.")
@format_option("table", "json")
def layout(type_name, lengths, runtimes, archs, runtime_version, fmt):
    """The layout of a string on every runtime and architecture, from the profiles alone (no dump)."""
    from ..model.layouts import parse_lengths, profile_string_layout, select_variants
    from ..present import estimates as present
    from ..present.results import Result

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
    layouts = [(v.label, profile_string_layout(v.profile, n)) for n in ns for v in chosen]
    text = present.single_lines if len(ns) == 1 else present.range_lines
    emit(Result(lambda: text(layouts), document=[present.layout_record(label, lay) for label, lay in layouts]), fmt)
