"""Parquet files written and queried with DuckDB (one library for both: the export writes the files, the report and
the local platform query them).

DuckDB is imported on first use only: the export and the report are the only functions that need it.
Writing: the rows go into an in-memory table with the table's declared columns (`longhaul.core.analytics.columns`),
so every file of a table has the same schema whatever its values (an empty list, a null), then `COPY … TO` Parquet
(zstd). Reading: `read_parquet` over a directory laid out like the bucket's `analytics/` prefix, with Hive
partitioning and the partition columns typed as strings (a numeric-looking tenant id stays a string).
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
_lock = threading.Lock()  # a DuckDB connection is not shared between threads; building one is cheap


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


def scan(root: Path, table: str) -> str:
    """A `read_parquet` of every file of `table` under `root` (an empty relation of its columns when none)."""
    files = root / table
    hive_types = ", ".join(f"'{name}': 'VARCHAR'" for name, _ in PARTITION_COLUMNS)
    if not files.exists() or next(files.rglob("*.parquet"), None) is None:
        cols = [*columns(table), *PARTITION_COLUMNS]
        typed = ", ".join(f'CAST(NULL AS {_DUCK_TYPES[kind]}) AS "{name}"' for name, kind in cols)
        return f"(SELECT {typed} WHERE false)"
    pattern = str(files / "**" / "*.parquet").replace("'", "''")
    return f"read_parquet('{pattern}', hive_partitioning = true, hive_types = {{{hive_types}}}, union_by_name = true)"


def query(root: Path, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run `sql`, in which `{jobs}`, `{steps}` and `{calls}` stand for the tables' files under `root`."""
    text = sql.format(**{t: scan(root, t) for t in ("jobs", "steps", "calls")})
    connection = _connect()
    try:
        return [tuple(row) for row in connection.execute(text, list(parameters)).fetchall()]
    finally:
        connection.close()
