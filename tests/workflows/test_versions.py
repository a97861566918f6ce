"""Safe change on the local runtime: a job waiting for review survives a deploy of changed step code and finishes on
the version it started on, while a job started after the deploy runs the new one; each checkpoint and model call
names the code version that produced it, and an operator reads the exact prompt a step sent.

The platform runs every version's handler in-process from its own code root, so the change is seen where a version
differs locally: its configuration, whose code version is the asset's hash (a changed file, a new hash), and its state
machine version's definition (naming the functions' new versions).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.conditions import Key

from local.platform import LocalPlatform
from tests.workflows.conftest import ROOT, Client
from tests.workflows.test_review_and_webhooks import status_of

CHANGED_STEP = Path("lambdas/longhaul/workflows/document_analysis/steps.py")


@pytest.fixture
def redeployable(platform: LocalPlatform) -> Iterator[LocalPlatform]:
    """The running platform; afterwards the original deployment again (a fresh one, as each scenario expects)."""
    yield platform
    platform.reset()


@pytest.fixture
def reviewer(platform: LocalPlatform) -> Client:
    return Client(platform, "alpha-reviewer")


@pytest.fixture
def operator(platform: LocalPlatform) -> Client:
    return Client(platform, "ops")


def changed_app(into: Path) -> Path:
    """A copy of the CDK app whose document-analysis steps module has changed."""
    for name in ("app.py", "cdk.json"):
        shutil.copy2(ROOT / name, into / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules", "cdk.out")
    for name in ("stacks", "state_machines", "lambdas"):
        shutil.copytree(ROOT / name, into / name, ignore=ignore)
    step = into / CHANGED_STEP
    step.write_text(step.read_text() + "\n# a changed step: deployed while a job waits for its review\n")
    return into


def code_version(platform: LocalPlatform) -> str:
    """The code version of the deployed functions (every function of a deploy has the same)."""
    lam = platform.client("lambda")
    name = next(iter(platform.deployment.functions.values()))
    return str(lam.get_function_configuration(FunctionName=name)["Environment"]["Variables"]["LONGHAUL_CODE_VERSION"])


def checkpoints(platform: LocalPlatform, job_id: str) -> list[dict[str, Any]]:
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    query = Key("pk").eq(f"JOB#{job_id}") & Key("sk").begins_with("STEP#")
    return [i for i in table.query(KeyConditionExpression=query)["Items"] if i.get("status") == "succeeded"]


def test_a_job_waiting_for_review_finishes_on_its_own_version_while_a_new_job_runs_the_deployed_one(
    redeployable: LocalPlatform,
    alpha: Client,
    reviewer: Client,
    operator: Client,
    sample_request: dict[str, Any],
    tmp_path: Path,
) -> None:
    platform = redeployable
    # Given a job that waits for its review on the code deployed now
    before = code_version(platform)
    old_job = alpha.submit({**sample_request, "review": {"mode": "always", "deadline_seconds": 3600}})
    review_id = status_of(alpha, old_job, "waiting_for_review")["review"]["review_id"]

    # When a changed step is deployed, a new job is submitted and the old job's review is approved
    platform.redeploy(changed_app(tmp_path))
    after = code_version(platform)
    new_job = alpha.submit(sample_request)
    decided = reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "approve"})
    old, new = alpha.wait(old_job), alpha.wait(new_job)

    # Then both complete, each on the version it started on
    assert before != after
    assert decided.status_code == 200 and (old["status"], new["status"]) == ("completed", "completed")
    assert (old["workflow_version"], new["workflow_version"]) == (1, 2)
    sfn = platform.client("stepfunctions")
    machine = platform.deployment.state_machine("DocumentAnalysis")
    execution = machine.replace(":stateMachine:", ":execution:")
    ran = {job: sfn.describe_execution(executionArn=f"{execution}:{job}") for job in (old_job, new_job)}
    assert ran[old_job]["stateMachineVersionArn"] == f"{machine}:1"
    assert ran[new_job]["stateMachineVersionArn"] == f"{machine}:2"
    assert ran[new_job]["stateMachineAliasArn"] == f"{machine}:live"

    # and every checkpoint of the old job, those written after the deploy included, names the code it started on
    old_steps, new_steps = checkpoints(platform, old_job), checkpoints(platform, new_job)
    assert {s["step"] for s in old_steps} >= {"publish_result", "draft_answer"}
    assert {(s["code_version"], int(s["workflow_version"])) for s in old_steps} == {(before, 1)}
    assert {(s["code_version"], int(s["workflow_version"])) for s in new_steps} == {(after, 2)}

    # and every model call names its code and workflow versions; an operator reads the exact prompt one sent
    calls = operator.get(f"/v1/ops/jobs/{old_job}/calls").json()["calls"]
    assert calls and {(c["code_version"], c["workflow_version"]) for c in calls} == {(before, 1)}
    called = [e for e in alpha.events(new_job) if e["type"] == "model_called"]
    assert called and {(e["detail"]["code_version"], e["detail"]["workflow_version"]) for e in called} == {(after, 2)}
    link = calls[0]["links"]["prompt"]
    prompt = operator.get(link[link.index("/v1/") :])
    assert prompt.status_code == 200 and prompt.json()["prompt_hash"] == calls[0]["prompt_hash"]
    assert prompt.json()["prompt"] and prompt.json()["prompt_version"] == calls[0]["prompt_version"]
