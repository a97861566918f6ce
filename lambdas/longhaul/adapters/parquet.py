"""Parquet files written and queried with DuckDB (one library for both: the export writes the files, the report and
the local platform query them).

DuckDB is imported on first use only: the export and the report are the only functions that need it.
Writing: the rows go into an in-memory table with the table's declared columns (`longhaul.core.analytics.columns`),
so every file of a table has the same schema whatever its values (an empty list, a null), then `COPY … TO` Parquet
(zstd). Folding: a table's day file is rewritten with a run's job files in place of those jobs' earlier rows (`fold`).
Reading: queries read the day files of a window (`Session`).
"""

from __future__ import annotations

import os
import tempfile
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


def fold(table: str, current: Path | None, added: Path, replaced: Sequence[str], target: Path) -> None:
    """Write `target`, a table's day file: the rows of the day file `current` (None: there is none yet) less those of
    the `replaced` jobs, then the rows of the job files under `added` (one day's folder laid out as `analytics/`:
    `<table>/dt=<day>/tenant_id=…/workflow=…/<job_id>.parquet`), their partition columns (typed as strings: a
    numeric-looking tenant id stays a string) stored in the file. Its columns are the table's, then the partitions'."""
    names = ", ".join(f'"{n}"' for n, _ in (*columns(table), *PARTITION_COLUMNS))
    hive_types = ", ".join(f"'{name}': 'VARCHAR'" for name, _ in PARTITION_COLUMNS)
    parts: list[str] = []
    parameters: list[Any] = []
    if current is not None:
        # By name over the declared columns: a day file written before a column was added reads it as null.
        parts.append(
            f"SELECT {names} FROM (SELECT * FROM {_empty(table)} UNION ALL BY NAME "
            f"SELECT * FROM read_parquet('{_quoted(current)}')) WHERE NOT list_contains(?, job_id)"
        )
        parameters.append(list(replaced))
    if added.is_dir() and any(added.rglob("*.parquet")):
        pattern = _quoted(added / "**" / "*.parquet")
        parts.append(
            f"SELECT {names} FROM read_parquet('{pattern}', hive_partitioning = true, hive_types = {{{hive_types}}})"
        )
    if not parts:
        parts.append(f"SELECT * FROM {_empty(table)}")
    connection = _connect()
    try:
        connection.execute(
            f"COPY ({' UNION ALL '.join(parts)}) TO '{_quoted(target)}' (FORMAT parquet, COMPRESSION zstd)",
            parameters,
        )
    finally:
        connection.close()


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


def _empty(table: str) -> str:
    """An empty relation of the table's columns and its partitions'."""
    cols = [*columns(table), *PARTITION_COLUMNS]
    typed = ", ".join(f'CAST(NULL AS {_DUCK_TYPES[kind]}) AS "{name}"' for name, kind in cols)
    return f"(SELECT {typed} WHERE false)"


def _relation(cache: Path, table: str, days: Sequence[str]) -> str:
    """The table's day files in `cache` for `days` (an empty relation of its columns when there are none)."""
    files = [cache / table / f"{day}.parquet" for day in days]
    present = [_quoted(f) for f in files if f.exists()]
    if not present:
        return _empty(table)
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
