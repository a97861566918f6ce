"""What every command shares: the API's address and key (`--url`, `--key`, else `LONGHAUL_URL`, `LONGHAUL_API_KEY`),
`--output text|json`, and how errors end a command.

Exit codes scripts can use: 0 done; 1 a watched job ended `failed`, `cancelled` or `expired` (or a webhook delivery did
not verify); 2 a usage or API error. An API error prints the problem's title and detail on stderr (and, with `--output
json`, the problem document on stdout), never a traceback. With `--output json` stdout holds one JSON document and
nothing else.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from longhaul_client.client import LonghaulClient
from longhaul_client.errors import LonghaulError, Problem

#: The API the command calls (`make run` prints the local one; a deployed stage's is its API endpoint output).
URL_ENV = "LONGHAUL_URL"
#: The API key the command calls with (`--key` overrides it).
KEY_ENV = "LONGHAUL_API_KEY"
#: The terminal's width: piped output is this wide (else not cut).
COLUMNS_ENV = "COLUMNS"
EXIT_OK, EXIT_JOB_NOT_COMPLETED, EXIT_ERROR = 0, 1, 2
PIPED_WIDTH = 200


class OutputFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


Url = Annotated[
    str | None,
    typer.Option("--url", envvar=URL_ENV, show_envvar=True, help="The API, e.g. http://127.0.0.1:8000."),
]
Key = Annotated[
    str | None,
    typer.Option("--key", envvar=KEY_ENV, show_envvar=True, show_default=False, help="The API key."),
]


def when(value: str | None) -> datetime | None:
    """A time as people give it: ISO 8601 (UTC unless it says otherwise) or a span back from now (`90m`, `24h`,
    `7d`)."""
    if value is None:
        return None
    text = value.strip()
    unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}.get(text[-1:].lower())
    if unit and text[:-1].isdigit():
        return datetime.now(UTC) - timedelta(**{unit: int(text[:-1])})
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{value!r} is neither ISO 8601 nor a span like 24h or 7d") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


TIME_HELP = "ISO 8601 (UTC unless it says otherwise) or a span back from now: 90m, 24h, 7d."
WorkflowOption = Annotated[str | None, typer.Option(help="Only this workflow's jobs (e.g. document-analysis).")]
SlaClassOption = Annotated[str | None, typer.Option(help="Only jobs of this SLA class (interactive, standard, batch).")]
SinceOption = Annotated[
    datetime | None,
    typer.Option("--created-since", parser=when, metavar="TIME", help=f"Created then or later: {TIME_HELP}"),
]
UntilOption = Annotated[
    datetime | None,
    typer.Option("--created-until", parser=when, metavar="TIME", help=f"Created then or before: {TIME_HELP}"),
]
SearchOption = Annotated[
    str | None,
    typer.Option("--search", "-q", help="A prefix of the job id, or words of its question (every word must be there)."),
]
Output = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="`json`: one JSON document on stdout, nothing else (for scripts)."),
]


class CommandError(Exception):
    """A command cannot go on for a reason of its own (a file that is not JSON, …): its message is shown, exit 2."""


@dataclass
class Out:
    """Where a command writes: its result on stdout (text through Rich, or one JSON document), notes and errors on
    stderr."""

    format: OutputFormat = OutputFormat.TEXT
    console: Console = field(default_factory=lambda: Console(highlight=False, width=_piped_width()))
    notes: Console = field(default_factory=lambda: Console(stderr=True, highlight=False, soft_wrap=True))

    @property
    def json(self) -> bool:
        return self.format == OutputFormat.JSON

    def document(self, value: Any) -> None:
        """The command's one JSON document (models as the API sends them)."""
        sys.stdout.write(json.dumps(_plain(value), indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def line(self, text: str) -> None:
        """A plain line on stdout (a job id, a key: what `$(…)` captures)."""
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def note(self, text: str) -> None:
        """A remark for people, on stderr (never mixed into what scripts read)."""
        self.notes.print(text)

    def error(self, message: str) -> None:
        self.notes.print(f"[bold red]error:[/] {escape(message)}")

    def problem(self, problem: Problem) -> None:
        if self.json:
            self.document(problem.document())
        self.error(str(problem))
        for entry in problem.errors or []:
            where = ".".join(str(part) for part in entry.get("loc", [])) or "request"
            self.notes.print(f"  {escape(where)}: {escape(str(entry.get('msg', '')))}")


def _piped_width() -> int | None:
    """Piped output is not cut at 80 columns (Rich's default without a terminal): tables keep one row a line."""
    if sys.stdout.isatty():
        return None
    return int(os.environ.get(COLUMNS_ENV, "0") or 0) or PIPED_WIDTH


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@contextmanager
def handled(out: Out) -> Iterator[None]:
    """End the command with exit code 2 and a message (never a traceback) on an API or usage error."""
    try:
        yield
    except Problem as problem:
        out.problem(problem)
        raise typer.Exit(EXIT_ERROR) from None
    except (LonghaulError, CommandError) as error:
        if out.json:
            out.document({"title": type(error).__name__, "detail": str(error)})
        out.error(str(error))
        raise typer.Exit(EXIT_ERROR) from None


@contextmanager
def session(url: str | None, key: str | None, output: OutputFormat) -> Iterator[tuple[LonghaulClient, Out]]:
    """A client of the API named by `--url`/`LONGHAUL_URL` with `--key`/`LONGHAUL_API_KEY`, and the command's output."""
    out = Out(output)
    with handled(out):
        if not url:
            raise CommandError(f"no API URL: set {URL_ENV} or pass --url (`make run` prints it)")
        if not key:
            raise CommandError(f"no API key: set {KEY_ENV} or pass --key (`make run` prints the local ones)")
        try:
            client = LonghaulClient(url, key)
        except httpx.InvalidURL as invalid:
            raise CommandError(f"--url {url!r} is not a URL: {invalid}") from None
        with client:
            yield client, out


def read_json(path: Path, what: str) -> Any:
    """A JSON file (`-` for stdin) the user gave: a clear error when it is missing or not JSON."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
    except OSError as error:
        raise CommandError(f"{what} {path}: {error.strerror or error}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise CommandError(f"{what} {path} is not JSON: {error}") from None


def counted(n: int, unit: str) -> str:
    return f"{n:,} {unit}" if n == 1 else f"{n:,} {unit}s"


def joined(values: Sequence[object]) -> str:
    return ", ".join(str(v) for v in values) if values else "none"
