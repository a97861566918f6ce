"""The manual's reference, read from the code: the HTTP API (`docs/openapi.json`), the problem types, the command
line, the settings, the events, the fault and error kinds, and the job status machine.

Each `*_markdown` function returns a page; the scanners (`setting_reads`, `event_sites`, `problem_types`) read the
source statically (`ast`) so that the tests can compare what the code does with what the reference says. The MkDocs
hook (`manual.py`) renders the pages at build time: nothing here is copied by hand.
"""

from __future__ import annotations

import ast
import functools
import io
import json
import re
import sys
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for _path in (ROOT / "client" / "src", ROOT / "lambdas", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
# Imported now, while the path above holds (MkDocs restores `sys.path` after loading a hook): their submodules are
# then found in this tree's packages whatever the path is later.
import longhaul  # noqa: E402, F401
import longhaul_client  # noqa: E402, F401

# Where settings are read: the functions (and their workers), the local runtime, the command line, the CDK app.
SETTING_SOURCES = ("lambdas", "local", "client/src", "stacks", "app.py")
SCOPES = (
    ("lambdas/workers/", "OCR worker"),
    ("lambdas/", "functions"),
    ("local/", "local platform"),
    ("client/src/", "command line"),
    ("stacks/", "CDK app"),
    ("app.py", "CDK app"),
)
ENV_NAME = re.compile(r"^_?[A-Z][A-Z0-9_]*$")


def python_files(*relative: str) -> Iterator[Path]:
    for name in relative:
        path = ROOT / name
        if path.is_file():
            yield path
        else:
            yield from sorted(p for p in path.rglob("*.py") if "node_modules" not in p.parts)


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


@functools.cache
def _all_constants() -> dict[str, Any]:
    """Every module-level `NAME = <constant>` of the settings' sources (the last one of a name wins)."""
    found: dict[str, Any] = {}
    for path in python_files(*SETTING_SOURCES):
        for stmt in _tree(path).body:
            if (
                isinstance(stmt, ast.Assign)
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant)
            ):
                found[stmt.targets[0].id] = stmt.value.value
    return found


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _doc_comments(source: str) -> dict[int, str]:
    """Documentation comments by the line they document: `#:` lines right above it (Sphinx's convention), or a
    trailing `# …` on the line itself."""
    comments: dict[int, str] = {}
    lines = source.splitlines()
    pending: list[str] = []
    pending_end = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line, column = token.start
        text = token.string
        if text.startswith("#:"):
            if pending and pending_end != line - 1:
                pending = []
            pending.append(text[2:].strip())
            pending_end = line
            comments[line + 1] = " ".join(pending)
        elif column > 0 and lines[line - 1][:column].strip():
            comments.setdefault(line, text[1:].strip())
    return comments


# ---------------------------------------------------------------------- settings: environment variables


@dataclass
class Setting:
    name: str
    meaning: str = ""
    type: str = ""
    default: str = ""
    defined_in: str = ""
    read_in: set[str] = field(default_factory=set)

    @property
    def scopes(self) -> list[str]:
        found: list[str] = []
        for path in sorted(self.read_in or {self.defined_in}):
            scope = next(label for prefix, label in SCOPES if path.startswith(prefix))
            if scope not in found:
                found.append(scope)
        return found


def _module_constants(tree: ast.Module) -> dict[str, tuple[str, int]]:
    """Module-level `NAME = "TEXT"` (and `A, B = "X", "Y"`): {NAME: (TEXT, line)}."""
    found: dict[str, tuple[str, int]] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs: list[tuple[ast.expr, ast.expr]] = []
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            pairs = list(zip(target.elts, value.elts, strict=False))
        else:
            pairs = [(target, value)]
        for name, constant in pairs:
            if isinstance(name, ast.Name) and isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                found[name.id] = (constant.value, node.lineno)
    return found


def _env_class(tree: ast.Module) -> dict[str, tuple[str, int]]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Env":
            return {
                stmt.targets[0].id: (stmt.value.value, stmt.lineno)
                for stmt in node.body
                if isinstance(stmt, ast.Assign)
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            }
    return {}


