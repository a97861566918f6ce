"""What the repair commands (`longhaul ops fix-input`, `longhaul ops escalate`) compute and print: a merge patch from
`--set path=value` assignments on the job's current input, and the outcome of a fix for people."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.text import Text

from longhaul.core.contracts import Escalation, InputFixOutcome
from longhaul_client.cli.common import CommandError

MISSING = object()


def patch_from_sets(current: dict[str, Any], assignments: Sequence[str]) -> dict[str, Any]:
    """The JSON merge patch that makes `current` what the assignments say. Each is `path=value`: the path's parts are
    separated by dots (`documents.1.upload_id`; a number indexes a list), the value is JSON when it reads as JSON
    (`null` removes a member), else the text itself. A merge patch replaces a list whole, so a member under a list
    sends that list (the top-level member it is in) with the change made."""
    changed = copy.deepcopy(current)
    for assignment in assignments:
        path, sep, raw = assignment.partition("=")
        if not sep or not path.strip():
            raise CommandError(f"--set {assignment!r}: write it as path=value (e.g. documents.1.upload_id=up_…)")
        _assign(changed, path.strip().split("."), _value(raw), assignment)
    patch: dict[str, Any] = {}
    for name in [*current, *(n for n in changed if n not in current)]:
        before, after = current.get(name, MISSING), changed.get(name, MISSING)
        if before != after:
            patch[name] = None if after is MISSING else _merge_form(before, after)
    if not patch:
        raise CommandError("the assignments change nothing in the job's input")
    return patch


def _merge_form(before: Any, after: Any) -> Any:
    """`after` as a merge patch on `before`: an object by its changed members only (a removed one as null)."""
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return after
    found: dict[str, Any] = {}
    for name in [*before, *(n for n in after if n not in before)]:
        old, new = before.get(name, MISSING), after.get(name, MISSING)
        if old != new:
            found[name] = None if new is MISSING else _merge_form(old, new)
    return found


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _assign(node: Any, parts: list[str], value: Any, assignment: str) -> None:
    *walk, last = parts
    for part in walk:
        node = _child(node, part, assignment)
    if isinstance(node, list):
        index = _index(node, last, assignment)
        if value is None:
            del node[index]
        else:
            node[index] = value
    elif isinstance(node, dict):
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    else:
        raise CommandError(f"--set {assignment!r}: {'.'.join(walk)} is not an object or a list")


def _child(node: Any, part: str, assignment: str) -> Any:
    if isinstance(node, list):
        return node[_index(node, part, assignment)]
    if isinstance(node, dict):
        return node.setdefault(part, {})
    raise CommandError(f"--set {assignment!r}: {part!r} is inside a value that is not an object or a list")


def _index(node: list[Any], part: str, assignment: str) -> int:
    if not part.isdigit() or int(part) > len(node):  # (one past the end appends)
        raise CommandError(f"--set {assignment!r}: {part!r} is not an index of a list of {len(node)}")
    index = int(part)
    if index == len(node):
        node.append(None)
    return index


def fix_outcome(outcome: InputFixOutcome) -> Group:
    lines = [Text(f"input version {outcome.input_version} of {outcome.job_id} ({outcome.status.value})", style="bold")]
    for change in outcome.diff:
        lines.append(Text(f"  {change.path}: {json.dumps(change.before)} → {json.dumps(change.after)}"))
    if outcome.invalidated_steps:
        lines.append(Text(f"invalidated checkpoints: {', '.join(outcome.invalidated_steps)}"))
        lines.append(Text(f"replay it (from {outcome.replay_from}): longhaul ops replay {outcome.job_id} --reason …"))
    return Group(*lines)


def escalation_text(job_id: str, escalation: Escalation) -> Text:
    link = f" ({escalation.link})" if escalation.link else ""
    return Text(f"{job_id} escalated by {escalation.by} at {escalation.at.isoformat()}: {escalation.note}{link}")
