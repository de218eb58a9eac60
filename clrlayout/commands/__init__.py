"""The commands of ``clrlayout``, one module each: its options, the model it asks, the presenter that writes the
answer.  :mod:`clrlayout.cli` adds them to the group."""

from .clrstack import clrstack
from .diff import diff
from .dump import dump
from .fleet import fleet
from .graph import refs, retained, roots
from .index import index
from .info import info
from .layout import layout
from .live import live
from .memory import memory
from .native import native
from .object import object_
from .pe import pe
from .report import report
from .stats import stats
from .threads import threads
from .trim import trim
from .type import type_

#: in the order ``clrlayout --help`` lists them (alphabetical, as click sorts them)
COMMANDS = [info, dump, memory, native, object_, type_, stats, refs, roots, retained, index, threads, clrstack, pe,
            report, diff, fleet, trim, layout, live]
