"""The ``clrlayout`` command: the group, its commands (one module each in :mod:`clrlayout.commands`: options ->
model -> presenter) and the one place errors become exit codes (:func:`main`): a :class:`ClrLayoutError`
prints one line on stderr and exits with its code; anything else is a bug and exits 70 with one line (a
traceback only with ``CLRLAYOUT_DEBUG=1``).  Data goes to stdout, warnings and errors to stderr.
"""

from __future__ import annotations

import os
import sys

# numpy's OpenBLAS starts a thread per core when it is imported, which spins for about 0.1 s; clrlayout does
# no linear algebra, and on a small machine the spinning takes a core from the walk
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click

from . import __version__
from .commands import LazyGroup
from .commands.common import EXIT_CODES
from .errors import ClrLayoutError, ExitCode, as_flags


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="clrlayout")
def cli():
    """Show how .NET objects sit in memory, byte by byte, from a crash dump (no DAC needed).

    Reads Windows minidumps (x86, x64) and Linux ELF cores of .NET Framework 4.x and CoreCLR processes.
    """


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
        click.echo(f"clrlayout: error: {as_flags(str(e))}", err=True)
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
    except MemoryError:  # a heap too large for this machine: not a bug, and not the dump's fault
        click.echo("clrlayout: error: out of memory: this machine has too little memory for the answer on this dump "
                   "(docs/performance.md says what each command needs per object)", err=True)
        return int(ExitCode.OUT_OF_MEMORY)
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
