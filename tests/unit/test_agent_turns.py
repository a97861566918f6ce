"""An agent step, turn by turn, through the step runner: the offline model plays this module's scripted policy,
the tools are this module's; the stores are the real ones on moto. A turn reads the checkpointed conversation,
asks the model, runs the allowed tools and checkpoints; the limits end the step `agent-limit`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from longhaul.core import faults
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import AgentLimitError
from longhaul.core.records import Job
from longhaul.engine import agent as agent_module
from longhaul.engine.agent import AgentBrief, AgentDecision, Limits, limits_of
from longhaul.engine.runner import run_step
from longhaul.engine.spec import (
    AgentPolicy,
    Registry,
    ReviewPolicy,
    Tool,
    ToolRegistry,
    Undo,
    WorkflowSpec,
    agent,
    review,
    step,
)
from longhaul.engine.tools import ToolContext
from longhaul.services import Services
from longhaul.workflows import REGISTRY
from tests.unit.test_sweep import create, read

HERE = __name__
WORKFLOW = "document-analysis"  # the test job's workflow; its spec here is this module's
SCRIPT: list[dict[str, Any]] = []
SAID: list[str] = []


class Words(BaseModel):
    text: str


class Said(BaseModel):
    text: str


class Output(BaseModel):
    said: str


def brief(ctx: Any) -> AgentBrief:
    return AgentBrief(task="Say hello once.", context={"to": "world"})


def policy(context: dict[str, Any], model_id: str) -> str:
    return json.dumps(SCRIPT[min(context["turn"], len(SCRIPT) - 1)])


def say(ctx: ToolContext, words: Words) -> Said:
    SAID.append(words.text)
    return Said(text=words.text)


def unsay(ctx: ToolContext, undo: Undo) -> Said:
    return Said(text="")


TOOLS = ToolRegistry(
    Tool("look", "Looks.", Words, Said, run=f"{HERE}:say"),
    Tool("say", "Says.", Words, Said, run=f"{HERE}:say", side_effect="irreversible", compensation="unsay"),
    Tool("unsay", "Unsays.", Undo, Said, run=f"{HERE}:unsay", side_effect="irreversible"),
)


def spec_with(**options: Any) -> WorkflowSpec:
    policy_options = {"max_turns": 4, "max_tool_calls": 5, **options}
    real = REGISTRY[WORKFLOW]
    steps = [
        agent(
            "talk",
            policy=AgentPolicy(
                tools=("look", "say"), output_model=Output, brief="brief", offline=f"{HERE}:policy", **policy_options
            ),
        )
    ]
    if options.get("on_limit") == "review":
        steps.append(review("review", policy=ReviewPolicy(assignee_group="a", secondary_group="b", edits_model=Output)))
    return WorkflowSpec(
        name=WORKFLOW,
        description="a test agent",
        input_model=real.input_model,
        result_model=real.result_model,
        steps=(*steps, step("done")),
        domain=HERE,
        tools=TOOLS,
    )


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    SCRIPT.clear()
    SAID.clear()
    yield
    faults.install(faults.FaultInjector())


@pytest.fixture
def job(services: Services) -> Job:
    return read(services.jobs, create(services, to=[JobStatus.RUNNING]))


def decide(thought: str, *calls: tuple[str, dict[str, Any]], final: dict[str, Any] | None = None) -> dict[str, Any]:
    if final is not None:
        return {"thought": thought, "final": final}
    return {"thought": thought, "tool_calls": [{"tool": t, "input": i} for t, i in calls]}


def run_turns(services: Services, job: Job, spec: WorkflowSpec, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Run the loop as the state machine does: a turn, then another while the last says `turn`."""
    monkeypatch.setattr(agent_module, "registry", lambda: Registry(spec))
    outputs, state = [], {"talk": {"turn": 0, "next": "turn"}}
    while state["talk"]["next"] == "turn":
        event = {
            "step": "talk",
            "item": state["talk"]["turn"],
            "input": {"job_id": job.job_id, "tenant_id": job.tenant_id, "workflow": WORKFLOW,
                      "input_key": job.input_key, "steps": state},
        }  # fmt: skip
        output = run_step(event, services, spec=spec)
        outputs.append(output)
        state = {"talk": output}
    return outputs


