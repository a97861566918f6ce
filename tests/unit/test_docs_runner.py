"""The docs runner's own parts (`tests/docs/runner.py`), without a platform: how it reads a document's blocks and
commands, what an expected output means, that a changed output or a failed command names the document's line; and
the documents' own rules: every runnable block runs or says why not, commands use the project's interpreter, every
figure names the command that measured it, the layout table names what is in each folder."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.docs.runner import (
    Block,
    DocumentError,
    Expected,
    Rewrites,
    blocks,
    commands,
    run_document,
)

ROOT = Path(__file__).resolve().parents[2]
USER_DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "samples").rglob("*.md"))]


def document(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "DOC.md"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


# ---------------------------------------------------------------------- reading


def test_blocks_keep_their_fence_line_and_the_reason_they_are_not_run(tmp_path: Path) -> None:
    path = document(
        tmp_path,
        """
        # Title

        ```bash
        echo one
        ```

        <!-- not run: needs an AWS account -->
        ```bash
        cdk deploy
        ```

        ```json
        {"a": 1}
        ```
        """,
    )
    found = blocks(path)
    assert [(b.line, b.language, b.skip, b.runnable) for b in found] == [
        (3, "bash", None, True),
        (8, "bash", "needs an AWS account", True),
        (12, "json", None, False),
    ]


def test_a_not_run_mark_needs_a_reason(tmp_path: Path) -> None:
    path = document(tmp_path, "<!-- not run: -->\n```bash\nls\n```\n")
    with pytest.raises(DocumentError, match=r"DOC\.md:2: .* needs a reason"):
        blocks(path)


def test_commands_are_split_as_bash_would_run_them_with_their_lines_and_outputs(tmp_path: Path) -> None:
    path = document(
        tmp_path,
        """
        ```bash
        A=1   # a comment
        curl -sS -X POST http://x \\
             -d '{"a": 1,
                  "b": 2}' | json a
        # → 202 {"a": 1,
        #        "b": …}
        # an ordinary comment
        echo "$A" |
          cat
        # → 1
        ```
        """,
    )
    (block,) = blocks(path)
    found = commands(block)
    assert [(c.line, c.text.splitlines()[0]) for c in found] == [
        (2, "A=1   # a comment"),
        (3, "curl -sS -X POST http://x \\"),
        (9, 'echo "$A" |'),
    ]
    assert found[0].expected is None
    assert found[1].expected is not None and found[1].expected.status == 202
    assert found[1].expected.source == '202 {"a": 1, "b": …}'
    assert found[2].expected is not None and found[2].expected.text == "1"


def test_a_command_that_never_ends_is_reported_at_its_line(tmp_path: Path) -> None:
    path = document(tmp_path, "```bash\necho ok\necho 'unclosed\n```\n")
    (block,) = blocks(path)
    with pytest.raises(DocumentError, match=r"DOC\.md:3: the command never ends"):
        commands(block)


# ---------------------------------------------------------------------- expected outputs


@pytest.mark.parametrize(
    ("shape", "actual"),
    [
        ('{"a": 1, "b": "x"}', {"a": 1, "b": "x"}),
        ('{"a": 1, …}', {"a": 1, "c": [1]}),
        ('{"a", "b": null}', {"a": {"deep": 1}, "b": None}),
        ('{"id": "job_…"}', {"id": "job_0123"}),
        ('{"list": [1, …]}', {"list": [1, 2, 3]}),
        ('{"list": […]}', {"list": []}),
        ('{"n": ~100}', {"n": 120}),
        ('{"text": "retry…end…"}', {"text": "retry: 2000\nid: 1\nevent: end\n"}),
        ("[]", []),
    ],
)
def test_a_shape_matches_what_has_its_keys_and_deterministic_values(shape: str, actual: object) -> None:
    import json

    assert Expected.parse(shape).mismatches(json.dumps(actual), None) == []


@pytest.mark.parametrize(
    ("shape", "actual", "problem"),
    [
        ('{"a": 1}', {"a": 1, "new": 2}, "$: not shown in the document: new"),
        ('{"a": 1, "b"}', {"a": 1}, "$: missing b"),
        ('{"a": {"b": "x"}}', {"a": {"b": "y"}}, '$.a.b: "y", expected "x"'),
        ('{"id": "job_…"}', {"id": "up_1"}, "$.id: \"up_1\" does not read 'job_…'"),
        ('{"list": [1]}', {"list": [1, 2]}, "$.list: 2 items, expected 1"),
        ('{"n": ~100}', {"n": 130}, "$.n: 130 is not within a quarter of 100"),
        ('{"n": 1}', {"n": True}, "$.n: true, expected 1"),
    ],
)
def test_a_shape_names_where_the_output_differs(shape: str, actual: object, problem: str) -> None:
    import json

    assert problem in Expected.parse(shape).mismatches(json.dumps(actual), None)


def test_the_status_and_text_of_an_output() -> None:
    assert Expected.parse("409 {…}").mismatches("{}", 200) == ["HTTP status 200, expected 409"]
    assert Expected.parse("completed").mismatches("completed\n", None) == []
    assert Expected.parse("msg_…").mismatches("msg_2a\n", None) == []
    assert Expected.parse("completed").mismatches("failed", None) == ["the output 'failed' does not read 'completed'"]
    assert Expected.parse('{"a": 1}').mismatches("oops", None) == ["the output is not JSON: 'oops'"]


def test_the_documented_ports_and_tmp_become_the_runs_own(tmp_path: Path) -> None:
    rewrites = Rewrites.for_documents(["see 127.0.0.1:9000 and localhost:8000"], 41000, 41001, tmp_path)
    assert rewrites.ports[8000] == 41000 and rewrites.ports[8001] == 41001 and rewrites.ports[9000] not in (9000,)
    text = rewrites.apply("curl http://127.0.0.1:8000/x; server.py 9000 /tmp/hooks; limit 80000; v8001")
    assert text == (
        f"curl http://127.0.0.1:41000/x; server.py {rewrites.ports[9000]} {tmp_path}/hooks; limit 80000; v8001"
    )


# ---------------------------------------------------------------------- a run, without a platform


def test_a_run_shares_the_session_and_names_the_line_of_what_changed(tmp_path: Path) -> None:
    path = document(
        tmp_path,
        """
        Intro.

        ```bash
        GREETING=hello
        say() { echo "$GREETING $1"; }
        ```

        ```bash
        say world
        # → hello world
        python3 -c 'import json; print(json.dumps({"a": 1, "b": 2}))'
        # → {"a": 1}
        ```

        <!-- not run: an example of a skipped block -->
        ```bash
        exit 3
        ```

        ```bash
        echo "$UNDEFINED"
        say never
        ```
        """,
    )
    report = run_document(path, ROOT)

    assert (len(report.ran), len(report.skipped), report.commands) == (3, 1, 5)
    shape, unset = report.failures[:2]
    assert shape.startswith("DOC.md:11 (block at DOC.md:8): `python3 -c") and "not shown in the document: b" in shape
    assert unset.startswith('DOC.md:21 (block at DOC.md:20): `echo "$UNDEFINED"`: exited 1')
    assert "UNDEFINED: unbound variable" in unset
    assert "skipped DOC.md:16: an example of a skipped block" in report.summary()


# ---------------------------------------------------------------------- the documents' own rules


@pytest.mark.parametrize("path", USER_DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_of_a_document_reads_and_splits(path: Path) -> None:
    """What the docs suite will run parses: every command ends, every expected output is a shape or a text."""
    for block in blocks(path):
        if block.runnable:
            commands(block)


def _inline_commands(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    found = [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in re.finditer(r"`([^`\n]+)`", text)]
    for block in blocks(path):
        if block.runnable:
            found += [(block.line + 1 + i, line) for i, line in enumerate(block.text.splitlines())]
    return found


@pytest.mark.parametrize("path", USER_DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_commands_use_the_projects_interpreter(path: Path) -> None:
    """`python` on a user's PATH is not the project's (other packages, another moto): commands name
    `.venv/bin/python` (or `make …`); `python3` runs only the standard library (`-m zipfile`, `-c 'import json…'`)."""
    bare = re.compile(
        r"(?:^|[\s(;|&])(?:PYTHONPATH=\S+ )?python(?:3(?:\.\d+)?)? (?!-m (?:zipfile|json\.tool)\b)(?!-c )"
    )
    wrong = [
        f"{path.name}:{line}: {text.strip()}"
        for line, text in _inline_commands(path)
        if bare.search(text) and "samples/webhook_receiver.py" not in text and not text.lstrip().startswith("#")
    ]
    assert not wrong, "use .venv/bin/python (or make …):\n" + "\n".join(wrong)


def test_every_figure_names_the_command_that_measured_it_and_the_machine() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from figures import documents, regions

    found = [region for path in documents(ROOT) for region in regions(path)]
    assert found, "the docs quote figures from the benches"
    for region in found:
        where = f"{region.path.name}:{region.line}"
        script = re.search(r"bench/(\w+\.py)", region.command)
        assert region.command.startswith(".venv/bin/python bench/") and "--markdown" in region.command, where
        assert script and "--markdown" in (ROOT / "bench" / script.group(1)).read_text(), where
        assert "measured on" in region.body and "cores" in region.body, f"{where}: run `make figures`"


LAYOUT_ROWS = {
    "`stacks/`": (ROOT / "stacks", "*.py"),
    "`lambdas/handlers/`": (ROOT / "lambdas" / "handlers", "*.py"),
    "`local/`": (ROOT / "local", "*"),
    "`tests/`": (ROOT / "tests", "*"),
    "`bench/`": (ROOT / "bench", "*.py"),
}


@pytest.mark.parametrize("row", sorted(LAYOUT_ROWS))
def test_the_layout_table_names_what_each_folder_holds(row: str) -> None:
    folder, pattern = LAYOUT_ROWS[row]
    layout = ROOT / "docs" / "architecture" / "index.md"  # the repository's layout table
    text = next(line for line in layout.read_text().splitlines() if line.startswith(f"| {row}"))
    names = {
        p.name + ("/" if p.is_dir() else "")
        for p in folder.glob(pattern)
        if not p.name.startswith(("_", ".")) and p.name not in {"bytecode", "__pycache__"}
    }
    if row == "`bench/`":  # the benchmarks are listed where `make bench` is; the row names the helpers
        names = {"figures.py", "machine.py"}
    if row == "`stacks/`":
        names -= {"longhaul_stack.py"}  # named by its class, `LonghaulStack`
        assert "`LonghaulStack`" in text
    missing = sorted(name for name in names if f"`{name}`" not in text)
    assert not missing, f"the layout table's row {row} does not name {missing}"


def test_a_block_is_a_frozen_record() -> None:
    block = Block(Path("README.md"), 3, "bash", "ls\n", None)
    assert block.where == "README.md:3" and block.runnable
