"""Docs that run: the shell (and Python) blocks of a Markdown document, executed in order against the local
platform, with the outputs they show compared by shape.

A document a user follows is a script. This module reads its fenced blocks with markdown-it-py (the parser of
CommonMark, which GitHub renders), and:

- runs every `bash`/`sh`/`shell` block in one interactive bash session, in document order, so variables and
  functions defined by one block are there for the next (`set -u`: a variable no block defined fails its command;
  `set -a`: every variable is exported, so a `python` block sees them too). A `python` block runs as a script of
  the project's interpreter (`.venv/bin/python`) in that session. Each block is split into its commands by bash
  itself (`bash -n`: a command is complete when bash would run it), and each command must exit 0;
- starts the platform as the document says: a command `[VAR=value …] make run` (re)starts `make run` with those
  variables, on ports of its own (never the documented 8000/8001: other suites and other people run at the same
  time). The document's loopback ports (`127.0.0.1:<port>`: 8000 the API, 8001 the in-memory AWS, others such as a
  webhook receiver's) are rewritten wherever they appear as numbers in a command or an expected output, and
  `/tmp/` becomes the run's own directory;
- checks what the document shows a command printing. A comment line right after the command,

      # → 202 {"job_id": "job_…", "status": "queued", "links": …, "estimated_sla_seconds": 40}

  is its expected output: an optional HTTP status (of the command's last `curl`), then a shape. The shape is JSON
  with `…`: `…` as a value is any value, as an object member it allows other keys (without it the keys must be
  exactly those shown), as the last array item it allows more items, inside a string it is any text (`"job_…"`);
  a member without a value (`{"seq", "type", …}`) must be present with any value; `~12` is a number within a
  quarter of 12. Anything else is text matched against the whole output, `…` matching any text. Longer shapes
  continue on the following comment lines until their brackets close. A `curl` that answers 4xx or 5xx must show
  that status in its expected output;
- skips a block marked, in the Markdown right before it, `<!-- not run: <reason> -->` (a deploy to AWS, anything
  needing an account or credentials), and a block that only includes a file (`--8<-- "examples/…"`: the manual's
  example files run on their own), and reports how many blocks it ran and skipped, and why.

A failure names the document's line: the command's, and the block's opening fence.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

SHELL_LANGUAGES = frozenset({"bash", "sh", "shell"})
PYTHON_LANGUAGES = frozenset({"python", "py"})
RUNNABLE = SHELL_LANGUAGES | PYTHON_LANGUAGES
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$", re.DOTALL)
EXPECTED = "# →"
SNIPPET = "--8<--"  # a block that includes a file (pymdownx.snippets) when the manual is built
API_PORT, MOTO_PORT = 8000, 8001  # what the documents say `make run` listens on
LOOPBACK_PORT = re.compile(r"(?:127\.0\.0\.1|localhost):(\d{2,5})\b")
MAKE_RUN = re.compile(r"(?:^|\s)make\s+run\s*(?:#.*)?$")
COMMAND_TIMEOUT = 300.0
# The variables a document's `VAR=value … make run` gives the platform (its settings, OpenTelemetry's).
PLATFORM_VARIABLES = ("LONGHAUL_", "OTEL_")
PLATFORM_TIMEOUT = 300.0


# ---------------------------------------------------------------------- reading the document


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # the opening fence's line (1-based)
    language: str
    text: str
    skip: str | None  # why it is not run, when it is marked so

    @property
    def runnable(self) -> bool:
        return self.language in RUNNABLE

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown document, in order, each with the reason it is not run (if marked)."""
    tokens = MarkdownIt("commonmark").parse(path.read_text())
    found: list[Block] = []
    for index, token in enumerate(tokens):
        if token.type != "fence" or token.map is None:
            continue
        before = tokens[index - 1] if index else None
        marked = NOT_RUN.match(before.content) if before is not None and before.type == "html_block" else None
        language = token.info.split()[0].lower() if token.info.strip() else ""
        reason = marked.group("reason") if marked else None
        if not marked and token.content.lstrip().startswith(SNIPPET):
            reason = "an included example file (docs/examples/, run by tests/docs/test_examples.py)"
        if marked and not reason:
            raise DocumentError(f"{path.name}:{token.map[0] + 1}: `<!-- not run: … -->` needs a reason")
        found.append(Block(path, token.map[0] + 1, language, token.content, reason))
    return found


