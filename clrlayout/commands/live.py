"""``clrlayout live``: a hosted runtime's strings checked against the decoders and profiles."""

from __future__ import annotations

import click

from ..errors import ExitCode, UsageError
from .common import emit, format_option, profile_option


@click.command()
@click.option("--runtime", type=click.Choice(["coreclr", "mono"]), default="coreclr", show_default=True,
              help="coreclr: the embedded CoreCLR 3.1.23 (pip install 'clrlayout[live]'), or that of --dotnet-root; "
                   "mono: the system's Mono.")
@click.option("--max-length", type=click.IntRange(0, 100_000), default=64, show_default=True,
              help="Check every length from 0 to N (plus the special cases).")
@format_option("table", "json")
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
    from ..live.harness import run
    from ..present.live import live_lines
    from ..present.results import Result

    if runtime != "coreclr" and (dotnet_root or framework):
        raise UsageError("--dotnet-root and --framework choose a CoreCLR installation, not --runtime mono")
    if framework is not None and dotnet_root is None:
        raise UsageError("--framework chooses among the runtimes of --dotnet-root DIR: give that too")
    report = run(runtime, max_length, capture, profile, dotnet_root, framework)
    emit(Result(lambda: live_lines(report), document=report.as_dict()), fmt)
    if report.failures:
        ctx.exit(int(ExitCode.FINDINGS))
