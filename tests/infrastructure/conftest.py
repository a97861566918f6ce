"""Synthesize the real CDK app once per session (offline, no bundling), expose the template, and walk its state
machines' states."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The logical id prefix of the Lambda that CDK adds to empty buckets on delete (dev and test stages).
AUTO_DELETE_PROVIDER = "CustomS3AutoDeleteObjectsCustomResourceProvider"
ALARM_EMAIL = "oncall@example.com"


def synthesize(out: Path, context: dict[str, Any] | None = None) -> Path:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from app import build_app

    os.environ["CDK_OUTDIR"] = str(out)
    try:
        build_app(context).synth()
    finally:
        del os.environ["CDK_OUTDIR"]
    return out


@pytest.fixture(scope="session")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app as tests and the local runtime synthesize it (offline model, no bundling)."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def bedrock_assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app as `cdk deploy` configures it (Bedrock model, a production stage, alarm e-mail), without bundling."""
    context = {"longhaul:model_provider": "bedrock", "longhaul:stage": "prod", "longhaul:alarm_email": ALARM_EMAIL}
    return synthesize(tmp_path_factory.mktemp("cdk.out.bedrock"), context)


@pytest.fixture(scope="session")
def template(assembly: Path) -> dict[str, Any]:
    return json.loads(next(assembly.glob("Longhaul-*.template.json")).read_text())


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def definition(machine: dict[str, Any]) -> dict[str, Any]:
    """The ASL of a state machine, with CloudFormation intrinsics rendered as `{"Ref": id}` placeholders."""
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else _placeholder(p) for p in parts)
    return json.loads(text)


def task_function(template: dict[str, Any], state: dict[str, Any]) -> str:
    """The logical id of the function a Lambda Task invokes: through the version it names (`@<version id>`), the
    version's function."""
    target = state["Resource"].lstrip("@")
    version = template["Resources"][target]
    if version["Type"] == "AWS::Lambda::Version":
        return str(version["Properties"]["FunctionName"]["Ref"])
    return target


def _placeholder(intrinsic: dict[str, Any]) -> str:
    if "Fn::GetAtt" in intrinsic:
        return "@" + intrinsic["Fn::GetAtt"][0]
    if "Ref" in intrinsic:
        return "@" + intrinsic["Ref"]
    return "@" + json.dumps(intrinsic, sort_keys=True).replace('"', "'")


def all_states(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, state, the States map it lives in), descending into Map processors and Parallel branches."""
    for name, state in states.items():
        yield name, state, states
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            yield from all_states(processor["States"])
        for branch in state.get("Branches") or ():
            yield from all_states(branch["States"])


def level_scopes(states: dict[str, Any]) -> list[dict[str, Any]]:
    """The States maps of a workflow's own level: its States and its Parallel states' branches' (not Maps')."""
    scopes = [states]
    for state in states.values():
        for branch in state.get("Branches") or ():
            scopes.extend(level_scopes(branch["States"]))
    return scopes


def workflow_level(states: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The states of a workflow's own level: its States and those of its Parallel states' branches (a segment's
    steps), not those inside Map processors."""
    found: dict[str, dict[str, Any]] = {}
    for name, state in states.items():
        found[name] = state
        for branch in state.get("Branches") or ():
            found.update(workflow_level(branch["States"]))
    return found


def payload_step(state: dict[str, Any]) -> str | None:
    """The spec step a Task runs: the `step` its payload names (None for other states)."""
    if state.get("Type") != "Task":
        return None
    parameters = state.get("Parameters") or {}
    body = parameters.get("Payload", parameters)  # LambdaInvoke with or without payload_response_only
    step_name = body.get("step") if isinstance(body, dict) else None
    return step_name if isinstance(step_name, str) else None
