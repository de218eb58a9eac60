"""The fleet's output: three Parquet tables, each a directory of one file per dump (``OUT/dumps/``,
``OUT/types/``, ``OUT/memory/``, ``OUT/native/``), which pandas, pyarrow, DuckDB and Spark read as one table.

A dump's files are written to ``OUT/.partial/`` and moved into place, its ``dumps`` row last: a dump is done
when its row is there, and a run stopped half-way leaves no half-written file behind.  A rerun skips the
dumps whose row is there for the same file (path, size and modification time) unless asked to redo them."""

from __future__ import annotations

import hashlib
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import OutputError

DUMPS = pa.schema([
    ("path", pa.string()), ("size", pa.int64()), ("modified", pa.float64()), ("sha256", pa.string()),
    ("format", pa.string()), ("os", pa.string()), ("arch", pa.string()), ("runtime", pa.string()),
    ("version", pa.string()), ("gc_mode", pa.string()), ("exact", pa.bool_()), ("objects", pa.int64()),
    ("object_bytes", pa.int64()), ("live_objects", pa.int64()), ("live_bytes", pa.int64()),
    ("graph_error", pa.string()), ("seconds", pa.float64()), ("error_code", pa.string()),
    ("exit_code", pa.int32()), ("error", pa.string()), ("warnings", pa.list_(pa.string())),
    ("clrlayout_version", pa.string()),
])
TYPES = pa.schema([
    ("path", pa.string()), ("method_table", pa.uint64()), ("name", pa.string()), ("count", pa.int64()),
    ("bytes", pa.int64()), ("aligned_bytes", pa.int64()), ("retained", pa.int64()),
])
MEMORY = pa.schema([("path", pa.string()), ("kind", pa.string()), ("ranges", pa.int64()), ("bytes", pa.int64())])
#: glibc's malloc of a Linux core (`clrlayout native`): a row per arena ("arena") and per size class ("size_class",
#: over every arena), free = tcache + fastbins + bins (+ top for an arena)
NATIVE = pa.schema([
    ("path", pa.string()), ("row", pa.string()), ("arena", pa.string()), ("main", pa.bool_()), ("threads", pa.int64()),
    ("system_bytes", pa.int64()), ("in_use_count", pa.int64()), ("in_use_bytes", pa.int64()),
    ("free_count", pa.int64()), ("free_bytes", pa.int64()), ("from_bytes", pa.int64()), ("to_bytes", pa.int64()),
])
SCHEMAS = {"dumps": DUMPS, "types": TYPES, "memory": MEMORY, "native": NATIVE}


def key_of(path: str) -> str:
    """A dump's file name in each table: from its path, so that a rerun finds it."""
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def file_identity(path: str) -> tuple[int | None, float | None]:
    try:
        st = os.stat(path)
    except OSError:
        return None, None
    return st.st_size, st.st_mtime


class FleetTables:
    """The output directory: which dumps are done, and writing a dump's rows."""

    def __init__(self, out: str):
        self.out = out
        try:
            for name in (*SCHEMAS, ".partial"):
                os.makedirs(os.path.join(out, name), exist_ok=True)
        except OSError as e:
            raise OutputError(f"{out}: cannot make the output directory: {e.strerror or e}") from None

    def _file(self, table: str, key: str) -> str:
        return os.path.join(self.out, table, key + ".parquet")

    def done(self, path: str) -> bool:
        """Whether ``path`` has its row already, for the file as it is now."""
        target = self._file("dumps", key_of(path))
        if not os.path.exists(target):
            return False
        try:
            row = pq.read_table(target, columns=["path", "size", "modified"]).to_pylist()
        except (OSError, pa.ArrowException):
            return False  # a file that cannot be read is redone
        size, modified = file_identity(path)
        return len(row) == 1 and row[0] == {"path": path, "size": size, "modified": modified}

    def write(self, path: str, result: dict) -> None:
        """The rows of one dump (``result`` as :func:`clrlayout.fleet.worker.run_isolated` returns it)."""
        from .. import __version__

        key = key_of(path)
        size, modified = file_identity(path)
        dump = {name: result["dump"].get(name) for name in DUMPS.names}
        dump.update(path=path, size=size, modified=modified, clrlayout_version=__version__,
                    warnings=result["dump"].get("warnings") or [])
        tables = {"types": [{**r, "path": path} for r in result["types"]],
                  "memory": [{**r, "path": path} for r in result["memory"]],
                  "native": [{**r, "path": path} for r in result.get("native", [])],
                  "dumps": [dump]}  # last: the dump is done when its row is in place
        try:
            for table, rows in tables.items():
                target = self._file(table, key)
                if not rows:
                    if os.path.exists(target):  # a rerun's dump that has no such rows now
                        os.unlink(target)
                    continue
                partial = os.path.join(self.out, ".partial", f"{key}.{table}.parquet")
                pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMAS[table]), partial)
                os.replace(partial, target)
        except OSError as e:
            raise OutputError(f"{self.out}: cannot write the tables: {e.strerror or e}") from None

    def read(self, table: str) -> pa.Table:
        """The whole table (every dump's file), sorted by path (and by its rows' order within a dump)."""
        directory = os.path.join(self.out, table)
        parts = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
        tables = [pq.read_table(os.path.join(directory, p), schema=SCHEMAS[table]) for p in parts
                  if p.endswith(".parquet")]
        if not tables:
            return SCHEMAS[table].empty_table()
        whole = pa.concat_tables(tables)
        return whole.take(pc.sort_indices(whole, [("path", "ascending")]))
