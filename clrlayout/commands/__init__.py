"""The commands of ``clrlayout``, one module each: its options, the model it asks, the presenter that writes the
answer.  :mod:`clrlayout.cli` lists them from :data:`COMMANDS` and imports a command's module only when it runs
(or ``--help`` lists them): a command starts without loading the others' modules."""

from __future__ import annotations

import importlib

import click

#: name -> (module, function), in the order ``clrlayout --help`` lists them (alphabetical, as click sorts them)
COMMANDS = {"info": ("info", "info"), "dump": ("dump", "dump"), "memory": ("memory", "memory"),
            "native": ("native", "native"), "object": ("object", "object_"), "type": ("type", "type_"),
            "stats": ("stats", "stats"), "refs": ("graph", "refs"), "roots": ("graph", "roots"),
            "retained": ("graph", "retained"), "index": ("index", "index"), "threads": ("threads", "threads"),
            "clrstack": ("clrstack", "clrstack"), "pe": ("pe", "pe"), "report": ("report", "report"),
            "diff": ("diff", "diff"), "fleet": ("fleet", "fleet"), "trim": ("trim", "trim"),
            "layout": ("layout", "layout"), "live": ("live", "live")}


def command(name: str) -> click.Command:
    """The command ``name`` (its module imported now)."""
    module, function = COMMANDS[name]
    found: click.Command = getattr(importlib.import_module(f".{module}", __name__), function)
    return found


class LazyGroup(click.Group):
    """A group whose commands are imported when one is asked for (click's documented lazy loading)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return command(cmd_name) if cmd_name in COMMANDS else None
