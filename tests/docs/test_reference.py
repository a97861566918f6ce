"""The manual's generated reference against the code it is generated from: every setting the code reads, every
event type it writes, every fault kind and every status transition is in it, with a meaning (docs/hooks)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from docs.hooks import manual_reference as reference
from longhaul.core import errors, faults
from longhaul.core.event_types import EVENT_TYPES
from longhaul.storage.jobs import BY_PERSON, TRANSITIONS

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages() -> set[str]:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # (no `!!python/name` objects)
    found: set[str] = set()

    def walk(entry: object) -> None:
        if isinstance(entry, str):
            found.add(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)
        elif isinstance(entry, list):
            for item in entry:
                walk(item)

    walk(config["nav"])
    return found


def test_every_setting_read_is_documented() -> None:
    documented = reference.documented_settings()
    undocumented = sorted(
        {f"{read.name} ({read.path}:{read.line})" for read in reference.setting_reads() if read.name not in documented}
    )
    assert not undocumented, (
        "read but not documented (add a `#:` comment above its name: in `Env`, or a module constant `…_ENV`): "
        + ", ".join(undocumented)
    )


def test_the_scan_finds_the_settings_it_must() -> None:
    """The scan itself: the functions' settings, the local platform's and the command line's are all seen read."""
    read = {r.name for r in reference.setting_reads()}
    assert {"LONGHAUL_TABLE", "LONGHAUL_PORT", "LONGHAUL_FAULTS", "LONGHAUL_URL", "LONGHAUL_LOCAL_KEYS"} <= read
    assert {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "CDK_OUTDIR"} <= read


def test_every_context_key_is_documented() -> None:
    read, documented = set(reference.context_reads()), set(reference.documented_context_keys())
    assert read - documented == set(), f"read in the CDK app but not in app.py's docstring: {sorted(read - documented)}"
    assert documented - read == set(), f"documented in app.py but read nowhere: {sorted(documented - read)}"


def test_every_event_type_written_is_described() -> None:
    scan = reference.event_sites()
    assert not scan.unresolved, f"event types the scan cannot read (a new way of writing events?): {scan.unresolved}"
    written = {site.type for site in scan.sites}
    assert {"job_queued", "job_completed", "step_started", "model_called", "breaker_opened"} <= written
    missing = sorted(written - set(EVENT_TYPES))
    assert not missing, f"written but not described in EVENT_TYPES (core/event_types.py): {missing}"
    stale = sorted(set(EVENT_TYPES) - written)
    assert not stale, f"described in EVENT_TYPES but written nowhere: {stale}"
    assert all(meaning.strip() and "\n" not in meaning for meaning in EVENT_TYPES.values())


def test_every_fault_kind_has_a_meaning() -> None:
    for kind in faults.KINDS:
        assert faults.meaning(kind).strip(), kind
    for cls in errors.ERROR_CLASSES:
        assert cls.__doc__ and cls.__doc__.strip(), f"{cls.__name__} has no docstring"
    page = reference.faults_markdown()
    assert all(f"| `{kind}` |" in page for kind in faults.KINDS)


def test_every_problem_type_is_listed() -> None:
    found = {problem.name: problem for problem in reference.problem_types()}
    # subclasses defined outside core/problems.py are found too
    assert {"NotFound", "AlreadyFinished", "ReviewConflict", "WebhookNotDead", "NotReplayable"} <= set(found)
    assert found["ReviewConflict"].slug == "review-closed" and found["ReviewConflict"].status == 409
    assert len({p.slug for p in found.values()}) == len(found), "two problem classes share a type"


def test_the_api_reference_has_every_operation() -> None:
    spec = json.loads((ROOT / "docs" / "openapi.json").read_text())
    page = reference.api_markdown(spec)
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in reference.METHODS:
                assert f"### `{method.upper()} {path}`" in page
                assert f"Operation: `{operation['operationId']}`" in page


def test_the_cli_reference_has_every_command() -> None:
    page = reference.cli_markdown()
    for command in ("longhaul submit", "longhaul watch", "longhaul review", "longhaul ops", "longhaul admin"):
        assert f"`{command}`" in page


def test_the_job_status_diagram_has_every_transition() -> None:
    diagram = reference.job_status_diagram()
    edges = set(re.findall(r"^\s+(\w+) --> (\w+)", diagram, re.MULTILINE))
    moves = [*TRANSITIONS.items(), *BY_PERSON.items()]
    expected = {(source.value, target.value) for source, targets in moves for target in targets}
    assert expected <= edges
    assert {edge for edge in edges if "[*]" not in edge} == expected


def test_every_generated_page_is_in_the_navigation() -> None:
    nav = _nav_pages()
    assert set(reference.pages()) <= nav
    assert "contributing.md" in nav and "index.md" in nav


def test_the_console_links_to_pages_of_the_manual() -> None:
    """The console's links to the manual (`MANUAL_PAGES` in app.js) name pages that the manual has."""
    script = (ROOT / "lambdas" / "console" / "app.js").read_text()
    block = re.search(r"MANUAL_PAGES = \{(.*?)\};", script, re.DOTALL)
    assert block, "app.js defines MANUAL_PAGES"
    linked = set(re.findall(r"""['"]([a-z0-9/_-]+)\.html(?:#[a-z0-9-]*)?['"]""", block.group(1)))
    assert linked, "MANUAL_PAGES names pages"
    missing = sorted(page for page in linked if f"{page}.md" not in _nav_pages())
    assert not missing, f"the console links to pages the manual does not have: {missing}"