class DocumentError(Exception):
    """The document itself cannot be run as written (an incomplete command, a malformed expected output)."""


@dataclass(frozen=True)
class Command:
    block: Block
    line: int  # the document's line of the command's first line
    text: str
    expected: Expected | None = None

    @property
    def where(self) -> str:
        return f"{self.block.path.name}:{self.line}"

    @property
    def shown(self) -> str:
        first = self.text.strip().splitlines()[0]
        return first if len(first) <= 100 else first[:97] + "..."


def commands(block: Block) -> list[Command]:
    """A block's commands, as bash splits them, each with the output the document shows for it."""
    lines = block.text.splitlines()
    if block.language in PYTHON_LANGUAGES:
        script = "\n".join(lines)
        expected_at = next((i for i, line in reversed(list(enumerate(lines))) if line.startswith(EXPECTED)), None)
        expected = _expectation(lines, expected_at, block)[0] if expected_at is not None else None
        return [Command(block, block.line + 1, script, expected)]
    found: list[Command] = []
    pending: list[str] = []
    start = 0
    index = 0
    while index < len(lines):
        line = lines[index]
        if not pending and line.lstrip().startswith(EXPECTED):
            if not found:
                raise DocumentError(
                    f"{block.path.name}:{block.line + 1 + index}: an expected output before any command"
                )
            expected, index = _expectation(lines, index, block)
            last = found[-1]
            found[-1] = Command(block, last.line, last.text, expected)
            continue
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            index += 1
            continue
        if not pending:
            start = index
        pending.append(line)
        if _complete("\n".join(pending)):
            found.append(Command(block, block.line + 1 + start, "\n".join(pending)))
            pending = []
        index += 1
    if pending:
        raise DocumentError(f"{block.path.name}:{block.line + 1 + start}: the command never ends (bash -n)")
    return found


def _complete(text: str) -> bool:
    """Whether bash would run `text` as it is (not waiting for a closing quote, a continuation, a here-document)."""
    if text.rstrip().endswith("\\"):
        return False
    checked = subprocess.run(["bash", "-n", "-c", text], capture_output=True, text=True, check=False)
    return checked.returncode == 0 and "here-document" not in checked.stderr


def _expectation(lines: list[str], index: int, block: Block) -> tuple[Expected, int]:
    """The expected output starting at `lines[index]` (continued while its brackets are open); the next index."""
    text = lines[index].lstrip()[len(EXPECTED) :].strip()
    index += 1
    while _depth(text) > 0 and index < len(lines) and lines[index].lstrip().startswith("#"):
        text += " " + lines[index].lstrip()[1:].strip()
        index += 1
    try:
        return Expected.parse(text), index
    except ValueError as error:
        raise DocumentError(f"{block.path.name}:{block.line + index}: expected output: {error}") from None


def _depth(text: str) -> int:
    """How many brackets `text` leaves open (outside its strings)."""
    depth, in_string, escaped = 0, False, False
    for character in text:
        if escaped:
            escaped = False
        elif in_string:
            escaped = character == "\\"
            in_string = character != '"'
        elif character == '"':
            in_string = True
        elif character in "{[":
            depth += 1
        elif character in "}]":
            depth -= 1
    return depth


# ---------------------------------------------------------------------- expected outputs


