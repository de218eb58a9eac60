"""Every error clrlayout raises, each with a stable ``code`` and the exit code the CLI maps it to.

Library entry points raise only :class:`ClrLayoutError` subclasses; third-party exceptions (construct,
minidump, pyelftools, UnicodeDecodeError, OSError) are converted at one chokepoint per reader.
"""

from __future__ import annotations

import enum
import re


class ExitCode(enum.IntEnum):
    """Process exit codes of the ``clrlayout`` command (documented in docs/reference.md)."""

    OK = 0
    #: under ``--strict``, an answer that is not exact and complete; or a failed check in ``clrlayout live``
    FINDINGS = 1
    #: bad command line (click's own code)
    USAGE = 2
    #: the dump is unreadable, truncated beyond use, or of an unsupported format
    BAD_DUMP = 3
    #: the dump is readable but holds no .NET runtime, GC heap or System.String type that can be found
    NO_RUNTIME = 4
    #: a layout profile in formats/ is invalid, or none matches the runtime
    BAD_PROFILE = 5
    #: an output file (or a temporary file of ``stats --duplicates``) could not be written
    OUTPUT = 6
    #: a live runtime could not be hosted (missing package or library)
    NO_LIVE_RUNTIME = 7
    #: the machine ran out of memory for the answer (a heap too large for it: see docs/performance.md)
    OUT_OF_MEMORY = 8
    #: a bug in clrlayout
    INTERNAL = 70


class ClrLayoutError(Exception):
    """Base of every error clrlayout raises on purpose."""

    code = "error"
    exit_code = ExitCode.INTERNAL

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


# --- dump files -------------------------------------------------------------------------------------


class DumpError(ClrLayoutError):
    """The dump file cannot be used."""

    code = "bad-dump"
    exit_code = ExitCode.BAD_DUMP

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}: "
        if offset is not None:
            message = f"{message} (file offset {offset:#x})"
        super().__init__(where + message)
        self.path = path
        self.offset = offset


class UnsupportedDump(DumpError):
    """Not a minidump or ELF core (recognised by magic, not by name)."""

    code = "unsupported-dump"


class TruncatedDump(DumpError):
    """The file ends before a structure that is needed."""

    code = "truncated-dump"


class MalformedDump(DumpError):
    """A structure of the dump is inconsistent."""

    code = "malformed-dump"


class LimitExceeded(DumpError):
    """The dump asks for more than :class:`clrlayout.limits.Limits` allow."""

    code = "limit-exceeded"

    def __init__(self, what: str, value: int, limit: int, path: str | None = None):
        super().__init__(f"{what} is {value:,}, over the limit of {limit:,}", path)
        self.what = what
        self.value = value
        self.limit = limit


# --- memory -----------------------------------------------------------------------------------------


class AddressError(ClrLayoutError):
    """Target memory that is not in the dump."""

    code = "unmapped-address"
    exit_code = ExitCode.BAD_DUMP

    def __init__(self, address: int, size: int, missing_at: int | None = None):
        missing_at = address if missing_at is None else missing_at
        super().__init__(f"memory at {missing_at:#x} is not in the dump (reading {size} bytes at {address:#x})")
        self.address = address
        self.size = size
        self.missing_at = missing_at


# --- runtime, heap, types ---------------------------------------------------------------------------


class RuntimeNotFound(ClrLayoutError):
    """No CLR module in the dump."""

    code = "no-runtime"
    exit_code = ExitCode.NO_RUNTIME


class HeapNotFound(ClrLayoutError):
    """No GC heap could be located."""

    code = "no-gc-heap"
    exit_code = ExitCode.NO_RUNTIME


class TypeNotFound(ClrLayoutError):
    """The requested type's MethodTable could not be found (or --mt does not point at one)."""

    code = "type-not-found"
    exit_code = ExitCode.NO_RUNTIME


class RootsNotFound(ClrLayoutError):
    """A kind of roots that an answer needs cannot be read from this dump."""

    code = "roots-not-found"
    exit_code = ExitCode.NO_RUNTIME