def test_each_turn_asks_runs_the_tools_checkpoints_and_the_last_one_finishes(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [
        decide("look first", ("look", {"text": "around"})),
        decide("now say it", ("say", {"text": "hello"})),
        decide("done", final={"said": "hello"}),
    ]
    outputs = run_turns(services, job, spec_with(), monkeypatch)

    assert [o["next"] for o in outputs] == ["turn", "turn", "done"]
    assert SAID == ["around", "hello"]
    final = services.artifacts.get_json(outputs[-1]["output_key"])
    assert final == {"said": "hello"}
    record = services.checkpoints.get_step(job.job_id, "talk", None)
    assert record is not None and record.succeeded and record.output == outputs[-1]  # the step's own checkpoint
    events = services.jobs.list_events(job.job_id, limit=200)[0]
    turns = [e for e in events if e.type == "agent_turn"]
    assert [e.detail["tools"] for e in turns] == [["look"], ["say"], []]
    assert [e.detail["turn"] for e in turns] == [1, 2, 3] and turns[-1].detail["finished"] is True
    assert [e.type for e in events].count("step_finished") == 4  # three turns and the step


def test_a_crashed_turn_runs_again_from_its_checkpoint_without_acting_or_paying_twice(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [decide("say it", ("say", {"text": "hello"})), decide("done", final={"said": "hello"})]
    faults.install(faults.FaultInjector("talk=crash-after-side-effectx1"))
    with pytest.raises(faults.CrashFault):
        run_turns(services, job, spec_with(), monkeypatch)

    outputs = run_turns(services, job, spec_with(), monkeypatch)  # the retried Task

    assert outputs[-1]["next"] == "done" and SAID == ["hello"]
    charges = services.checkpoints.charges(job.job_id)
    assert sorted(c.charge_id for c in charges) == ["1/talk/0", "1/talk/1"]  # the first turn's call paid once
    assert "model_call_reused" in [e.type for e in services.jobs.list_events(job.job_id, limit=200)[0]]


def test_a_final_answer_that_does_not_fit_its_model_is_told_to_the_model(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [decide("done?", final={"spoken": 1}), decide("done", final={"said": "hi"})]

    outputs = run_turns(services, job, spec_with(), monkeypatch)

    assert [o["next"] for o in outputs] == ["turn", "done"]
    session = services.artifacts.get_json(f"work/{job.job_id}/talk/session-002.json")
    refused = [m for m in session["messages"] if m["role"] == "platform"]
    assert refused and "said" in json.dumps(refused[0]["content"]["final_refused"])


def test_reaching_max_turns_ends_the_step_agent_limit(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [decide("keep looking", ("look", {"text": "around"}))]

    with pytest.raises(AgentLimitError) as limit:
        run_turns(services, job, spec_with(max_turns=3), monkeypatch)

    assert limit.value.kind == "agent-limit" and limit.value.limit == "max_turns"
    assert limit.value.message.startswith("max_turns: 3 turns taken") and limit.value.item is None
    assert len(SAID) == 3


def test_the_jobs_own_limits_tighten_the_steps_within_its_tenants_ceilings(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [decide("two at once", ("look", {"text": "a"}), ("look", {"text": "b"}))]
    services.jobs.update_job(job.job_id, {"agent_max_tool_calls": 3})

    with pytest.raises(AgentLimitError) as limit:
        run_turns(services, read(services.jobs, job.job_id), spec_with(max_tool_calls=10), monkeypatch)

    assert limit.value.limit == "max_tool_calls" and SAID == ["a", "b"]  # the second turn's two were not run
    step_spec = spec_with().step("talk")
    tight = limits_of(step_spec, job.model_copy(update={"agent_max_turns": 2}), lambda: Limits(3, 100))
    assert tight == Limits(max_turns=2, max_tool_calls=5)
    unpinned = job.model_copy(update={"agent_max_turns": None, "agent_max_tool_calls": None})
    assert limits_of(step_spec, unpinned, lambda: Limits(1, 100)).max_turns == 1  # a job from before pinning


def test_a_jobs_pinned_limits_hold_whatever_its_tenants_ceilings_become(job: Job) -> None:
    step_spec = spec_with(max_turns=50, max_tool_calls=500).step("talk")
    pinned = job.model_copy(update={"agent_max_turns": 3, "agent_max_tool_calls": 7})

    def ceilings() -> Limits:
        raise AssertionError("a pinned job never reads its tenant's ceilings")

    assert limits_of(step_spec, pinned, ceilings) == Limits(max_turns=3, max_tool_calls=7)


def test_a_step_that_hands_over_to_review_ends_with_the_limit_named(
    services: Services, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    SCRIPT[:] = [decide("keep looking", ("look", {"text": "around"}))]

    outputs = run_turns(services, job, spec_with(max_turns=1, on_limit="review"), monkeypatch)

    assert outputs[-1]["next"] == "done" and outputs[-1]["limit"] == "max_turns"


def test_the_spec_refuses_an_agent_it_could_not_run() -> None:
    with pytest.raises(ValueError, match="unregistered tools"):
        WorkflowSpec(
            name="w", description="", input_model=Output, result_model=Output, domain=HERE, tools=TOOLS,
            steps=(agent("a", policy=AgentPolicy(tools=("fly",), output_model=Output, brief="b", offline="m:f")),),
        )  # fmt: skip
    with pytest.raises(ValueError, match="compensations"):
        WorkflowSpec(
            name="w", description="", input_model=Output, result_model=Output, domain=HERE, tools=TOOLS,
            steps=(agent("a", policy=AgentPolicy(tools=("unsay",), output_model=Output, brief="b", offline="m:f")),),
        )  # fmt: skip
    with pytest.raises(ValueError, match="no review follows"):
        WorkflowSpec(
            name="w", description="", input_model=Output, result_model=Output, domain=HERE, tools=TOOLS,
            steps=(agent("a", policy=AgentPolicy(tools=(), output_model=Output, brief="b", offline="m:f",
                                                 on_limit="review")),),
        )  # fmt: skip
    with pytest.raises(ValueError, match="names the tool that compensates it"):
        Tool("send", "Sends.", Words, Said, run="m:f", side_effect="irreversible")
    with pytest.raises(ValueError, match="takes `Undo`"):
        ToolRegistry(
            Tool("send", "Sends.", Words, Said, run="m:f", side_effect="irreversible", compensation="look"),
            Tool("look", "Looks.", Words, Said, run="m:f"),
        )
    with pytest.raises(ValueError, match="agent policy"):
        step("a", kind=agent("x", policy=AgentPolicy((), Output, "b", "m:f")).kind)


def test_a_spec_naming_its_tools_by_path_imports_and_checks_them_on_first_use() -> None:
    """The API imports every spec but runs no tool: a spec may name its registry as `"module:NAME"`, imported (and
    checked against its agents, as a registry given at once is) the first time a tool is asked for."""
    steps = (agent("a", policy=AgentPolicy(tools=("look", "say"), output_model=Output, brief="b", offline="m:f")),)
    lazy = WorkflowSpec(
        name="w", description="", input_model=Output, result_model=Output, domain=HERE, tools=f"{HERE}:TOOLS",
        steps=steps,
    )  # fmt: skip
    assert lazy.tool_registry is TOOLS
    assert [t.name for t in lazy.tools_of("a")] == ["look", "say"]
    unknown = WorkflowSpec(
        name="w", description="", input_model=Output, result_model=Output, domain=HERE, tools=f"{HERE}:TOOLS",
        steps=(agent("a", policy=AgentPolicy(tools=("fly",), output_model=Output, brief="b", offline="m:f")),),
    )  # fmt: skip
    with pytest.raises(ValueError, match="unregistered tools"):
        unknown.tools_of("a")
    not_tools = WorkflowSpec(
        name="w", description="", input_model=Output, result_model=Output, domain=HERE, tools=f"{HERE}:WORKFLOW",
        steps=steps,
    )  # fmt: skip
    with pytest.raises(TypeError, match="not a ToolRegistry"):
        not_tools.tools_of("a")


def test_a_decision_is_tool_calls_or_a_final_answer() -> None:
    assert AgentDecision.model_validate({"tool_calls": [{"tool": "look"}]}).final is None
    for both_or_neither in ({"tool_calls": [{"tool": "look"}], "final": {}}, {"thought": "hmm"}):
        with pytest.raises(ValueError):
            AgentDecision.model_validate(both_or_neither)


def test_the_dispute_workflows_state_machine_has_a_compensation_lane() -> None:
    spec = REGISTRY["dispute-resolution"]
    assert spec.compensated and [s.name for s in spec.agent_steps] == ["draft_notices", "send_notices"]
    assert spec.steps_using("email") == ("send_notices",) and spec.compensations_use("email")
    assert not REGISTRY["document-analysis"].compensated


def test_an_agent_that_hands_over_at_a_limit_is_reviewed_whatever_the_jobs_mode(services: Services) -> None:
    from longhaul.core.step_events import StepEvent, WorkflowState
    from longhaul.engine.context import StepContext
    from longhaul.review import lane
    from longhaul.storage.jobs import NewJob

    jid = "job_" + "7e" * 14
    services.jobs.create_job(
        NewJob(
            jid, "tenant-a", "dispute-resolution", f"work/{jid}/input.json", "h", "offline:t", 30, review_mode="never"
        )
    )
    services.jobs.transition(jid, JobStatus.RUNNING, event="job_started")
    handed = {"next": "done", "limit": "max_turns", "message": "max_turns: 12 turns taken without finishing"}
    state = WorkflowState(
        job_id=jid, tenant_id="tenant-a", workflow="dispute-resolution", input_key="k", steps={"draft_notices": handed}
    )

    opened = lane.open_review(
        StepContext(StepEvent(step="review", input=state), services, job=read(services.jobs, jid))
    )

    assert opened["next"] == "wait"
    review = services.reviews.get(opened["review_id"])
    assert review is not None and review.reasons[0].startswith("agent step draft_notices reached its max_turns limit")