@dataclass(frozen=True)
class Expected:
    status: int | None
    shape: Any  # a parsed JSON shape, or None for text
    text: str | None
    source: str

    @classmethod
    def parse(cls, source: str) -> Expected:
        status = None
        rest = source
        found = re.match(r"^([1-5]\d\d)(?:\s+|$)", source)
        if found:
            status, rest = int(found.group(1)), source[found.end() :]
        if rest.startswith(("{", "[")):
            return cls(status, Shape(rest).parse(), None, source)
        return cls(status, None, rest, source)

    def mismatches(self, stdout: str, status: int | None) -> list[str]:
        problems: list[str] = []
        if self.status is not None and status != self.status:
            problems.append(f"HTTP status {status}, expected {self.status}")
        if self.shape is not None:
            try:
                actual = json.loads(stdout)
            except ValueError:
                return [*problems, f"the output is not JSON: {stdout[:300]!r}"]
            problems += match(self.shape, actual, "$")
        elif self.text and not glob(self.text).fullmatch(stdout.strip()):
            problems.append(f"the output {stdout.strip()[:300]!r} does not read {self.text!r}")
        return problems


ANY = object()  # `…`: any value


@dataclass(frozen=True)
class ObjectShape:
    members: tuple[tuple[str, Any], ...]  # (key, shape); a key without a value has the shape ANY
    open: bool  # `…` among its members: other keys allowed


@dataclass(frozen=True)
class ArrayShape:
    items: tuple[Any, ...]
    open: bool  # ends with `…`: more items allowed


@dataclass(frozen=True)
class TextShape:
    pattern: str  # a string with `…` in it


@dataclass(frozen=True)
class About:
    value: float  # `~n`: within a quarter of n


class Shape:
    """A recursive-descent parser of JSON with `…`, members without values, and `~n`."""

    TOKEN = re.compile(
        r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<about>~-?\d+(?:\.\d+)?)|(?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)'
        r"|(?P<word>true|false|null)|(?P<any>…)|(?P<punct>[{}\[\]:,]))"
    )

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        position = 0
        text = text.rstrip()
        while position < len(text):
            found = self.TOKEN.match(text, position)
            if found is None or found.end() == position:
                raise ValueError(f"cannot read {text[position : position + 20]!r}")
            kind = found.lastgroup or ""
            self.tokens.append((kind, found.group(kind)))
            position = found.end()
        self.position = 0

    def parse(self) -> Any:
        value = self._value()
        if self.position != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.position][1]!r} after the value")
        return value

    def _next(self) -> tuple[str, str]:
        if self.position >= len(self.tokens):
            raise ValueError("the shape ends too early")
        token = self.tokens[self.position]
        self.position += 1
        return token

    def _peek(self) -> str:
        return self.tokens[self.position][1] if self.position < len(self.tokens) else ""

    def _value(self) -> Any:
        kind, text = self._next()
        if kind == "string":
            value = json.loads(text)
            return TextShape(value) if "…" in value else value
        if kind == "number":
            return json.loads(text)
        if kind == "about":
            return About(float(text[1:]))
        if kind == "word":
            return json.loads(text)
        if kind == "any":
            return ANY
        if text == "{":
            return self._object()
        if text == "[":
            return self._array()
        raise ValueError(f"unexpected {text!r}")

    def _object(self) -> ObjectShape:
        members: list[tuple[str, Any]] = []
        is_open = False
        while self._peek() != "}":
            kind, text = self._next()
            if kind == "any":
                is_open = True
            elif kind == "string":
                key = json.loads(text)
                if self._peek() == ":":
                    self._next()
                    members.append((key, self._value()))
                else:
                    members.append((key, ANY))
            else:
                raise ValueError(f"a member must be a key, not {text!r}")
            if self._peek() == ",":
                self._next()
            elif self._peek() != "}":
                raise ValueError(f"expected , or }} in an object, not {self._peek()!r}")
        self._next()
        return ObjectShape(tuple(members), is_open)

    def _array(self) -> ArrayShape:
        items: list[Any] = []
        is_open = False
        while self._peek() != "]":
            item = self._value()
            if item is ANY and self._peek() == "]":
                is_open = True
            else:
                items.append(item)
            if self._peek() == ",":
                self._next()
            elif self._peek() != "]":
                raise ValueError(f"expected , or ] in an array, not {self._peek()!r}")
        self._next()
        return ArrayShape(tuple(items), is_open)


