"""The graph's loops compiled by numba when it is installed, each once (and kept in numba's cache, which the
wheel ships compiled: hatch_build.py runs :func:`clrlayout.graph.dominators.warm_up`), else run as Python."""

from __future__ import annotations

#: each loop compiled once, by its name
_compiled: dict = {}


def have_numba() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:  # pragma: no cover
        return False
    return True


def jit(function):
    """``function`` compiled by numba when it is installed (once), else as it is."""
    if function.__name__ not in _compiled:
        if have_numba():
            import numba

            _compiled[function.__name__] = numba.njit(cache=True, nogil=True)(function)
        else:  # pragma: no cover
            _compiled[function.__name__] = function
    return _compiled[function.__name__]
