"""``clrlayout trim``: a much smaller dump of the same format that gives the same ``info`` and ``dump`` (with
``--types``, also the same ``stats``, ``type`` and ``object``, where the dump held what they read).

The analysis is run with the address space recording every read (the GcDacVars structure, the heap
segments it leads to, every MethodTable looked at, every string's bytes).  Those ranges, rounded out to
pages, plus the thread stacks, are the memory the new dump keeps; the streams or notes that describe the
process (system info, modules, threads, misc info / NT_FILE, NT_PRSTATUS, ...) are kept whole.  The
output is written to a temporary file beside the target, checked, and renamed into place.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

from .. import __version__
from ..errors import OutputError, TruncatedDump
from ..limits import DEFAULT_LIMITS, Limits
from ..model.copies import kept_memory, truncation, what_it_holds, whole_pages, write_copy


@dataclass
class TrimResult:
    input_bytes: int
    output_bytes: int
    kept_memory: int
    total_memory: int
    ranges: int  #: memory ranges of the output, as ``info`` counts them
    strings: int  #: strings the trim was asked to keep (all of them, or the first ``max_strings``)
    strings_in_output: int  #: whole strings a walk of the output finds (pages hold more than the first N)
    missing_in_output: int  #: places where the output's heap walk meets memory that is not in it
    redacted: object = None  #: with ``redact``: the :class:`~clrlayout.session.redactplan.RedactReport`


#: what a redacted dump lacks, as its mark says (clrlayout.dump.redaction)
REMOVED = ["string characters", "elements of arrays of primitives", "primitive fields and boxed values",
           "free space and the heap's bytes past its allocated ends", "native memory and mapped files",
           "the images' code, literals (#US) and #Blob values other than field and type signatures",
           "floating-point and vector registers", "the command line (NT_PRPSINFO) and MiscInfo but the process id"]


def redaction_mark(keep_stacks: bool, keep_types=()) -> dict:
    return {"redacted_by": f"clrlayout {__version__}", "stacks": "kept" if keep_stacks else "removed",
            "removed": REMOVED + ([] if keep_stacks else ["thread stacks"]), "kept_types": sorted(keep_types)}


def trim(path: str, out: str, mt: int | None = None, profile: str | None = None,
         limits: Limits = DEFAULT_LIMITS, max_strings: int | None = None, types: bool = False,
         redact: bool = False, redact_keep=(), keep_stacks: bool = False, also=()) -> TrimResult:
    """Writes the trimmed dump to ``out``.  ``redact``: every byte that is not structure zeroed (session/redactplan.py;
    implies ``types``); ``redact_keep``: type names whose objects stay whole; ``keep_stacks``: the thread
    stacks stay whole; ``also``: more ``(start, end)`` ranges to keep (not with ``redact``), as a sample that
    must hold some native memory asks.  The output is written to a temporary file beside ``out``, checked (it
    opens, and its heap walk finds every string the input's found), then renamed into place: nothing is left at
    ``out`` when any of that fails.  A dump cut short is not redacted (a copy would not say that it was)."""
    if redact:
        why = truncation(path, limits)
        if why is not None:
            raise TruncatedDump(f"{why}; a redacted copy would not say so, so none is written", path)
    redaction = dict(keep_type_names=tuple(redact_keep), keep_stacks=keep_stacks) if redact else None
    ranges, count, keep, report = kept_memory(path, mt, profile, limits, max_strings, types or redact, redaction)
    if also:
        if redact:
            raise ValueError("also= keeps memory as it is; redact= zeroes what is not structure")
        ranges = whole_pages(list(ranges) + list(also))
    mark = redaction_mark(keep_stacks, redact_keep) if redact else None
    directory = os.path.dirname(os.path.abspath(out)) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=".clrlayout-trim-", dir=directory)
    except OSError as e:
        raise OutputError(f"cannot write to {directory}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            # the comment does not name the input, so that trimming a trimmed dump gives the same bytes
            comment = f"trimmed by clrlayout {__version__}: {count} strings"
            kept, total = write_copy(path, limits, ranges, f, comment, keep, keep_stacks or not redact, mark)
        regions, held, missing = what_it_holds(tmp, mt, profile, limits)  # checked before it is in place
        if redact and (held < count or missing):
            raise OutputError(f"the redacted copy does not read as the original ({held:,} of {count:,} strings; "
                              f"{missing:,} places with memory missing): not written (a bug in clrlayout)")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; an output file gets the usual mode
        os.replace(tmp, out)
    except OSError as e:
        raise OutputError(f"cannot write {out}: {e.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return TrimResult(os.path.getsize(path), os.path.getsize(out), kept, total, regions, count, held, missing, report)
