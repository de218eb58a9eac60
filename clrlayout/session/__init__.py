"""The engine under the model: one open dump with its runtime, layout profile, GC heap and MethodTables.

:func:`open_session` opens a dump; a :class:`Session` wires the layers together for it and remembers what it
found.  The typed model (:mod:`clrlayout.model`, ``clrlayout.open``) is built on it; the commands and the
tests use its plumbing too (windows of the walk, the MethodTables).
"""

from .core import Session
from .opening import open_session
from .typesystem import FREE_TYPE, STRING_TYPE

__all__ = ["FREE_TYPE", "STRING_TYPE", "Session", "open_session"]