def documented_settings() -> dict[str, Setting]:
    """Every environment variable the code documents: the `Env` names (with their `Settings` field's type and
    default), and each module constant named `…_ENV` with a `#:` comment."""
    from longhaul.core.settings import Settings

    fields = {info.alias: info for info in Settings.model_fields.values() if info.alias}
    settings: dict[str, Setting] = {}
    for path in python_files(*SETTING_SOURCES):
        tree = _tree(path)
        candidates = dict(_env_class(tree))
        candidates.update({k: v for k, v in _module_constants(tree).items() if k.endswith("_ENV")})
        if not candidates:
            continue
        comments = _doc_comments(path.read_text())
        for name, line in candidates.values():
            meaning = comments.get(line, "")
            if not meaning or not ENV_NAME.match(name):
                continue
            setting = settings.setdefault(name, Setting(name))
            setting.meaning = setting.meaning or meaning
            setting.defined_in = setting.defined_in or _rel(path)
            info = fields.get(name)
            if info is not None:
                setting.type = _type_name(info.annotation)
                setting.default = _default(info)
    return settings


def _type_name(annotation: Any) -> str:
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return _type_name(inner[0]) + " (optional)" if len(inner) == 1 else "text (optional)"
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is dict:
        return "JSON object"
    if origin in (frozenset, set, list, tuple):
        return "comma-separated list"
    name = getattr(annotation, "__name__", repr(annotation))
    return {"str": "text", "int": "integer", "float": "number", "bool": "boolean"}.get(name, name)


def _default(info: Any) -> str:
    if info.is_required():
        return "(required)"
    if info.default_factory is not None:
        return json.dumps(_plain(info.default_factory()))
    return "" if info.default is None else json.dumps(_plain(info.default))


def _plain(value: Any) -> Any:
    return sorted(value) if isinstance(value, frozenset | set) else value


@dataclass(frozen=True)
class Read:
    name: str
    path: str
    line: int
    default: str  # the read's fallback, as written
    type: str


def setting_reads() -> list[Read]:
    """Every environment variable the code reads by name: `os.environ[…]`/`.get(…)`, `environ().get(…)`,
    `env.get(…)`, `os.getenv(…)`, `envvar=…`, and every `Env.NAME` (the functions' settings). A name held by a
    module constant (`KEYS_ENV`) is resolved; a name computed at run time (a model route's `api_key_env`) is not."""
    constants: dict[str, str] = {}
    trees: list[tuple[Path, ast.Module]] = []
    env_members: dict[str, str] = {}
    for path in python_files(*SETTING_SOURCES):
        tree = _tree(path)
        trees.append((path, tree))
        constants.update({k: v for k, (v, _) in _module_constants(tree).items() if ENV_NAME.match(v)})
        env_members.update({k: v for k, (v, _) in _env_class(tree).items()})
    reads: list[Read] = []
    for path, tree in trees:
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

        def name_of(node: ast.expr) -> str | None:
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ENV_NAME.match(node.value):
                return node.value
            if isinstance(node, ast.Name):
                return constants.get(node.id)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Env":
                return env_members.get(node.attr)
            return None

        for node in ast.walk(tree):
            name: str | None = None
            default = ""
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Env":
                name = env_members.get(node.attr)
            elif isinstance(node, ast.Call) and _is_env_get(node.func) and node.args:
                name = name_of(node.args[0])
                if len(node.args) > 1:
                    default = _fallback(node.args[1])
            elif isinstance(node, ast.Subscript) and _is_environment(node.value) and isinstance(node.ctx, ast.Load):
                name = name_of(node.slice)
            elif isinstance(node, ast.keyword) and node.arg == "envvar":
                name = name_of(node.value)
            if name:
                reads.append(Read(name, _rel(path), getattr(node, "lineno", 0), default, _cast(node, parents)))
    return reads


_ENVIRONMENTS = {"env", "environment"}  # (a bare `environ` is a WSGI request's)


