"""Running the command line in-process, as the tests do."""

from __future__ import annotations

from clrlayout.cli import main


def run(capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``clrlayout ARGS``."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err