class NativeHeapNotFound(ClrLayoutError):
    """The dump's native heap cannot be read: not a Linux core, another allocator than glibc's malloc (musl,
    jemalloc, ...), or no malloc state in the dump."""

    code = "no-native-heap"
    exit_code = ExitCode.NO_RUNTIME


class AmbiguousType(ClrLayoutError):
    """Several types have the name asked for (one per module or load context): which one is for the caller."""

    code = "ambiguous-type"
    exit_code = ExitCode.USAGE


class RedactedPart(ClrLayoutError):
    """The question needs a part of the dump that ``trim --redact`` removed (its values)."""

    code = "redacted"
    exit_code = ExitCode.NO_RUNTIME


class UnsupportedType(ClrLayoutError):
    code = "unsupported-type"
    exit_code = ExitCode.USAGE


class DecodeError(ClrLayoutError):
    """An object or structure could not be decoded."""

    code = "decode-error"
    exit_code = ExitCode.BAD_DUMP

    def __init__(self, message: str, address: int | None = None):
        if address is not None:
            message = f"{message} at {address:#x}"
        super().__init__(message)
        self.address = address


# --- profiles ---------------------------------------------------------------------------------------


class ProfileError(ClrLayoutError):
    code = "bad-profile"
    exit_code = ExitCode.BAD_PROFILE


class InvalidProfile(ProfileError):
    code = "invalid-profile"

    def __init__(self, path: str, key: str, reason: str):
        super().__init__(f"{path}: {key}: {reason}")
        self.path = path
        self.key = key
        self.reason = reason


class NoMatchingProfile(ProfileError):
    code = "no-matching-profile"

    def __init__(self, flavor: str, arch: str, version: str | None):
        super().__init__(f"no layout profile for {flavor} {version or '(unknown version)'} on {arch}")
        self.flavor = flavor
        self.arch = arch
        self.version = version


# --- output, live -----------------------------------------------------------------------------------


class OutputError(ClrLayoutError):
    code = "output-error"
    exit_code = ExitCode.OUTPUT


class LiveRuntimeUnavailable(ClrLayoutError):
    code = "no-live-runtime"
    exit_code = ExitCode.NO_LIVE_RUNTIME


class ConfigError(ClrLayoutError):
    """A bad setting (e.g. CLRLAYOUT_LIMITS)."""

    code = "bad-config"
    exit_code = ExitCode.USAGE


class UsageError(ClrLayoutError):
    """A request that cannot apply to this dump or these profiles (a 32-bit profile for a 64-bit dump, a
    runtime version no profile covers, a filter that can select nothing)."""

    code = "usage"
    exit_code = ExitCode.USAGE


class NotExact(ClrLayoutError):
    """Raised under ``--strict`` when the answer is not exact and complete."""

    code = "not-exact"
    exit_code = ExitCode.FINDINGS


# --- how messages name the options ------------------------------------------------------------------

#: a library message names an option as the Python API's keyword (``method_table=0x...``); the command line
#: shows its flag instead (``--mt 0x...``): :func:`as_flags`, at the CLI's chokepoints
OPTION_FLAGS = {"method_table=": "--mt ", "profile=": "--profile ", "assemblies=": "--assemblies ",
                "heap=": "--heap ", "roots=": "--roots ", "runtime_version=": "--runtime-version ",
                "type_name=": "--type "}
_OPTION = re.compile(r"\b(" + "|".join(k[:-1] for k in OPTION_FLAGS) + r")=")


#: an API keyword set to True that is a flag of its own on the command line
SWITCH_FLAGS = {"redact=True": "--redact", "keep_stacks=True": "--keep-stacks", "exact=True": "--exact"}
_SWITCH = re.compile(r"\b(" + "|".join(re.escape(k) for k in SWITCH_FLAGS) + r")")


def as_flags(message: str) -> str:
    """``message`` with the API's option names as the command line's flags."""
    return _OPTION.sub(lambda m: OPTION_FLAGS[m.group(0)], _SWITCH.sub(lambda m: SWITCH_FLAGS[m.group(0)], message))