def _is_environment(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):  # os.environ
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    if isinstance(node, ast.Name):
        return node.id in _ENVIRONMENTS
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "environ"


def _is_env_get(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute) and func.attr == "getenv":
        return True
    return isinstance(func, ast.Attribute) and func.attr == "get" and _is_environment(func.value)


def _fallback(node: ast.expr) -> str:
    if isinstance(node, ast.Constant):
        return json.dumps(node.value)
    if isinstance(node, ast.Name) and node.id in _all_constants():
        return json.dumps(_all_constants()[node.id])
    return ast.unparse(node)


def _cast(node: ast.AST, parents: Mapping[ast.AST, ast.AST]) -> str:
    """`integer` or `number` when the read is converted so (`int(os.environ.get(…))`), else `text`."""
    current: ast.AST | None = node
    for _ in range(3):
        current = parents.get(current) if current is not None else None
        if isinstance(current, ast.Call) and isinstance(current.func, ast.Name):
            return {"int": "integer", "float": "number"}.get(current.func.id, "text")
    return "text"


def settings_table() -> list[Setting]:
    """The documented settings, each with where it is read, its type and its default (from `Settings`, else from
    the read's conversion and fallback)."""
    settings = documented_settings()
    for read in setting_reads():
        setting = settings.get(read.name)
        if setting is None:
            continue
        setting.read_in.add(read.path)
        if not setting.type and read.type != "text":
            setting.type = read.type
        if not setting.default and read.default:
            setting.default = read.default
    for setting in settings.values():
        setting.type = setting.type or "text"
    return sorted(settings.values(), key=lambda s: (s.name.startswith("LONGHAUL_") is False, s.name))


# ---------------------------------------------------------------------- settings: CDK context keys


@dataclass
class ContextKey:
    name: str
    meaning: str = ""
    default: str = ""
    read_in: set[str] = field(default_factory=set)


CONTEXT_KEY = re.compile(r"^longhaul:[a-z_]+$")


def context_reads() -> dict[str, ContextKey]:
    """Every `longhaul:…` context key the CDK app reads (`try_get_context`, `get_context`, `_json_context`), with
    the fallback it is read with (`… or X`)."""
    keys: dict[str, ContextKey] = {}
    for path in python_files("app.py", "stacks"):
        tree = _tree(path)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee not in {"try_get_context", "get_context", "_json_context"}:
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and CONTEXT_KEY.match(arg.value):
                    key = keys.setdefault(arg.value, ContextKey(arg.value))
                    key.read_in.add(_rel(path))
                    parent = parents.get(node)
                    while isinstance(parent, ast.Call):  # str(…), _flag(…)
                        parent = parents.get(parent)
                    if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or) and len(parent.values) > 1:
                        key.default = key.default or _context_default(parent.values[1])
    return keys


def _context_default(node: ast.expr) -> str:
    """A fallback as written, a module constant by its value."""
    if isinstance(node, ast.Name) and node.id in _all_constants():
        return json.dumps(_all_constants()[node.id])
    if isinstance(node, ast.Constant):
        return json.dumps(node.value) if node.value != "" else ""
    return ast.unparse(node)


def documented_context_keys() -> dict[str, str]:
    """The context keys `app.py`'s docstring documents (its `Context` section): {key: meaning}."""
    doc = ast.get_docstring(ast.parse((ROOT / "app.py").read_text())) or ""
    documented: dict[str, str] = {}
    current = ""
    for line in doc.splitlines():
        found = re.match(r"^\s+(longhaul:[a-z_]+)\s+(.*)$", line)
        if found:
            current = found.group(1)
            documented[current] = found.group(2).strip()
        elif current and line.startswith("    ") and line.strip():
            documented[current] += " " + line.strip()
        else:
            current = ""
    return documented