def glob(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("…")), re.DOTALL)


def match(shape: Any, actual: Any, path: str) -> list[str]:
    """Where `actual` does not have `shape`, each as `<JSON path>: <what differs>`."""
    if shape is ANY:
        return []
    if isinstance(shape, ObjectShape):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {_short(actual)}"]
        problems: list[str] = []
        keys = [key for key, _ in shape.members]
        missing = [key for key in keys if key not in actual]
        if missing:
            problems.append(f"{path}: missing {', '.join(missing)}")
        extra = [key for key in actual if key not in keys]
        if extra and not shape.open:
            problems.append(f"{path}: not shown in the document: {', '.join(extra)}")
        for key, member in shape.members:
            if key in actual:
                problems += match(member, actual[key], f"{path}.{key}")
        return problems
    if isinstance(shape, ArrayShape):
        if not isinstance(actual, list):
            return [f"{path}: expected a list, got {_short(actual)}"]
        if len(actual) < len(shape.items) or (len(actual) > len(shape.items) and not shape.open):
            more = " or more" if shape.open else ""
            return [f"{path}: {len(actual)} items, expected {len(shape.items)}{more}"]
        return [p for i, item in enumerate(shape.items) for p in match(item, actual[i], f"{path}[{i}]")]
    if isinstance(shape, TextShape):
        if not isinstance(actual, str) or not glob(shape.pattern).fullmatch(actual):
            return [f"{path}: {_short(actual)} does not read {shape.pattern!r}"]
        return []
    if isinstance(shape, About):
        if isinstance(actual, bool) or not isinstance(actual, (int, float)):
            return [f"{path}: expected a number near {shape.value:g}, got {_short(actual)}"]
        if abs(actual - shape.value) > abs(shape.value) / 4:
            return [f"{path}: {actual} is not within a quarter of {shape.value:g}"]
        return []
    if type(shape) is not type(actual) or shape != actual:
        return [f"{path}: {_short(actual)}, expected {json.dumps(shape)}"]
    return []


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


# ---------------------------------------------------------------------- the places a run takes over


@dataclass
class Rewrites:
    """The document's loopback ports and `/tmp/` as this run has them."""

    ports: dict[int, int]
    tmp: str

    @classmethod
    def for_documents(cls, texts: Sequence[str], api_port: int, moto_port: int, tmp: Path) -> Rewrites:
        ports = {API_PORT: api_port, MOTO_PORT: moto_port}
        for text in texts:
            for found in LOOPBACK_PORT.finditer(text):
                port = int(found.group(1))
                if port not in ports:
                    ports[port] = free_port()
        return cls(ports, f"{tmp}/")

    def apply(self, text: str) -> str:
        for port, ours in self.ports.items():
            text = re.sub(rf"(?<![\w.]){port}(?![\w])", str(ours), text)
        return text.replace("/tmp/", self.tmp)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ---------------------------------------------------------------------- the session


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: str
    stderr: str
    http_status: int | None
    make_run: dict[str, str] | None  # the environment of a `make run`, if the command was one


