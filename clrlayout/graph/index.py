"""The heap graph persisted once per dump, as Eclipse MAT keeps its indexes: the arrays of
:class:`~.build.HeapGraph` (addresses, kinds, types, sizes, the references in CSR form) written as ``.npy`` files
the first time a command builds the graph, and memory-mapped by the commands after it instead of walking the heap
again.

- **Where**: ``$XDG_CACHE_HOME/clrlayout/index`` (else ``~/.cache/clrlayout/index``), or the directory ``--index``
  names; ``--no-index`` neither reads nor writes one.  At most :data:`KEEP` indexes are kept in the default
  directory, the least recently used removed first, and only of heaps of :data:`MIN_NODES` objects or more.
- **Which dump**: the key is a hash of the dump's size, modification time, first MiB (its header and directory:
  the ELF program headers, the minidump stream directory) and last 64 KiB, of this format's version, and of what
  else the graph depends on (clrlayout's version, the layout profile, ``--mt``): a dump that changed, another
  dump, or another reader never finds this index.
- **Atomic**: written into a temporary directory beside the final one and renamed into place: a crashed writer
  leaves no index that is used (its temporary directory is removed by the next writer), and of two concurrent
  writers the first rename wins.
- **Checked**: a manifest (itself under a CRC-32) gives every array's dtype, shape, digest (:func:`digest`) and
  the identity of its file as written (size, inode, modification and change times); a file that is not the one
  written is read in full when the index is opened, its digest and the graph's own invariants (sorted addresses,
  row bounds that rise to the edge count, targets that are nodes) checked: an index that fails any of it is
  foreign or corrupt, is removed, and the graph is built again.  Files as written are mapped unread, so that a
  command reads only the pages it uses.
- Only a graph whose walk reported nothing is kept: a dump with heap anomalies is walked (and its findings
  reported) every time.
- **Layers**: what is computed from the graph for one set of roots (the reversed references, the breadth-first
  tree, the dominator tree and retained sizes) is kept beside it as a *layer* (:class:`Layers`), named by a hash
  of the roots and of the edges they add, written and checked the same way, each when first computed: a second
  ``roots``, ``refs`` or ``retained`` with the same roots reads it instead of computing it again.
- **Notes**: small answers the dump alone decides (where each module's statics begin) are kept as JSON beside it
  (:class:`Note`), with their CRC-32, the same way.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: the index's layout; a different one is another key (2: the dominators layer keeps the largest retainers)
FORMAT = 2
#: indexes kept in the default directory
KEEP = 8
#: the fewest objects whose graph is written to the default directory (a smaller one is walked in well under a
#: second); a directory the user names, and ``clrlayout index``, take every graph
MIN_NODES = 200_000
#: the arrays of a HeapGraph kept, and the dtypes each may have
ARRAYS = {"addresses": ("uint64",), "kinds": ("uint16", "uint32"), "types": ("uint64",),
          "aligned": ("uint32", "int64"), "indptr": ("int32", "int64"), "indices": ("int32", "int64")}
_HEAD, _TAIL = 1 << 20, 64 << 10


def default_directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "clrlayout" / "index"


def dump_key(path: str, reader: str = "") -> str:
    """The hash that names a dump's index (see the module's docstring); ``reader``: what else the graph depends on
    (clrlayout's version, the layout profile, a MethodTable given by hand)."""
    st = os.stat(path)
    h = hashlib.sha256(f"clrlayout-index {FORMAT} {st.st_size} {st.st_mtime_ns} {reader}".encode())
    with open(path, "rb") as f:
        h.update(f.read(_HEAD))
        if st.st_size > _HEAD:
            f.seek(max(_HEAD, st.st_size - _TAIL))
            h.update(f.read(_TAIL))
    return h.hexdigest()[:32]


def _write_arrays(tmp: Path, arrays: dict[str, np.ndarray]) -> dict:
    spec = {}
    for name, array in arrays.items():
        a = np.ascontiguousarray(array)
        path = tmp / f"{name}.npy"
        np.save(path, a, allow_pickle=False)
        spec[name] = {"dtype": str(a.dtype), "shape": list(a.shape), "digest": digest(a), "file": _identity(path)}
    return spec


def _identity(path: Path) -> list[int]:
    """What changes whenever a file's bytes are written (its size, inode, and modification and change times: the
    change time cannot be set back), recorded when the file is written (a directory renamed keeps its files')."""
    st = os.stat(path)
    return [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _unchanged(where: Path, spec: dict, names) -> bool:
    """Whether every array file is the one written (:func:`_identity`): its digest and the graph's invariants,
    checked when it was written, need not be read again (each is read only as far as a command uses it, as the
    page cache lets go of what is not used); a file written since, copied or restored is checked in full."""
    try:
        return all(spec[name].get("file") == _identity(where / f"{name}.npy") for name in names)
    except OSError:
        return False


def _write_manifest(path: Path, meta: dict) -> None:
    """The manifest with the CRC-32 of its own text (``check``): a changed byte anywhere in it is found, the
    files' identities it records included."""
    text = json.dumps(meta, sort_keys=True)
    path.write_text(json.dumps({**meta, "check": zlib.crc32(text.encode())}), encoding="utf-8")


def _read_manifest(path: Path) -> dict:
    """The manifest, checked (:func:`_write_manifest`): raises ValueError when it is not what was written."""
    meta = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(meta, dict) or meta.pop("check", None) != zlib.crc32(json.dumps(meta, sort_keys=True).encode()):
        raise ValueError("the manifest changed (CRC-32)")
    return meta


def _read_arrays(where: Path, spec: dict, allowed: dict, check: bool = True) -> dict[str, np.ndarray]:
    """The arrays the manifest's ``spec`` names, memory-mapped, each checked against it (dtype, shape; digest
    with ``check``): raises ValueError (or OSError) when one is not what it says."""
    arrays = {}
    for name, dtypes in allowed.items():
        try:
            a = np.load(where / f"{name}.npy", mmap_mode="r", allow_pickle=False)
        except OSError:
            raise
        except Exception as e:  # a damaged header: numpy parses it as a Python literal (TokenError, SyntaxError...)
            raise ValueError(f"{name}: not an array ({type(e).__name__})") from None
        if str(a.dtype) not in dtypes or str(a.dtype) != spec[name]["dtype"] or list(a.shape) != spec[name]["shape"] \
                or a.ndim != 1:
            raise ValueError(f"{name}: not the array the manifest says")
        if check and digest(a) != spec[name]["digest"]:
            raise ValueError(f"{name}: its bytes changed (digest)")
        arrays[name] = a
    return arrays


#: words a chunk of the digest (its scratch: a product of 8 MiB)
_WORDS = 1 << 20


@functools.cache
def _weights() -> np.ndarray:
    return np.arange(1, _WORDS + 1, dtype=np.uint64)


def digest(array: np.ndarray) -> str:
    """A position-weighted sum of the array's 8-byte words, modulo 2**64 (Fletcher's scheme over words:
    ``sum(w)`` and ``sum(i * w)``), with the CRC-32 of the bytes after the last whole word: any changed word
    changes the first sum, two words that changed places (of different values) the second.  Numpy sums it at
    memory speed, five times as fast as CRC-32: the graph of ten million objects in about 0.02 s."""
    weights = _weights()
    raw = array.reshape(-1).view(np.uint8)
    whole = len(raw) // 8
    words = raw[: whole * 8].view("<u8")
    plain = weighted = 0
    for lo in range(0, whole, _WORDS):
        chunk = words[lo : lo + _WORDS]
        total = int(np.add.reduce(chunk, dtype=np.uint64))
        plain += total
        weighted += lo * total + int(np.add.reduce(chunk * weights[: len(chunk)], dtype=np.uint64))
    mask = (1 << 64) - 1
    return f"{plain & mask:016x}{weighted & mask:016x}{zlib.crc32(raw[whole * 8 :]):08x}"


class GraphIndex:
    """The index of one dump in ``directory`` (None: the default one)."""

    def __init__(self, dump_path: str, directory: str | os.PathLike | None = None, reader: str = ""):
        self.root = Path(directory) if directory is not None else default_directory()
        self.bounded = directory is None  # only the default directory is trimmed to KEEP
        self.key = dump_key(dump_path, reader)
        self.path = self.root / self.key
        #: why an index found was not used (a corrupt or foreign one), for the caller to say
        self.rejected: str | None = None

    def load(self) -> tuple[dict[str, np.ndarray], dict] | None:
        """(the arrays, memory-mapped, and the manifest's ``extra``), or None when there is no usable index (a
        rejected one is removed, and why is in :attr:`rejected`)."""
        manifest = self.path / "manifest.json"
        if not manifest.is_file():
            return None
        try:
            meta = _read_manifest(manifest)
            if meta.get("format") != FORMAT or meta.get("key") != self.key:
                raise ValueError("an index of another dump or format")
            checked = _unchanged(self.path, meta["arrays"], ARRAYS)
            arrays = _read_arrays(self.path, meta["arrays"], ARRAYS, check=not checked)
            _check_graph(arrays, full=not checked)
            os.utime(manifest)  # recently used
            return arrays, meta.get("extra", {})
        except (OSError, ValueError, KeyError, TypeError, EOFError) as e:  # np.load raises ValueError on a bad header
            self.rejected = f"the index at {self.path} was not used ({e}): the graph is built again"
            shutil.rmtree(self.path, ignore_errors=True)
            return None

    def save(self, arrays: dict[str, np.ndarray], extra: dict) -> bool:
        """Writes the index if there is none yet (atomically); False when it could not be written (a read-only
        or full disk: the command goes on without it)."""
        if self.path.exists():
            return False
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            for stale in self.root.glob(".tmp-*"):  # what a crashed writer left, after an hour
                if stale.stat().st_mtime < time.time() - 3600:
                    shutil.rmtree(stale, ignore_errors=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
            try:
                spec = _write_arrays(tmp, {name: arrays[name] for name in ARRAYS})
                meta = {"format": FORMAT, "key": self.key, "arrays": spec, "extra": extra}
                _write_manifest(tmp / "manifest.json", meta)
                os.rename(tmp, self.path)  # atomic; fails if another writer was first
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                return False
            if self.bounded:
                self._trim()
            return True
        except OSError:
            return False

    def _trim(self) -> None:
        entries = []
        for p in self.root.iterdir():
            m = p / "manifest.json"
            if p.is_dir() and not p.name.startswith(".") and m.is_file():
                entries.append((m.stat().st_mtime, p))
        for _, p in sorted(entries, key=lambda e: e[0], reverse=True)[KEEP:]:
            shutil.rmtree(p, ignore_errors=True)


def _check_graph(a: dict[str, np.ndarray], full: bool = True) -> None:
    """The invariants every heap graph has (what a foreign or damaged index breaks; not ``full``: only those
    that read no more than a few elements): raises ValueError."""
    n, edges = len(a["addresses"]), len(a["indices"])
    if len(a["kinds"]) != n or len(a["aligned"]) != n or len(a["indptr"]) != n + 1:
        raise ValueError("arrays of different lengths")
    if n and (a["indptr"][0] != 0 or a["indptr"][-1] != edges):
        raise ValueError("row bounds that do not rise to the edge count")
    if not full:
        return
    if n and (a["indptr"][0] != 0 or a["indptr"][-1] != edges or np.any(np.diff(a["indptr"]) < 0)):
        raise ValueError("row bounds that do not rise to the edge count")
    if n > 1 and np.any(a["addresses"][1:] <= a["addresses"][:-1]):
        raise ValueError("node addresses out of order")
    if edges and (int(a["indices"].min()) < 0 or int(a["indices"].max()) >= n):
        raise ValueError("a reference to no node")
    if n and int(a["kinds"].max()) >= len(a["types"]):
        raise ValueError("a node of no type")


#: the layers kept beside a graph, the arrays of each and the dtypes each may have
LAYERS = {
    "reverse": {"rindptr": ("int32", "int64"), "rindices": ("int32", "int64")},
    "parent": {"parent": ("int32", "int64")},
    "dominators": {"idom": ("int32", "int64"), "retained": ("uint32", "int64", "uint64"),
                   "count": ("int32", "int64"), "top": ("bool",), "largest": ("int64",)},
    # per type (the graph's kinds): live objects, their bytes, what they retain (ObjectGraph.by_type)
    "types": {"counts": ("int64",), "sizes": ("int64",), "kept": ("int64",)},
    # the native chunks live objects own (clrlayout.model.native): owner and bytes of each; has: a native heap
    "native": {"nodes": ("int64",), "sizes": ("int64",), "has": ("bool",)},
}


class Layers:
    """The layers of one set of roots (``key``: a hash of them) beside the graph's index at ``path`` (a graph
    of ``nodes`` objects and ``edges`` references, the added ones included)."""

    def __init__(self, path: Path, key: str, nodes: int, edges: int, warn=None):
        self.path, self.key, self.nodes, self.edges = path, key, nodes, edges
        #: told why a layer found was not used (a corrupt or foreign one)
        self.warn = warn

    def _where(self, name: str) -> Path:
        return self.path / f"layer-{name}-{self.key}"

    def load(self, name: str) -> dict[str, np.ndarray] | None:
        """The layer's arrays, memory-mapped and checked; None when there is none (a bad one is removed)."""
        where = self._where(name)
        manifest = where / "manifest.json"
        if not manifest.is_file():
            return None
        try:
            meta = _read_manifest(manifest)
            if meta.get("format") != FORMAT or meta.get("key") != self.key or meta.get("layer") != name:
                raise ValueError("a layer of other roots or another format")
            checked = _unchanged(where, meta["arrays"], LAYERS[name])
            arrays = _read_arrays(where, meta["arrays"], LAYERS[name], check=not checked)
            _check_layer(name, arrays, self.nodes, self.edges, full=not checked)
            return arrays
        except (OSError, ValueError, KeyError, TypeError, EOFError) as e:
            if self.warn is not None:
                self.warn(f"the index's {name} layer at {where} was not used ({e}): it is computed again")
            shutil.rmtree(where, ignore_errors=True)
            return None

    def save(self, name: str, arrays: dict[str, np.ndarray]) -> bool:
        """Writes the layer if there is none yet (atomically, as the graph's index); False when it could not."""
        where = self._where(name)
        if where.exists() or not self.path.is_dir():
            return False
        try:
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.path))
        except OSError:
            return False
        try:
            spec = _write_arrays(tmp, {k: arrays[k] for k in LAYERS[name]})
            meta = {"format": FORMAT, "key": self.key, "layer": name, "arrays": spec}
            _write_manifest(tmp / "manifest.json", meta)
            os.rename(tmp, where)
            return True
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            return False


def _within_all(a: np.ndarray, lo: int, hi: int) -> bool:
    return not len(a) or (int(a.min()) >= lo and int(a.max()) < hi)


def _check_layer(name: str, a: dict[str, np.ndarray], n: int, edges: int, full: bool = True) -> None:
    """The invariants of each layer of a graph of ``n`` nodes and ``edges`` references (not ``full``: the lengths
    and the ends alone, what reads no more than a few elements): raises ValueError."""
    _within = _within_all if full else (lambda a, lo, hi: True)
    if name == "reverse":
        rindptr, rindices = a["rindptr"], a["rindices"]
        if len(rindptr) != n + 1 or len(rindices) != edges or (n and (
                rindptr[0] != 0 or rindptr[-1] != edges or (full and np.any(np.diff(rindptr) < 0)))):
            raise ValueError("row bounds that do not rise to the edge count")
        if not _within(rindices, 0, n):
            raise ValueError("a referrer that is no node")
    elif name == "parent":
        if len(a["parent"]) != n or not _within(a["parent"], -1, n):
            raise ValueError("a parent that is no node")
    elif name == "dominators":
        if any(len(a[k]) != n for k in ("idom", "retained", "count", "top")) or not _within(a["idom"], -1, n + 1):
            raise ValueError("a dominator that is no node")
        if len(a["largest"]) > n or not _within(a["largest"], 0, n):
            raise ValueError("a largest retainer that is no node")
    elif name == "types":
        if any(len(a[k]) != len(a["counts"]) for k in LAYERS[name]) or not _within(a["counts"], 0, n + 1):
            raise ValueError("per-type counts that are no counts")
    elif name == "native" and (len(a["has"]) != 1 or len(a["nodes"]) != len(a["sizes"])
                               or not _within(a["nodes"], 0, n) or not _within(a["sizes"], 0, 1 << 62)):
        raise ValueError("an owner that is no node")


class Note:
    """A small JSON answer kept beside the graph's index at ``path`` under ``name`` (what else it depends on, the
    assemblies' folders say, is in the name)."""

    def __init__(self, path: Path, name: str, warn: Callable[[str], None] | None = None) -> None:
        self.where = path / f"note-{name}.json"
        self.warn = warn

    def load(self) -> Any:
        """The value kept, or None (a bad one is removed, and said)."""
        if not self.where.is_file():
            return None
        try:
            meta = json.loads(self.where.read_text(encoding="utf-8"))
            text = json.dumps(meta["value"], sort_keys=True)
            if meta.get("format") != FORMAT or zlib.crc32(text.encode()) != meta["crc32"]:
                raise ValueError("its bytes changed (CRC-32)")
            return meta["value"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            if self.warn is not None:
                self.warn(f"the index's note {self.where} was not used ({e}): it is computed again")
            try:
                self.where.unlink()
            except OSError:
                pass
            return None

    def save(self, value: Any, replace: bool = False) -> bool:
        """Writes the value (atomically: a temporary file renamed; ``replace``: over the one kept, which a reader
        sees whole, before or after); False when it could not be written."""
        if (self.where.exists() and not replace) or not self.where.parent.is_dir():
            return False
        text = json.dumps(value, sort_keys=True)
        try:
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.where.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                # the value's keys in their order (what the caller made is given back as it was)
                json.dump({"format": FORMAT, "crc32": zlib.crc32(text.encode()), "value": value}, f)
            os.replace(tmp, self.where)
            return True
        except OSError:
            return False
