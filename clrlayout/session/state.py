"""The marker of a session's cache not yet computed, where None is an answer a cache can hold (no stack walker,
no native heap): every cache of :class:`~clrlayout.session.core.Session` is a declared field."""

from __future__ import annotations


class _Unset:
    """Not computed yet."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()