class Session:
    """One interactive bash (no rc files): variables and functions persist from command to command."""

    def __init__(self, cwd: Path, environment: Mapping[str, str], directory: Path) -> None:
        self.directory = directory
        self.count = 0
        self._process = subprocess.Popen(
            ["bash", "--norc", "--noprofile", "-i"],
            cwd=cwd,
            env={**environment, "PS1": "", "PS2": "", "TERM": "dumb", "DOCS_RUN_DIR": str(directory)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # the interactive shell's own chatter (job control notices, echoes)
            text=True,
            start_new_session=True,  # its group: background jobs the document starts are stopped with it
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._send(
            "set +H -u -a\n"
            # the last curl's response headers (its status), without changing what it prints
            'curl() { command curl -D "$DOCS_RUN_DIR/headers" "$@"; }\n'
            # `make run` is the runner's to start (in the background, on its ports): it records the environment
            'make() { if [ "${1-}" = run ]; then env -0 > "$DOCS_RUN_DIR/make-run.env"; else command make "$@"; fi; }\n'
        )

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)

    def _send(self, text: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(text)
        self._process.stdin.flush()

    def run(self, text: str, *, python: bool = False, timeout: float = COMMAND_TIMEOUT) -> Ran:
        self.count += 1
        base = self.directory / f"command-{self.count:03d}"
        script = base.with_suffix(".py" if python else ".sh")
        script.write_text(text + "\n")
        for leftover in ("headers", "make-run.env"):
            (self.directory / leftover).unlink(missing_ok=True)
        run = f".venv/bin/python {shlex.quote(str(script))}" if python else f"source {shlex.quote(str(script))}"
        marker = f"__docs_done_{self.count}__"
        self._send(f'{run} >{base}.out 2>{base}.err </dev/null; echo "{marker} $?"\n')
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"still running after {timeout:.0f} s") from None
                continue
            if line.startswith(marker):
                exit_code = int(line.split()[1])
                break
        return Ran(
            exit_code,
            Path(f"{base}.out").read_text(errors="replace"),
            Path(f"{base}.err").read_text(errors="replace"),
            _last_status(self.directory / "headers"),
            _environment(self.directory / "make-run.env"),
        )

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)


def _last_status(headers: Path) -> int | None:
    if not headers.exists():
        return None
    statuses = re.findall(r"^HTTP/\S+ (\d{3})", headers.read_text(errors="replace"), re.MULTILINE)
    return int(statuses[-1]) if statuses else None


def _environment(path: Path) -> dict[str, str] | None:
    if not path.exists():
        return None
    variables: dict[str, str] = {}
    for entry in path.read_text().split("\0"):  # `env -0`: values may span lines
        name, _, value = entry.partition("=")
        if name.startswith(PLATFORM_VARIABLES):
            variables[name] = value
    return variables


# ---------------------------------------------------------------------- the platform


class Platform:
    """`make run` in the background, on the run's own ports; restarted when the document runs it again."""

    def __init__(self, root: Path, api_port: int, moto_port: int, log: Path) -> None:
        self.root, self.api_port, self.moto_port, self.log = root, api_port, moto_port, log
        self.process: subprocess.Popen[str] | None = None
        self.starts = 0

    def start(self, variables: Mapping[str, str]) -> None:
        self.stop()
        environment = {k: v for k, v in os.environ.items() if not k.startswith((*PLATFORM_VARIABLES, "AWS_"))}
        environment.pop("MOTO_PORT", None)
        environment.update(variables)
        environment.update(
            LONGHAUL_PORT=str(self.api_port), LONGHAUL_MOTO_PORT=str(self.moto_port), PYTHONUNBUFFERED="1"
        )
        self.starts += 1
        # `make run`, without remaking the virtualenv (`make test` made it; the runner must not install anything)
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", "-o", ".venv/bin/.installed", "run"],
            cwd=self.root,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(self.process, lines), daemon=True).start()
        seen: list[str] = []
        deadline = time.monotonic() + PLATFORM_TIMEOUT
        while time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                if self.process.poll() is not None:
                    raise PlatformFailed("`make run` exited:\n" + "".join(seen[-40:])) from None
                continue
            if "Ctrl-C stops" in seen[-1]:
                return
        raise PlatformFailed("`make run` printed no banner in time:\n" + "".join(seen[-40:]))

    def _read(self, process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
        assert process.stdout is not None
        with self.log.open("a") as log:
            for line in process.stdout:
                log.write(line)
                log.flush()
                lines.put(line)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)  # Ctrl-C, as the banner says
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.process = None


