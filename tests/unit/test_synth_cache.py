"""The local runtime's cache of synthesized assemblies (`local.deploy.synthesize`): a second start re-uses the
assembly, and any change of what the synthesis depends on (a source, the CDK's version, the `CDK_*` environment)
synthesizes again; a failed or overtaken synthesis is never cached. `python app.py` is replaced by a stub that writes
a manifest naming the sources it saw."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from local import deploy


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for name in ("app.py", "cdk.json", "stacks/stack.py", "state_machines/machine.py", "lambdas/handlers/api.py"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\n")
    return tmp_path


class StubApp:
    """Stands in for `python app.py`: writes a manifest with the stack file's text; `during` runs mid-synthesis."""

    def __init__(self) -> None:
        self.runs = 0
        self.during: list[object] = []
        self.fail = False

    def __call__(self, repo_root: Path, out: Path) -> None:
        self.runs += 1
        if self.during:
            action = self.during.pop(0)
            assert callable(action)
            action()
        if self.fail:
            raise RuntimeError("`python app.py` failed (1)")
        stack = (repo_root / "stacks" / "stack.py").read_text()
        (out / "manifest.json").write_text(json.dumps({"artifacts": {}, "stack": stack}))


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> StubApp:
    stub = StubApp()
    monkeypatch.setattr(deploy, "_run_app", stub)
    return stub


def _stack_seen(out: Path) -> str:
    return str(json.loads((out / "manifest.json").read_text())["stack"])


def test_a_second_start_reuses_the_assembly(repo: Path, app: StubApp) -> None:
    first, synthesized = deploy.synthesize(repo)
    again, resynthesized = deploy.synthesize(repo)
    assert (synthesized, resynthesized, app.runs) == (True, False, 1)
    assert again == first
    assert first.parent == repo / deploy.SYNTH_CACHE


def test_a_changed_source_is_synthesized_again(repo: Path, app: StubApp) -> None:
    first, _ = deploy.synthesize(repo)
    (repo / "stacks" / "stack.py").write_text("# changed\n")
    second, synthesized = deploy.synthesize(repo)
    assert synthesized and second != first
    assert _stack_seen(second) == "# changed\n"
    (repo / "lambdas" / "handlers" / "new.py").write_text("")  # a new file counts too
    assert deploy.synthesize(repo)[1]


def test_bytecode_and_node_modules_are_not_inputs(repo: Path, app: StubApp) -> None:
    deploy.synthesize(repo)
    (repo / "lambdas" / "handlers" / "__pycache__").mkdir()
    (repo / "lambdas" / "handlers" / "__pycache__" / "api.cpython-311.pyc").write_bytes(b"\0")
    (repo / "stacks" / "node_modules").mkdir()
    (repo / "stacks" / "node_modules" / "x.js").write_text("")
    assert deploy.synthesize(repo)[1] is False


def test_another_cdk_version_is_synthesized_again(repo: Path, app: StubApp, monkeypatch: pytest.MonkeyPatch) -> None:
    deploy.synthesize(repo)
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.0.1" if name == "aws-cdk-lib" else real(name))
    assert deploy.synthesize(repo)[1]


def test_the_cdk_environment_is_an_input(repo: Path, app: StubApp, monkeypatch: pytest.MonkeyPatch) -> None:
    deploy.synthesize(repo)
    monkeypatch.setenv("CDK_DEFAULT_REGION", "eu-west-1")
    assert deploy.synthesize(repo)[1]


def test_a_setting_read_at_synthesis_is_an_input(repo: Path, app: StubApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment's bound is read when the app synthesizes: another value synthesizes anew, not the cached bound."""
    assert "LONGHAUL_OCR_INDEX_SEGMENT_SECONDS" in deploy.synthesis_settings()
    deploy.synthesize(repo)
    monkeypatch.setenv("LONGHAUL_OCR_INDEX_SEGMENT_SECONDS", "30")
    assert deploy.synthesize(repo)[1]
    assert deploy.synthesize(repo)[1] is False


def test_a_failed_synthesis_caches_nothing(repo: Path, app: StubApp) -> None:
    app.fail = True
    with pytest.raises(RuntimeError, match="failed"):
        deploy.synthesize(repo)
    app.fail = False
    assert deploy.synthesize(repo)[1]
    assert [p.name for p in (repo / deploy.SYNTH_CACHE).iterdir() if p.name.startswith(".")] == []


def test_a_source_changed_mid_synthesis_is_synthesized_again(repo: Path, app: StubApp) -> None:
    app.during.append(lambda: (repo / "stacks" / "stack.py").write_text("# edited meanwhile\n"))
    out, synthesized = deploy.synthesize(repo)
    assert synthesized and app.runs == 2
    assert _stack_seen(out) == "# edited meanwhile\n"
    assert deploy.synthesize(repo) == (out, False)


def test_force_synthesizes_and_old_assemblies_are_pruned(repo: Path, app: StubApp) -> None:
    deploy.synthesize(repo)
    assert deploy.synthesize(repo, force=True)[1]
    for n in range(deploy.KEPT_ASSEMBLIES + 2):
        (repo / "stacks" / "stack.py").write_text(f"# version {n}\n")
        latest, _ = deploy.synthesize(repo)
    kept = [p for p in (repo / deploy.SYNTH_CACHE).iterdir()]
    assert len(kept) == deploy.KEPT_ASSEMBLIES and latest in kept
