"""Parquet files written and queried with DuckDB (one library for both: the export writes the files, the report and
the local platform query them).

DuckDB is imported on first use only: the export and the report are the only functions that need it.
Writing: the rows go into an in-memory table with the table's declared columns (`longhaul.core.analytics.columns`),
so every file of a table has the same schema whatever its values (an empty list, a null), then `COPY … TO` Parquet
(zstd). Reading: the job files (a directory laid out like the bucket's `analytics/` prefix) are compacted into one
file per table and day first (Hive partitioning, the partition columns typed as strings: a numeric-looking tenant id
stays a string), rebuilt only when that day's files change; queries read those (`Session`).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from longhaul.core.analytics import PARTITION_COLUMNS, columns

_DUCK_TYPES = {
    "string": "VARCHAR",
    "bigint": "BIGINT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "array<string>": "VARCHAR[]",
}


def _connect() -> Any:
    import duckdb  # the export's and the report's dependency only

    return duckdb.connect(":memory:", config={"threads": 2, "enable_external_access": True})


def _utc_naive(value: Any) -> Any:
    """Timestamps are stored as UTC without a zone (Parquet's `isAdjustedToUTC`, Athena's `timestamp`)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def encode(table: str, rows: Sequence[dict[str, Any]]) -> bytes:
    """The rows as one Parquet file of `table`'s columns."""
    cols = columns(table)
    definition = ", ".join(f'"{name}" {_DUCK_TYPES[kind]}' for name, kind in cols)
    names = [name for name, _ in cols]
    handle, path = tempfile.mkstemp(suffix=".parquet")
    os.close(handle)
    try:
        connection = _connect()
        try:
            connection.execute(f"CREATE TABLE t ({definition})")
            if rows:
                marks = ", ".join("?" for _ in names)
                connection.executemany(
                    f"INSERT INTO t VALUES ({marks})", [[_utc_naive(row.get(n)) for n in names] for row in rows]
                )
            connection.execute(f"COPY t TO '{path}' (FORMAT parquet, COMPRESSION zstd)")
        finally:
            connection.close()
        return Path(path).read_bytes()
    finally:
        Path(path).unlink(missing_ok=True)


def _day_files(root: Path, table: str, day: str) -> list[os.DirEntry[str]]:
    found: list[os.DirEntry[str]] = []
    pending = [root / table / f"dt={day}"]
    while pending:
        folder = pending.pop()
        if not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir():
                    pending.append(Path(entry.path))
                elif entry.name.endswith(".parquet"):
                    found.append(entry)
    return found


def compact(root: Path, cache: Path, days: Sequence[str]) -> None:
    """One file per table and day in `cache` (`<table>/<day>.parquet`, the partition columns inside it) from the
    job files under `root`, rebuilt only when the day's files changed (their count, sizes and times): a report reads
    a few dozen files, not one per job."""
    hive_types = ", ".join(f"'{name}': 'VARCHAR'" for name, _ in PARTITION_COLUMNS)
    connection = None
    try:
        for table in ("jobs", "steps", "calls"):
            for day in days:
                target = cache / table / f"{day}.parquet"
                mark = target.with_suffix(".sig")
                files = _day_files(root, table, day)
                if not files:
                    target.unlink(missing_ok=True)
                    mark.unlink(missing_ok=True)
                    continue
                stats = [f.stat() for f in files]
                signature = f"{len(files)} {sum(s.st_size for s in stats)} {max(s.st_mtime_ns for s in stats)}"
                if target.exists() and mark.exists() and mark.read_text() == signature:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                connection = connection or _connect()
                pattern = str(root / table / f"dt={day}" / "**" / "*.parquet").replace("'", "''")
                # A name of this thread's own: two reports compacting the same day never write one file.
                partial = str(target.with_suffix(f".{os.getpid()}-{threading.get_ident()}.part")).replace("'", "''")
                connection.execute(
                    f"COPY (SELECT * FROM read_parquet('{pattern}', hive_partitioning = true, "
                    f"hive_types = {{{hive_types}}}, union_by_name = true)) TO '{partial}' (FORMAT parquet)"
                )
                Path(partial).replace(target)
                mark.write_text(signature)
    finally:
        if connection is not None:
            connection.close()


def _relation(cache: Path, table: str, days: Sequence[str]) -> str:
    """The table's day files in `cache` for `days` (an empty relation of its columns when there are none)."""
    files = [cache / table / f"{day}.parquet" for day in days]
    present = [str(f).replace("'", "''") for f in files if f.exists()]
    if not present:
        cols = [*columns(table), *PARTITION_COLUMNS]
        typed = ", ".join(f'CAST(NULL AS {_DUCK_TYPES[kind]}) AS "{name}"' for name, kind in cols)
        return f"(SELECT {typed} WHERE false)"
    listed = ", ".join(f"'{p}'" for p in present)
    return f"read_parquet([{listed}], union_by_name = true)"


class Session:
    """One DuckDB connection over the day files of `days`: in each statement `{jobs}`, `{steps}` and `{calls}` stand
    for those tables."""

    def __init__(self, cache: Path, days: Sequence[str]) -> None:
        self._tables = {t: _relation(cache, t, days) for t in ("jobs", "steps", "calls")}
        self._connection = _connect()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_: object) -> None:
        self._connection.close()

    def run(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self._connection.execute(sql.format(**self._tables), list(parameters))
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