class PlatformFailed(Exception):
    pass


# ---------------------------------------------------------------------- a document's run


@dataclass
class Report:
    path: Path
    ran: list[Block] = field(default_factory=list)
    skipped: list[Block] = field(default_factory=list)
    commands: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # where → how long the command took

    def summary(self) -> str:
        reasons = "".join(f"\n  skipped {b.where}: {b.skip}" for b in self.skipped)
        slowest = sorted(self.seconds.items(), key=lambda item: -item[1])[:5]
        slow = ", ".join(f"{where} {seconds:.0f} s" for where, seconds in slowest)
        took = sum(self.seconds.values())
        return (
            f"{self.path.name}: ran {len(self.ran)} blocks ({self.commands} commands) in {took:.0f} s, "
            f"skipped {len(self.skipped)}{reasons}\n  slowest: {slow}"
        )


def run_document(path: Path, root: Path) -> Report:
    """Run `path`'s blocks in order (see the module docstring); a failed command ends the run, a different output
    is reported and the run goes on."""
    report = Report(path)
    found = blocks(path)
    planned = [(block, commands(block)) for block in found if block.runnable and block.skip is None]
    report.skipped = [block for block in found if block.runnable and block.skip is not None]
    with _workspace() as directory:
        rewrites = Rewrites.for_documents([path.read_text()], free_port(), free_port(), directory / "tmp")
        (directory / "tmp").mkdir()
        platform = Platform(root, rewrites.ports[API_PORT], rewrites.ports[MOTO_PORT], directory / "platform.log")
        environment = {k: v for k, v in os.environ.items() if not k.startswith((*PLATFORM_VARIABLES, "AWS_", "PYTEST"))}
        environment.pop("MOTO_PORT", None)
        session = Session(root, environment, directory)
        try:
            for block, steps in planned:
                report.ran.append(block)
                for command in steps:
                    report.commands += 1
                    if not _run_command(command, session, platform, rewrites, report):
                        return report
        finally:
            session.close()
            platform.stop()
            if report.failures:
                log = (directory / "platform.log").read_text(errors="replace") if platform.starts else ""
                report.failures.append("the platform's last lines:\n" + "".join(log.splitlines(True)[-30:]))
    return report


def _run_command(command: Command, session: Session, platform: Platform, rewrites: Rewrites, report: Report) -> bool:
    """Run one command and check it; False when the run cannot go on."""
    at = f"{command.where} (block at {command.block.where}): `{command.shown}`"
    python = command.block.language in PYTHON_LANGUAGES
    started = time.monotonic()
    try:
        ran = session.run(rewrites.apply(command.text), python=python)
    except TimeoutError as error:
        report.failures.append(f"{at}: {error}")
        return False
    finally:
        report.seconds[command.where] = time.monotonic() - started
    if ran.exit_code != 0:
        report.failures.append(f"{at}: exited {ran.exit_code}\n{ran.stderr.strip()[-2000:]}\n{ran.stdout[-1000:]}")
        return False
    if ran.make_run is not None:
        try:
            platform.start(ran.make_run)
        except PlatformFailed as error:
            report.failures.append(f"{at}: {error}")
            return False
        finally:
            report.seconds[command.where] = time.monotonic() - started
        return True
    if command.expected is not None:
        expected = Expected.parse(rewrites.apply(command.expected.source))
        problems = expected.mismatches(ran.stdout, ran.http_status)
        if problems:
            shown = "\n  ".join(problems)
            report.failures.append(f"{at}: prints something else than the document shows:\n  {shown}")
    elif ran.http_status is not None and ran.http_status >= 400:
        report.failures.append(
            f"{at}: answered {ran.http_status}, which the document does not show: {ran.stdout[:500]}"
        )
    return True


@contextlib.contextmanager
def _workspace() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="longhaul-docs-") as directory:
        yield Path(directory)
