"""Tools with the job's own credentials, a bound of their own and the route's allowed tools: the session policy names
exactly the job's prefixes and keys; credentials are assumed per job and kept only while valid; a tool's code runs
with them (the outbox's records do not); a hung call fails `timeout` and the turn goes on; a route's `allowed_tools`
hides the others from the model and refuses a call of them."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from longhaul.adapters.tool_credentials import (
    REFRESH_MARGIN_SECONDS,
    TOOL_SESSION_SECONDS,
    AssumedToolRole,
    identity_arns,
    session_name,
    session_policy,
)
from longhaul.core import faults
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import PlatformConfigurationError
from longhaul.core.ports import ToolCredentials, ToolScope
from longhaul.core.records import Job
from longhaul.engine.spec import AgentPolicy, Tool, ToolRegistry, WorkflowSpec, agent, step
from longhaul.engine.tools import ToolContext
from longhaul.services import Services
from longhaul.workflows import REGISTRY
from tests.unit.test_agent_turns import HERE as AGENT_HARNESS
from tests.unit.test_agent_turns import SAID, SCRIPT, Output, Said, Words, decide, run_turns
from tests.unit.test_sweep import create, read

TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
SCOPE = ToolScope("job_a", "tenant-a", "talk")
USED: list[str | None] = []  # the access key each call of `whoami` signed with
HERE = __name__


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    SCRIPT.clear()
    SAID.clear()
    USED.clear()
    yield
    faults.install(faults.FaultInjector())


@pytest.fixture
def job(services: Services) -> Job:
    return read(services.jobs, create(services, to=[JobStatus.RUNNING]))


def whoami(ctx: ToolContext, words: Words) -> Said:
    USED.append(ctx.services.signed_as)
    return Said(text=words.text)


def stuck(ctx: ToolContext, words: Words) -> Said:
    time.sleep(5)
    return Said(text="late")


def refused_by_aws(ctx: ToolContext, words: Words) -> Said:
    raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not yours"}}, "GetObject")


TOOLS = ToolRegistry(
    Tool("whoami", "Says who.", Words, Said, run=f"{HERE}:whoami", timeout_seconds=5),
    Tool("stuck", "Never answers in time.", Words, Said, run=f"{HERE}:stuck", timeout_seconds=0.2),
    Tool("peek", "Reads another job's object.", Words, Said, run=f"{HERE}:refused_by_aws"),
    Tool("quick", "Says who, quickly.", Words, Said, run=f"{HERE}:whoami", timeout_seconds=0.3),
    Tool("send", "Sends, slowly.", Words, Said, run=f"{HERE}:stuck", side_effect="reversible", timeout_seconds=0.2),
)


def spec(tools: tuple[str, ...] = ("whoami", "stuck", "peek", "send")) -> WorkflowSpec:
    real = REGISTRY["document-analysis"]
    policy = AgentPolicy(tools=tools, output_model=Output, brief="brief", offline=f"{AGENT_HARNESS}:policy")
    return WorkflowSpec(
        name="document-analysis",
        description="a test agent",
        input_model=real.input_model,
        result_model=real.result_model,
        steps=(agent("talk", policy=policy), step("done")),
        domain=AGENT_HARNESS,
        tools=TOOLS,
    )


def messages(services: Services, job: Job, turns: int) -> list[dict[str, Any]]:
    session = services.artifacts.get_json(f"work/{job.job_id}/talk/session-{turns:03d}.json")
    return [m["content"] for m in session["messages"] if m["role"] == "tool"]


# --- the session policy -------------------------------------------------------------------------------------------


def test_the_session_policy_names_exactly_the_jobs_prefixes_and_keys() -> None:
    policy = session_policy(SCOPE, bucket="artifacts", table_arn=TABLE_ARN)
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert set(by_sid) == {"JobObjectsRead", "JobObjectsWrite", "JobItems"}  # no delete, no e-mail: not asked for
    assert by_sid["JobObjectsRead"]["Action"] == "s3:GetObject"
    assert by_sid["JobObjectsRead"]["Resource"] == [
        "arn:aws:s3:::artifacts/work/job_a/*",
        "arn:aws:s3:::artifacts/uploads/tenant-a/*",
    ]
    assert by_sid["JobObjectsWrite"] == {
        "Sid": "JobObjectsWrite", "Effect": "Allow", "Action": "s3:PutObject",
        "Resource": ["arn:aws:s3:::artifacts/work/job_a/*"],
    }  # fmt: skip
    items = by_sid["JobItems"]
    assert items["Resource"] == [TABLE_ARN]  # the table, never its indexes
    assert items["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["JOB#job_a", "MEMORY#tenant-a"]}
    }
    assert "dynamodb:Scan" not in items["Action"] and "dynamodb:DeleteItem" not in items["Action"]


def test_the_effects_a_tool_may_make_widen_the_policy_only_as_far_as_they_go() -> None:
    identities = identity_arns("notices@example.com", region="us-east-1", account="123456789012")
    scope = SCOPE._replace(capabilities=frozenset({"email", "forget"}))
    policy = session_policy(scope, bucket="artifacts", table_arn=TABLE_ARN, email_identities=identities)
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["TenantMemoryDeletes"]["Action"] == "dynamodb:DeleteItem"
    assert by_sid["TenantMemoryDeletes"]["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["MEMORY#tenant-a"]}
    }
    assert by_sid["SendFromSender"]["Resource"] == [
        "arn:aws:ses:us-east-1:123456789012:identity/notices@example.com",
        "arn:aws:ses:us-east-1:123456789012:identity/example.com",
    ]


class FakeSts:
    """STS as the adapter calls it: records each AssumeRole and answers credentials valid `TOOL_SESSION_SECONDS`."""

    def __init__(self, now: list[datetime]) -> None:
        self.now = now
        self.calls: list[dict[str, Any]] = []

    def assume_role(self, **call: Any) -> dict[str, Any]:
        self.calls.append(call)
        n = len(self.calls)
        expiration = self.now[0] + timedelta(seconds=call["DurationSeconds"])
        return {"Credentials": {"AccessKeyId": f"ASIA{n}", "SecretAccessKey": "s", "SessionToken": "t",
                                "Expiration": expiration}}  # fmt: skip


def test_credentials_are_assumed_per_job_for_900_s_and_kept_only_while_valid() -> None:
    now = [datetime(2026, 12, 7, 12, tzinfo=UTC)]
    sts = FakeSts(now)
    role = AssumedToolRole(
        sts, "arn:aws:iam::123456789012:role/tools", bucket="artifacts", table_name="jobs", region="us-east-1",
        now=lambda: now[0],
    )  # fmt: skip

    first = role.credentials(SCOPE)
    assert role.credentials(SCOPE) == first and len(sts.calls) == 1  # the turn's other calls: the same session
    (call,) = sts.calls
    assert call["RoleArn"] == "arn:aws:iam::123456789012:role/tools"
    assert call["DurationSeconds"] == TOOL_SESSION_SECONDS == 900
    assert call["RoleSessionName"] == session_name("job_a") == "tool-job_a"
    assert {t["Key"]: t["Value"] for t in call["Tags"]} == {"job_id": "job_a", "tenant_id": "tenant-a", "step": "talk"}
    assert '"work/job_a/*"' not in call["Policy"] and "artifacts/work/job_a/*" in call["Policy"]

    other = role.credentials(ToolScope("job_b", "tenant-b", "talk"))
    assert other != first and len(sts.calls) == 2  # another job: its own session

    now[0] += timedelta(seconds=TOOL_SESSION_SECONDS - REFRESH_MARGIN_SECONDS + 1)  # too close to its expiry
    assert role.credentials(SCOPE) != first and len(sts.calls) == 3
    now[0] += timedelta(seconds=TOOL_SESSION_SECONDS)  # every session expired: none is kept
    role.credentials(SCOPE)
    assert len(role._kept) == 1


# --- a tool call with the job's credentials, its bound, the route's tools -------------------------------------------


class FakeSource:
    """A `ToolCredentialSource` handing out one key per job (moto accepts any)."""

    def __init__(self) -> None:
        self.scopes: list[ToolScope] = []

    def credentials(self, scope: ToolScope) -> ToolCredentials:
        self.scopes.append(scope)
        return ToolCredentials(
            f"ASIA{scope.job_id[-6:].upper()}", "secret", "token", datetime.now(UTC) + timedelta(minutes=15)
        )


def test_a_tools_code_runs_with_the_jobs_credentials(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = FakeSource()
    scoped = dataclasses.replace(services, tool_credentials=source)
    USED.clear()
    SCRIPT[:] = [decide("who", ("whoami", {"text": "a"})), decide("done", final={"said": "a"})]

    run_turns(scoped, job, spec(), monkeypatch)

    assert [f"ASIA{job.job_id[-6:].upper()}"] == USED  # the job's key, not the function's (None)
    assert source.scopes == [ToolScope(job.job_id, job.tenant_id, "talk", frozenset())]


def test_a_hung_tool_fails_timeout_on_its_own_bound_and_the_turn_goes_on(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [
        decide("wait", ("stuck", {"text": "x"}), ("whoami", {"text": "y"})),
        decide("done", final={"said": "y"}),
    ]

    started = time.monotonic()
    outputs = run_turns(services, job, spec(), monkeypatch)

    assert time.monotonic() - started < 3  # the 0.2 s bound, not the tool's 5 s
    assert [o["next"] for o in outputs] == ["turn", "done"]
    stuck_result, whoami_result = messages(services, job, 2)
    assert (stuck_result["ok"], stuck_result["kind"]) == (False, "timeout") and "0.2 s" in stuck_result["error"]
    assert whoami_result["ok"] is True  # the turn's next call ran
    turn = next(e for e in services.jobs.list_events(job.job_id, limit=100)[0] if e.type == "agent_turn")
    assert turn.detail["failures"] == {"timeout": 1}


def test_a_hung_side_effect_is_unknown_never_repeated(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [decide("send", ("send", {"text": "x"})), decide("done", final={"said": "x"})]

    run_turns(services, job, spec(), monkeypatch)

    (result,) = messages(services, job, 2)
    assert (result["kind"], result["status"]) == ("timeout", "unknown")
    (effect,) = services.effects.of_job(job.job_id)
    assert effect.status == "unknown" and effect.acted  # it may still act: never repeated (compensated, if it has one)


def test_the_tool_hang_fault_hangs_a_call_until_its_bound(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults.install(faults.FaultInjector("talk#0=tool-hangx1"))
    SCRIPT[:] = [decide("who", ("quick", {"text": "a"})), decide("again", ("quick", {"text": "b"})),
                 decide("done", final={"said": "b"})]  # fmt: skip

    run_turns(services, job, spec(tools=("quick",)), monkeypatch)

    assert [(m["ok"], m.get("kind")) for m in messages(services, job, 3)] == [(False, "timeout"), (True, None)]


def test_access_denied_in_a_tool_is_the_calls_failure(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [decide("peek", ("peek", {"text": "x"})), decide("done", final={"said": "x"})]

    outputs = run_turns(services, job, spec(), monkeypatch)

    assert outputs[-1]["next"] == "done"
    (result,) = messages(services, job, 2)
    assert result["kind"] == "access-denied" and "GetObject" in result["error"]


def test_a_route_offers_only_its_allowed_tools_and_refuses_the_others(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = {"provider": "offline", "model_id": "longhaul-offline-extractive-1", "allowed_tools": ["whoami"]}
    settings = services.settings.model_copy(update={"model_routes": {"default": route}})
    narrowed = dataclasses.replace(services, settings=settings)
    SCRIPT[:] = [decide("try", ("whoami", {"text": "a"}), ("peek", {"text": "b"})), decide("done", final={"said": "a"})]
    offered: list[list[str]] = []
    from longhaul.engine import agent as agent_module

    real_request = agent_module.agent_request

    def spy(*args: Any) -> Any:
        request = real_request(*args)
        offered.append(request.context["tools"])
        return request

    monkeypatch.setattr(agent_module, "agent_request", spy)

    run_turns(narrowed, job, spec(), monkeypatch)

    assert offered[0] == ["whoami"]  # `peek`, `stuck`, `send` are never shown to the model
    whoami_result, peek_result = messages(narrowed, job, 2)
    assert whoami_result["ok"] is True
    assert peek_result["kind"] == "not-allowed" and "route 'default'" in peek_result["error"]


def test_a_tool_names_a_bound_within_the_steps_own_timeout() -> None:
    with pytest.raises(ValueError, match="timeout_seconds must be in"):
        Tool("t", "T.", Words, Said, run="m:f", timeout_seconds=0)
    slow = ToolRegistry(Tool("slow", "Slow.", Words, Said, run="m:f", timeout_seconds=90))
    with pytest.raises(ValueError, match="not below the step's own timeout"):
        WorkflowSpec(
            name="w", description="", input_model=Output, result_model=Output, domain=HERE, tools=slow,
            steps=(agent("a", policy=AgentPolicy(tools=("slow",), output_model=Output, brief="b", offline="m:f"),
                         timeout_seconds=60),),
        )  # fmt: skip


class RefusingSource:
    """A tool role the function may not assume (a trust or grant missing from the deployment)."""

    def credentials(self, scope: ToolScope) -> ToolCredentials:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not trusted"}}, "AssumeRole")


def test_a_tool_role_the_function_may_not_assume_fails_the_step_as_the_deployments_fault(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [decide("who", ("whoami", {"text": "a"})), decide("done", final={"said": "a"})]

    with pytest.raises(PlatformConfigurationError, match="may not assume the tool role"):
        run_turns(dataclasses.replace(services, tool_credentials=RefusingSource()), job, spec(), monkeypatch)

    assert USED == []  # the tool's code never ran