def settings_markdown() -> str:
    lines = [
        "# Settings",
        "",
        "Generated from the code at build time: every environment variable it reads and every CDK context key,",
        "with its type, its default and its meaning (the `#:` comment next to the name's definition, the `Settings`",
        "model's field, the CDK app's docstring). `tests/docs/test_reference.py` fails when the code reads a",
        "setting that is not documented here.",
        "",
        "## Environment variables",
        "",
        "The functions' variables are set by the CDK app from `Env` (`lambdas/longhaul/core/settings.py`) and",
        "parsed once into `Settings`; the local platform sets the same ones, and takes a few from its own",
        "environment (`make run` with them set).",
        "",
        "| Variable | Used by | Type | Default | Meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for setting in settings_table():
        lines.append(
            f"| `{setting.name}` | {', '.join(setting.scopes)} | {_cell(setting.type)} | "
            f"{_code(_cell(setting.default))} | {_cell(setting.meaning)} |"
        )
    lines += [
        "",
        "## CDK context keys",
        "",
        "Given in `cdk.json` or as `-c longhaul:key=value` to `cdk synth`/`cdk deploy` (read in `app.py`).",
        "",
        "| Key | Default | Meaning |",
        "| --- | --- | --- |",
    ]
    documented = documented_context_keys()
    for name, key in sorted(context_reads().items()):
        lines.append(f"| `{name}` | {_code(_cell(key.default))} | {_cell(documented.get(name, ''))} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- events


# How events are written: the callee, the position of its event-type argument (self excluded) and its keyword.
EVENT_SINKS: dict[str, tuple[int | None, str]] = {
    "append_event": (1, "event"),
    "NewEvent": (0, "type"),
    "transition": (None, "event"),
    "_event_item": (2, "event"),
    "_undo": (None, "event"),
    "_transition_or_none": (3, "event"),
    "self._event": (0, "kind"),  # the model gateway's: its other keywords are the detail
}


@dataclass
class EventSite:
    type: str
    path: str
    line: int
    detail: tuple[str, ...]  # the detail's keys where the code spells them out ("…": and more)


@dataclass
class EventScan:
    sites: list[EventSite] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # "path:line: expression"


def event_sites() -> EventScan:
    """Every place in `lambdas/` that appends an event to a job's log, with its type and detail keys. An event type
    the scan cannot resolve to literal strings is reported (`unresolved`), so a new way of writing one is seen."""
    scan = EventScan()
    for path in python_files("lambdas"):
        tree = _tree(path)
        module_values = _module_values(tree)
        for function, call in _calls_in_functions(tree):
            callee = _callee(call)
            if callee not in EVENT_SINKS:
                continue
            position, keyword = EVENT_SINKS[callee]
            argument = next((k.value for k in call.keywords if k.arg == keyword), None)
            if argument is None and position is not None and len(call.args) > position:
                argument = call.args[position]
            if argument is None or (isinstance(argument, ast.Attribute) and argument.attr == "type"):
                continue  # `NewEvent.type` written on: the `NewEvent(…)` is the site
            names = _strings(argument, function, module_values)
            if names is None:
                parameters = {a.arg for a in (function.args.args + function.args.kwonlyargs)} if function else set()
                sinks = {name.rsplit(".", 1)[-1] for name in EVENT_SINKS}
                if function is not None and function.name in sinks and _name(argument) in parameters:
                    continue  # a sink passing its own parameter on: its callers are the sites
                scan.unresolved.append(f"{_rel(path)}:{call.lineno}: {ast.unparse(argument)}")
                continue
            detail = _detail_keys(call, callee, function)
            scan.sites += [EventSite(name, _rel(path), call.lineno, detail) for name in names]
    return scan


def _callee(call: ast.Call) -> str:
    """`name`, `obj.method` → `method`, except `self._event` (a method of one class, not any `_event`)."""
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "_event" and isinstance(func.value, ast.Name) and func.value.id == "self":
            return "self._event"
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _calls_in_functions(tree: ast.Module) -> Iterator[tuple[FunctionNode | None, ast.Call]]:
    def visit(node: ast.AST, function: FunctionNode | None) -> Iterator[tuple[FunctionNode | None, ast.Call]]:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Call):
                yield function, child
            yield from visit(child, inner)

    yield from visit(tree, None)


def _module_values(tree: ast.Module) -> dict[str, ast.expr]:
    return {
        stmt.targets[0].id: stmt.value
        for stmt in tree.body
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    }


def _literals(node: ast.expr) -> list[str]:
    """The strings an expression can yield: a constant, a dict's values, `{…}.get(…, default)`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Dict):
        return [v for value in node.values if value is not None for v in _literals(value)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return _literals(node.func.value) + [v for arg in node.args[1:] for v in _literals(arg)]
    if isinstance(node, ast.IfExp):
        return _literals(node.body) + _literals(node.orelse)
    return []


def _strings(node: ast.expr, function: FunctionNode | None, module_values: Mapping[str, ast.expr]) -> list[str] | None:
    literal = _literals(node)
    if literal:
        return literal
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in module_values:
        return _literals(module_values[node.value.id]) or None
    if isinstance(node, ast.Name):
        if function is not None:
            assigned = [
                stmt.value
                for stmt in ast.walk(function)
                if isinstance(stmt, ast.Assign) and any(_name(t) == node.id for t in stmt.targets)
            ]
            found = [v for value in assigned for v in _literals(value)]
            if found:
                return found
        if node.id in module_values:
            return _literals(module_values[node.id]) or None
    return None


def _detail_keys(call: ast.Call, callee: str, function: FunctionNode | None) -> tuple[str, ...]:
    if callee == "self._event":
        return tuple(k.arg if k.arg else "…" for k in call.keywords)
    detail = next((k.value for k in call.keywords if k.arg == "detail"), None)
    if isinstance(detail, ast.Name) and function is not None:
        assigned = [
            stmt.value
            for stmt in ast.walk(function)
            if isinstance(stmt, ast.Assign) and any(_name(t) == detail.id for t in stmt.targets)
        ]
        detail = assigned[0] if len(assigned) == 1 else None
    if isinstance(detail, ast.Dict):
        return tuple(
            key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "…" for key in detail.keys
        )
    if isinstance(detail, ast.Call) and _name(detail.func) == "dict":
        return tuple(k.arg if k.arg else "…" for k in detail.keywords)
    return () if detail is None else ("…",)


def events_markdown() -> str:
    from longhaul.core.event_types import EVENT_TYPES

    found: dict[str, list[EventSite]] = {}
    for site in event_sites().sites:
        found.setdefault(site.type, []).append(site)
    lines = [
        "# Events",
        "",
        "What a job's event log (`GET /v1/jobs/{job_id}/events`, `longhaul events`) can hold: every event type the",
        "code appends, with its meaning (`EVENT_TYPES` in `lambdas/longhaul/core/event_types.py`) and the keys of",
        "its `detail` where the code spells them out (`…`: more keys, which depend on the case). Generated at build",
        "time from the code; `tests/docs/test_reference.py` fails when an event type is written but not described.",
        "",
        "| Event | Meaning | `detail` keys | Written in |",
        "| --- | --- | --- | --- |",
    ]
    for name in sorted(set(EVENT_TYPES) | set(found)):
        sites = found.get(name, [])
        keys: list[str] = []
        for site in sites:
            keys += [k for k in site.detail if k not in keys]
        where = sorted({site.path.removeprefix("lambdas/") for site in sites})
        lines.append(
            f"| `{name}` | {_cell(EVENT_TYPES.get(name, ''))} | {', '.join(_code(k) for k in keys)} | "
            f"{'<br>'.join(_code(w) for w in where)} |"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- faults and errors


def faults_markdown() -> str:
    from longhaul.core import errors, faults

    lines = [
        "# Fault and error kinds",
        "",
        "## Fault kinds",
        "",
        "What `LONGHAUL_FAULTS` (`<step>[#<item>]=<kind>[x<times>],…`) may inject in the local platform",
        "(`KINDS` in `lambdas/longhaul/core/faults.py`). A failure class raises that error at the step; the others",
        "are the runtime's and the model's faults.",
        "",
        "| Kind | What it does |",
        "| --- | --- |",
    ]
    for kind in faults.KINDS:
        lines.append(f"| `{kind}` | {_cell(faults.meaning(kind))} |")
    lines += [
        "",
        "## Error kinds",
        "",
        "A step's failure is one of these classes (`lambdas/longhaul/core/errors.py`). The class name is the error",
        "name the state machine's Retry and Catch match; `kind` is what a failed job's `error.kind` and its dead",
        "letters say.",
        "",
        "| Error (ASL name) | Kind | Retried | Meaning |",
        "| --- | --- | --- | --- |",
    ]
    classes: list[type[errors.LonghaulError]] = [
        *errors.ERROR_CLASSES,
        errors.WebhookDeliveryFailed,
        errors.WebhookUndeliverable,
    ]
    for cls in classes:
        doc = " ".join((cls.__doc__ or "").split())
        retried = "yes" if cls.retryable else "no"
        lines.append(f"| `{cls.__name__}` | `{cls.kind}` | {retried} | {_cell(doc)} |")
    lines += [
        "",
        "A step that times out fails with kind `timeout` (`States.Timeout`); any other error name is `internal`.",
        f"A fan-out whose items failed ends with `{errors.ITEMS_FAILED}`; the state machines' Fail states end with",
        f"`{errors.STEP_FAILED}` (the failure was recorded) or `{errors.JOB_STOPPED}` (the job stopped).",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- problems


@dataclass(frozen=True)
class ProblemType:
    name: str
    path: str
    status: int
    slug: str
    title: str
    doc: str


def problem_types() -> list[ProblemType]:
    """Every `ApiProblem` subclass in `lambdas/` (statically: `status, slug, title = …` in its body)."""
    from longhaul.core.problems import TYPE_BASE  # noqa: F401  (the module must import)

    classes: dict[str, tuple[list[str], ast.ClassDef, str]] = {}
    for path in python_files("lambdas"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases]
                classes.setdefault(node.name, (bases, node, _rel(path)))

    def is_problem(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name == "ApiProblem":
            return True
        if name not in classes or name in seen:
            return False
        return any(is_problem(base, seen | {name}) for base in classes[name][0])

    found: list[ProblemType] = []
    for name, (_, node, where) in classes.items():
        if name == "ApiProblem" or not is_problem(name):
            continue
        values: dict[str, Any] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.Assign):
                targets = stmt.targets[0]
                names = [_name(t) for t in targets.elts] if isinstance(targets, ast.Tuple) else [_name(targets)]
                consts = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
                for key, const in zip(names, consts, strict=False):
                    if key and isinstance(const, ast.Constant):
                        values[key] = const.value
        found.append(
            ProblemType(
                name,
                where,
                int(values.get("status", 500)),
                str(values.get("slug", "internal")),
                str(values.get("title", "")),
                " ".join((ast.get_docstring(node) or "").split()),
            )
        )
    return sorted(found, key=lambda p: (p.status, p.slug))


def problems_markdown() -> str:
    from longhaul.core.problems import TYPE_BASE

    lines = [
        "# Problem types",
        "",
        "Every error the API answers is `application/problem+json` (RFC 9457): `type`, `title`, `status`, and",
        "`detail`, `instance`, `errors` when there is something to say. The types, generated from the `ApiProblem`",
        "classes in the code:",
        "",
        "| `type` | Status | Title | Class |",
        "| --- | --- | --- | --- |",
    ]
    seen: set[str] = set()
    for problem in problem_types():
        note = f" {problem.doc}" if problem.doc else ""
        lines.append(
            f"| `{TYPE_BASE}{problem.slug}` | {problem.status} | {_cell(problem.title + '.' + note)} | "
            f"`{problem.name}` (`{problem.path.removeprefix('lambdas/')}`) |"
        )
        seen.add(problem.slug)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the HTTP API


METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def _schema_name(schema: Mapping[str, Any] | None) -> str:
    if not schema:
        return ""
    if "$ref" in schema:
        return f"`{str(schema['$ref']).rsplit('/', 1)[-1]}`"
    for combinator, joiner in (("oneOf", " or "), ("anyOf", " or "), ("allOf", " and ")):
        if combinator in schema:
            parts = [_schema_name(s) for s in schema[combinator]]
            return joiner.join(p for p in parts if p) or ""
    if schema.get("type") == "array":
        inner = _schema_name(schema.get("items"))
        return f"array of {inner}" if inner else "array"
    return str(schema.get("type", "object")) if schema.get("type") != "null" else ""


def _group(path: str, operation: Mapping[str, Any]) -> str:
    """An operation's tag; without tags, its path's first part after the version (`jobs`, `ops`, `reviews`…)."""
    tags = operation.get("tags") or []
    if tags:
        return str(tags[0])
    parts = [p for p in path.split("/") if p and not re.fullmatch(r"v\d+", p)]
    return parts[0] if parts else "root"


def api_markdown(spec: Mapping[str, Any]) -> str:
    groups: dict[str, list[tuple[str, str, Mapping[str, Any]]]] = {str(t["name"]): [] for t in spec.get("tags", [])}
    descriptions = {str(t["name"]): str(t.get("description", "")) for t in spec.get("tags", [])}
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                groups.setdefault(_group(path, operation), []).append((method.upper(), path, operation))
    info = spec["info"]
    lines = [
        f"# HTTP API ({info['title']} {info['version']})",
        "",
        "Generated at build time from `docs/openapi.json` (the API's own document, also served at",
        "`GET /v1/openapi.json`; `make openapi` regenerates it from the models), [downloadable here](../openapi.json).",
        "Errors are problem documents: see [Problem types](problems.md).",
        "",
        *info.get("description", "").splitlines(),
        "",
    ]
    for group, operations in groups.items():
        if not operations:
            continue
        lines += [f"## {group}", ""]
        if descriptions.get(group):
            lines += [descriptions[group], ""]
        for method, path, operation in operations:
            lines += [f"### `{method} {path}`", ""]
            if operation.get("summary"):
                lines += [operation["summary"], ""]
            if operation.get("description"):
                lines += [operation["description"], ""]
            lines += [f"Operation: `{operation.get('operationId', '')}`", ""]
            parameters = operation.get("parameters", [])
            if parameters:
                lines += ["| Parameter | In | Required | Type | Description |", "| --- | --- | --- | --- | --- |"]
                for parameter in parameters:
                    schema = parameter.get("schema", {})
                    kind = _schema_name(schema) or str(schema.get("type", ""))
                    lines.append(
                        f"| `{parameter['name']}` | {parameter['in']} | {'yes' if parameter.get('required') else 'no'}"
                        f" | {_cell(kind)} | {_cell(str(parameter.get('description', '')))} |"
                    )
                lines.append("")
            body = operation.get("requestBody")
            if body:
                for media, content in body.get("content", {}).items():
                    lines += [f"Request body (`{media}`): {_schema_name(content.get('schema')) or 'any'}", ""]
            lines += ["| Status | Description | Body |", "| --- | --- | --- |"]
            for status, response in sorted(operation.get("responses", {}).items()):
                bodies = [
                    f"{_schema_name(content.get('schema')) or 'any'} (`{media}`)"
                    for media, content in response.get("content", {}).items()
                ]
                lines.append(f"| {status} | {_cell(str(response.get('description', '')))} | {'; '.join(bodies)} |")
            lines.append("")
    schemas = spec.get("components", {}).get("schemas", {})
    if schemas:
        lines += ["## Schemas", "", "| Schema | Fields |", "| --- | --- |"]
        for name, schema in sorted(schemas.items()):
            fields = ", ".join(f"`{f}`" for f in schema.get("properties", {}))
            lines.append(f"| `{name}` | {fields} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the command line


def cli_markdown() -> str:
    import typer

    from longhaul_client.cli import app

    root = typer.main.get_command(app)  # a Click command tree (Typer's own copy of Click: duck-typed here)
    lines = [
        "# Command line",
        "",
        "`longhaul`, generated at build time from the command line itself (`client/src/longhaul_client/cli`).",
        "",
    ]

    def visit(command: Any, path: list[str]) -> None:
        name = " ".join(path)
        level = "#" * min(len(path) + 1, 4)
        lines.extend([f"{level} `{name}`", ""])
        context = command.context_class(command, info_name=name)
        help_text = (command.help or "").split("\f")[0].strip()
        if help_text:
            lines.extend([help_text, ""])
        usage = " ".join(command.collect_usage_pieces(context))
        lines.extend(["```text", f"{name} {usage}".rstrip(), "```", ""])
        rows = []
        for parameter in command.params:
            if parameter.param_type_name == "argument":
                text = getattr(parameter, "help", "") or ""
                rows.append((parameter.human_readable_name, text, parameter.required, "", ""))
            elif parameter.param_type_name == "option" and not parameter.hidden:
                default = parameter.default
                shown = "" if default in (None, False, ()) or parameter.is_flag or callable(default) else str(default)
                envvar = parameter.envvar if isinstance(parameter.envvar, str) else ""
                rows.append((", ".join(parameter.opts), parameter.help or "", parameter.required, shown, envvar))
        if rows:
            lines.extend(["| Parameter | Meaning | Required | Default | Variable |", "| --- | --- | --- | --- | --- |"])
            for opts, text, required, default, envvar in rows:
                lines.append(
                    f"| `{opts}` | {_cell(text)} | {'yes' if required else 'no'} | {_code(_cell(default))} "
                    f"| {_code(envvar)} |"
                )
            lines.append("")
        if hasattr(command, "list_commands"):
            for sub in command.list_commands(context):
                child = command.get_command(context, sub)
                if child is not None and not child.hidden:
                    visit(child, [*path, sub])

    visit(root, ["longhaul"])
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the job status machine


def job_status_diagram() -> str:
    """The job status machine as Mermaid, from `TRANSITIONS` and `BY_PERSON` (`lambdas/longhaul/storage/jobs.py`)."""
    from longhaul.core.contracts import TERMINAL_STATUSES
    from longhaul.storage.jobs import BY_PERSON, TRANSITIONS

    lines = ["```mermaid", "stateDiagram-v2", "    direction LR", "    [*] --> queued"]
    for source, targets in TRANSITIONS.items():
        for target in sorted(targets, key=lambda s: list(TRANSITIONS).index(s)):
            label = " : replay" if target.value == "queued" else ""
            lines.append(f"    {source.value} --> {target.value}{label}")
    for source, targets in BY_PERSON.items():  # a manual completion: the result written by a person
        lines += [f"    {source.value} --> {target.value} : completed by a person" for target in sorted(targets)]
    for status in TRANSITIONS:
        if status in TERMINAL_STATUSES and not TRANSITIONS[status]:
            lines.append(f"    {status.value} --> [*]")
    lines.append("```")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the reference's pages


def reference_index() -> str:
    return "\n".join(
        [
            "# Reference",
            "",
            "Generated from the code each time the manual is built, so a new route, setting, event, fault kind or",
            "command appears here without an edit (see [Contributing](../contributing.md)).",
            "",
            "- [HTTP API](api.md): every operation of `docs/openapi.json`, by group.",
            "- [Problem types](problems.md): the `type` of every error the API answers.",
            "- [Command line](cli.md): every `longhaul` command and option.",
            "- [Settings](settings.md): environment variables and CDK context keys.",
            "- [Events](events.md): what a job's event log can hold.",
            "- [Fault and error kinds](faults.md): what can be injected, and how steps fail.",
            "",
        ]
    )


def pages() -> dict[str, str]:
    """The generated pages, by their path under `docs/`."""
    spec = json.loads((ROOT / "docs" / "openapi.json").read_text())
    return {
        "reference/index.md": reference_index(),
        "reference/api.md": api_markdown(spec),
        "reference/problems.md": problems_markdown(),
        "reference/cli.md": cli_markdown(),
        "reference/settings.md": settings_markdown(),
        "reference/events.md": events_markdown(),
        "reference/faults.md": faults_markdown(),
    }
