"""The house step policy holds for every Task of every state machine in the synthesized template."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longhaul.core import limits
from longhaul.core.errors import DETERMINISTIC_ERROR_NAMES, ITEMS_FAILED, RETRYABLE_ERROR_NAMES
from longhaul.engine.spec import StepKind
from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import (
    all_states,
    definition,
    level_scopes,
    resources,
    task_function,
    workflow_level,
)


@pytest.fixture(scope="module")
def machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The workflows' state machines (the webhook delivery's has its own tests)."""
    found = resources(template, "AWS::StepFunctions::StateMachine")
    assert found, "the template has no state machine"
    asl = {logical_id: definition(m) for logical_id, m in found.items()}
    return {k: v for k, v in asl.items() if v["Comment"].startswith("Longhaul workflow ")}


@pytest.fixture(scope="module")
def lambda_timeouts(template: dict[str, Any]) -> dict[str, int]:
    return {k: v["Properties"]["Timeout"] for k, v in resources(template, "AWS::Lambda::Function").items()}


def step_tasks(machine: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Tasks that run a workflow step (not the failure path: recorder and dead-letter send)."""
    return [
        (name, state, scope)
        for name, state, scope in all_states(machine["States"])
        if state["Type"] == "Task" and ":" not in name
    ]


def step_of(task_name: str) -> str:
    """The step a step Task runs: `<step>`, `<step> item` (inline Map), `<step> batch item` (Distributed Map) or
    `<step> (one item)` (a list of one item); a grouped fan-out's `group` and `(one group)` alike."""
    for suffix in (" (one item)", " (one group)", " item", " group", " batch"):
        task_name = task_name.removesuffix(suffix)
    return task_name


def test_every_step_task_has_a_timeout_not_below_its_lambda_timeout(machines, lambda_timeouts, template):
    for machine in machines.values():
        tasks = step_tasks(machine)
        spec = REGISTRY[machine["Comment"].removeprefix("Longhaul workflow ")]
        # one Task per step; a fan-out's is inside its Map, twice: the inline Map's and the Distributed Map's batch,
        # and a Lambda fan-out's once more outside any Map, for a list of one item
        lambda_fan_outs = [s for s in spec.steps if s.kind == StepKind.FAN_OUT]
        assert len(tasks) == len(spec.steps) + len(spec.fan_out_steps) + len(lambda_fan_outs)
        assert sorted({step_of(name) for name, _, _ in tasks}) == sorted(spec.step_names)
        for name, state, _ in tasks:
            assert state.get("TimeoutSeconds"), f"{name} has no TimeoutSeconds"
            if state["Resource"].startswith("arn:aws:states:::ecs:runTask"):  # a container step: its own bounds
                step_spec = spec.step(step_of(name))
                assert state["TimeoutSeconds"] >= (step_spec.timeout_seconds or 0), name
                assert 0 < state["HeartbeatSeconds"] < state["TimeoutSeconds"], f"{name}: nothing waits forever"
                continue
            assert state["TimeoutSeconds"] >= lambda_timeouts[task_function(template, state)], name


def test_every_task_retries_transient_errors_with_full_jitter_and_a_max_delay(machines):
    for machine in machines.values():
        for name, state, _ in all_states(machine["States"]):
            if state["Type"] != "Task":
                continue
            retries = state.get("Retry", [])
            transient = [r for r in retries if set(RETRYABLE_ERROR_NAMES) <= set(r["ErrorEquals"])]
            assert transient, f"{name} does not retry the transient classes"
            for retry in retries:
                assert retry["JitterStrategy"] == "FULL", name
                assert retry["MaxDelaySeconds"] > 0, name
                assert retry["BackoffRate"] > 1, name
                assert not set(DETERMINISTIC_ERROR_NAMES) & set(retry["ErrorEquals"]), (
                    f"{name} retries a deterministic error"
                )
                assert "States.ALL" not in retry["ErrorEquals"], name


def test_a_recurring_timeout_is_retried_at_most_once(machines):
    for machine in machines.values():
        for name, state, _ in step_tasks(machine):
            timeouts = [r for r in state["Retry"] if "States.Timeout" in r["ErrorEquals"]]
            assert timeouts and all(r["MaxAttempts"] <= 1 for r in timeouts), name


def test_every_step_catches_all_into_record_failure_then_its_own_dead_letter_queue(machines, template):
    queues = resources(template, "AWS::SQS::Queue")
    for machine in machines.values():
        dlq_by_step: dict[str, str] = {}
        for name, state, scope in step_tasks(machine):
            step = step_of(name)
            catch_all = [c for c in state.get("Catch", []) if c["ErrorEquals"] == ["States.ALL"]]
            assert catch_all, f"{name} has no catch-all"
            record = scope[catch_all[0]["Next"]]
            assert record["Type"] == "Task" and record["Parameters"]["step"] == step, name
            send = scope[record["Next"]]
            after_send = send
            if name.endswith((" group", " (one group)")):  # a failed group's items' dead letters, one by one
                assert send["Type"] == "Map" and send["ItemsPath"] == "$.dead_letter.dead_letters", name
                send = send["ItemProcessor"]["States"][send["ItemProcessor"]["StartAt"]]
            assert send["Resource"].endswith(":states:::sqs:sendMessage")
            queue_url = send["Parameters"]["QueueUrl"].lstrip("@")
            assert queue_url in queues, f"{name} dead letters go to an unknown queue"
            assert dlq_by_step.setdefault(step, queue_url) == queue_url
            end = scope[after_send["Next"]]
            # a step fails the job; an item (or group) yields its failure to its Map; a list's only item (or group)
            # goes on to the summary
            alone = name.endswith((" (one item)", " (one group)")) and end["Type"] == "Task"
            in_map = name.endswith((" item", " group")) and end["Type"] == "Pass"
            assert end["Type"] == "Fail" or in_map or alone, name
        assert len(set(dlq_by_step.values())) == len(dlq_by_step), "steps share a dead-letter queue"


def test_dead_letter_queues_are_encrypted_and_alarmed(template):
    queues = resources(template, "AWS::SQS::Queue")
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    alarmed = {
        d["Value"]["Fn::GetAtt"][0]
        for a in alarms.values()
        for d in a["Properties"].get("Dimensions", [])
        if d["Name"] == "QueueName"
    }
    for logical_id, queue in queues.items():
        assert queue["Properties"].get("SqsManagedSseEnabled") or queue["Properties"].get("KmsMasterKeyId"), logical_id
        if logical_id.startswith("EventsTap"):  # the operators' tap of the bus: unread events expire, nothing to alarm
            continue
        assert logical_id in alarmed, f"{logical_id} has no alarm"


def test_state_machines_are_standard_with_full_logging_and_tracing(template):
    for logical_id, machine in resources(template, "AWS::StepFunctions::StateMachine").items():
        props = machine["Properties"]
        assert props.get("StateMachineType", "STANDARD") == "STANDARD", logical_id
        assert props["LoggingConfiguration"]["Level"] == "ALL"
        assert props["TracingConfiguration"]["Enabled"] is True


def test_only_references_travel_between_states(machines):
    """Step outputs land under $.steps.<name>; Map items get an index, a reference and the (small) state."""
    for machine in machines.values():
        for name, state, _ in step_tasks(machine):
            if name.endswith((" item", " (one item)", " group", " (one group)")):
                # An item's outcome is its step output (references only; `true` when it failed), the Map's result;
                # a container task's worker answers with its step output too; the one item run alone drops it
                assert state["ResultPath"] in (None, "$") or state["Resource"].startswith("arn:aws:states:::ecs:")
            else:
                assert state["ResultPath"] == f"$.steps.{name}"
        maps = [(n, s) for n, s, _ in all_states(machine["States"]) if s["Type"] == "Map"]
        for name, fan_out in maps:
            if name.endswith(": dead letters"):  # a failed group's dead letters: the recorder's answer, sent
                assert "ItemSelector" not in fan_out and fan_out["ResultPath"] is None
                continue
            assert fan_out.get("MaxConcurrency", 0) > 0
            if "ItemReader" in fan_out:  # a Distributed Map: a batch of the manifest and the state per child
                assert set(fan_out["ItemSelector"]) == {"batch.$", "input.$"}
                assert fan_out["ResultPath"].startswith("$.fanout.") and "ResultWriter" in fan_out
                continue
            # an item and its reference, or a grouped step's group of them
            assert set(fan_out["ItemSelector"]) in ({"item.$", "ref.$", "input.$"}, {"items.$", "input.$"})
            assert fan_out["ResultPath"].startswith("$.fanout.") or name.endswith(" batch items")
            # an item ends with its Task's output (a step output: references only), a boolean (failed or not), a
            # stop, or (a distributed batch) whether any of its items failed
            ends = [s for s in fan_out["ItemProcessor"]["States"].values() if s.get("End")]
            assert all(
                s["Type"] in ("Fail", "Task")
                or isinstance(s.get("Result"), bool)
                or set(s.get("Parameters", {})) == {"any_failed.$"}
                for s in ends
            )


def test_a_fan_out_fails_the_job_once_after_all_items_ran(machines):
    """Failed items do not stop the others; a Choice after the Map fails the job without another dead letter. The
    inline Map's result says whether any item yielded `true` (failed); the Distributed Map's tally counts committed
    items (its results are in S3); each child execution yields whether any item of its batch failed."""
    for machine in machines.values():
        states = machine["States"]
        for name, state, scope in all_states(states):
            if state["Type"] != "Map" or name.endswith(": dead letters"):
                continue
            after = scope[state["Next"]]
            if name.endswith(" batch items"):  # inside a child execution: its answer to the Distributed Map
                assert "States.ArrayContains" in json.dumps(after["Parameters"]) and after.get("End")
                continue
            if "ItemReader" in state:
                assert after["Type"] == "Task" and after["Parameters"]["count.$"].endswith(".count")
                verdict = scope[after["Next"]]
            else:
                assert state["ResultSelector"]["any_failed.$"] == "States.ArrayContains($, true)"
                verdict = after
            assert verdict["Type"] == "Choice"
            record = scope[verdict["Choices"][0]["Next"]]
            assert record["Parameters"]["error"] == "ItemsFailed"
            assert scope[record["Next"]]["Type"] == "Fail", "the summary must not send a second dead letter"
            # it names the failed items from what the Map saw, not from what their recorders got to write
            if "ItemReader" in state:
                assert record["Parameters"]["count.$"] == after["Parameters"]["count.$"]
            elif "items.$" in state["ItemSelector"]:  # groups: the items that did not commit
                spec = REGISTRY[machine["Comment"].removeprefix("Longhaul workflow ")]
                assert record["Parameters"]["count.$"] == f"$.steps.{spec.step(name).over}.count"
            else:
                assert record["Parameters"]["outcomes.$"] == f"{state['ResultPath']}.outcomes"
                assert state["ResultSelector"]["outcomes.$"] == "$"


def test_an_items_failure_path_never_fails_its_map(machines):
    """An item whose failure could not be recorded or dead-lettered (its recorder timed out) still yields its failure
    (`true`): every item runs, and the summary after the Map names it."""
    for machine in machines.values():
        checked = 0
        level = level_scopes(machine["States"])
        for name, state, scope in all_states(machine["States"]):
            in_a_map = not any(scope is own for own in level)
            recording = state["Type"] == "Task" and name.endswith((": record failure", ": dead letter"))
            if not in_a_map or not (recording or (state["Type"] == "Map" and name.endswith(": dead letters"))):
                continue
            if "Catch" not in state and len(scope) == 1:  # the send inside a group's dead letters Map: see the Map
                continue
            checked += 1
            (catch,) = state["Catch"]
            assert catch["ErrorEquals"] == ["States.ALL"], name
            assert scope[catch["Next"]]["Type"] == "Pass" and scope[catch["Next"]]["Result"] is True, name
        # a record and a dead letter (a group's: a Map of them) per copy of each fan-out's item processor (inline, and
        # a distributed batch's)
        spec = REGISTRY[machine["Comment"].removeprefix("Longhaul workflow ")]
        assert checked == 4 * len(spec.fan_out_steps)


def test_a_fan_out_chooses_inline_or_distributed_by_its_item_count(machines):
    """Up to INLINE_MAP_MAX_ITEMS items run in an inline Map over the list in the state; above, a Distributed Map reads
    the batched manifest from S3 (child executions of the same machine, none of them tolerated to fail unnoticed)."""
    for machine in machines.values():
        spec = REGISTRY[machine["Comment"].removeprefix("Longhaul workflow ")]
        states = workflow_level(machine["States"])
        for step in spec.fan_out_steps:
            over = f"$.steps.{spec.step(step).over}"
            choice = states[f"{step}: inline or distributed?"]
            above = next(c for c in choice["Choices"] if c.get("NumericGreaterThan") == limits.INLINE_MAP_MAX_ITEMS)
            assert above["Variable"] == f"{over}.count"
            # the inline Map is the Default, or (a container step, which skips an empty list) the rule above 0
            some = [c["Next"] for c in choice["Choices"] if c.get("NumericGreaterThan") == 0]
            distributed, inline = states[above["Next"]], states[some[0] if some else choice["Default"]]
            grouped = spec.step(step).grouped
            assert inline["ItemsPath"] == f"{over}.{'groups' if grouped else 'items'}"
            assert distributed["ItemReader"]["Resource"].endswith(":states:::s3:getObject")
            assert distributed["ItemReader"]["ReaderConfig"]["InputType"] == "JSON"
            assert distributed["ItemReader"]["Parameters"]["Key.$"] == f"{over}.manifest_key"
            assert distributed["ResultWriter"]["Resource"].endswith(":states:::s3:putObject")
            assert distributed["ResultWriter"]["Parameters"]["Prefix"].startswith("map-results/")  # it expires
            assert distributed.get("ToleratedFailurePercentage", 0) == 0  # the default: none tolerated
            config = distributed["ItemProcessor"]["ProcessorConfig"]
            assert config == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
            batch = distributed["ItemProcessor"]["States"][distributed["ItemProcessor"]["StartAt"]]
            if grouped:  # a child execution runs one group: the batch
                assert batch["Type"] == "Task" and batch["Parameters"]["items.$"] == "$.batch.items"
                assert batch["Parameters"]["input.$"] == "$.input"
                continue
            assert batch["Type"] == "Map" and batch["ItemsPath"] == "$.batch.items"
            assert batch["ItemSelector"]["input.$"] == "$.input"


def test_a_fan_out_of_one_item_runs_its_task_alone_and_fails_as_a_map_would(machines):
    """A list of one item skips the Map: its Task runs with the list's only item, goes straight on to the next step,
    and its failure is recorded and dead-lettered as an item's before the job fails with the fan-out's summary."""
    for machine in machines.values():
        spec = REGISTRY[machine["Comment"].removeprefix("Longhaul workflow ")]
        states = workflow_level(machine["States"])
        for step in (s.name for s in spec.steps if s.kind == StepKind.FAN_OUT):
            over = f"$.steps.{spec.step(step).over}"
            choice = states[f"{step}: inline or distributed?"]
            assert choice["Choices"][0]["Variable"] == f"{over}.count"
            one = next(c for c in choice["Choices"] if c.get("NumericEquals") == 1)
            task = states[one["Next"]]
            if spec.step(step).grouped:  # one group: its Task with the list's items
                assert one["Variable"] == f"{over}.group_count"
                assert one["Next"] == f"{step} (one group)" and task["Type"] == "Task"
                assert task["Parameters"]["items.$"] == f"{over}.items"
                assert task["Next"] == states[f"{step}: any group failed?"]["Default"]
                record = states[next(c for c in task["Catch"] if c["ErrorEquals"] == ["States.ALL"])["Next"]]
                assert record["Parameters"]["items.$"] == task["Parameters"]["items.$"]
                assert states[states[record["Next"]]["Next"]]["Parameters"]["error"] == ITEMS_FAILED
                continue
            assert one["Next"] == f"{step} (one item)" and task["Type"] == "Task"
            assert task["Parameters"]["item.$"] == f"States.ArrayGetItem({over}.items[*].index, 0)"
            assert task["Parameters"]["ref.$"] == f"States.ArrayGetItem({over}.items[*].ref, 0)"
            assert task["Next"] == states[f"{step}: any item failed?"]["Default"]  # no verdict to take
            record = states[next(c for c in task["Catch"] if c["ErrorEquals"] == ["States.ALL"])["Next"]]
            assert record["Parameters"]["item.$"] == task["Parameters"]["item.$"]
            summary = states[states[record["Next"]]["Next"]]  # record → dead letter → the fan-out's summary
            assert summary["Parameters"]["error"] == ITEMS_FAILED


def test_a_distributed_map_may_start_and_stop_only_its_own_children_and_read_the_artifacts(template):
    policies = resources(template, "AWS::IAM::Policy")
    machines = resources(template, "AWS::StepFunctions::StateMachine")
    workflows = {i: m for i, m in machines.items() if definition(m)["Comment"].startswith("Longhaul workflow ")}
    assert len(workflows) == len(REGISTRY)
    for logical_id, machine in workflows.items():
        spec = REGISTRY[definition(machine)["Comment"].removeprefix("Longhaul workflow ")]
        if not spec.fan_out_steps:  # no Map: no child executions to start, no manifest to read
            continue
        role = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        statements = [
            s
            for p in policies.values()
            if {"Ref": role} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        start = [s for s in statements if s["Action"] == "states:StartExecution"]
        assert start and all(s["Resource"] == {"Ref": logical_id} for s in start), logical_id
        children = [s for s in statements if "states:StopExecution" in s["Action"]]
        assert children and all(logical_id in json.dumps(s["Resource"]) for s in children)
        reads = [s for s in statements if "s3:GetObject" in json.dumps(s["Action"])]
        assert reads and all("StorageArtifacts" in json.dumps(s["Resource"]) for s in reads)


def test_the_api_may_read_the_map_runs_and_child_histories_of_each_workflow_for_a_jobs_cost(template):
    functions = resources(template, "AWS::Lambda::Function")
    apis = [f for f in functions.values() if f["Properties"]["Handler"] == "handlers.api.handler"]
    assert len(apis) == 2  # the tenants' routes and the operators'
    for api in apis:
        _assert_map_run_reads(template, api)


def _assert_map_run_reads(template: Any, api: Any) -> None:
    role = api["Properties"]["Role"]["Fn::GetAtt"][0]
    # CDK moves what does not fit in the role's inline policy into managed `OverflowPolicy`s: read both
    policies = {**resources(template, "AWS::IAM::Policy"), **resources(template, "AWS::IAM::ManagedPolicy")}
    statements = [
        s
        for p in policies.values()
        if {"Ref": role} in p["Properties"].get("Roles", [])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    machines = resources(template, "AWS::StepFunctions::StateMachine")
    workflows = [i for i, m in machines.items() if definition(m)["Comment"].startswith("Longhaul workflow ")]
    assert len(workflows) == len(REGISTRY)
    for action, resource in (("states:ListExecutions", ":mapRun:"), ("states:GetExecutionHistory", ":execution:")):
        granted = [
            json.dumps(r)
            for s in statements
            if s["Action"] == action
            for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        ]
        for logical_id in workflows:  # this machine's runs and children only: `<kind>:<machine name>/*`
            ours = [g for g in granted if resource in g and logical_id in g]
            assert any(g.endswith('/*"]]}') and not g.endswith(':*/*"]]}') for g in ours), (action, granted)
            # a job on a version (the `live` alias) runs Map runs whose ARNs carry it: `<kind>:<machine name>:1/…`
            assert any(g.endswith(':*/*"]]}') for g in ours), (action, granted)


def test_a_review_that_is_not_asked_for_is_a_choice_not_an_invocation(machines):
    """The job's review mode is in the state: `never` (or none, when the workflow's default is `never`) goes on to the
    next step from a Choice; only a review that may be needed invokes the lane."""
    for machine in machines.values():
        spec = REGISTRY[machine["Comment"].removeprefix("Longhaul workflow ")]
        review = spec.review_step
        if review is None or any(s.agent is not None and s.agent.on_limit == "review" for s in spec.agent_steps):
            continue
        states = machine["States"]
        choice = states[f"{review.name}: asked for?"]
        (asked,) = choice["Choices"]
        assert asked["Next"] == review.name and states[review.name]["Type"] == "Task"
        names = spec.step_names
        assert choice["Default"].startswith(names[names.index(review.name) + 1])


def test_the_authorizer_reads_api_key_items_only(template):
    functions = resources(template, "AWS::Lambda::Function")
    (authorizer,) = [f for f in functions.values() if f["Properties"]["Handler"] == "handlers.authorizer.handler"]
    role = authorizer["Properties"]["Role"]["Fn::GetAtt"][0]
    policies = {**resources(template, "AWS::IAM::Policy"), **resources(template, "AWS::IAM::ManagedPolicy")}
    statements = [
        s
        for p in policies.values()
        if {"Ref": role} in p["Properties"].get("Roles", [])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    reads = [s for s in statements if "dynamodb" in json.dumps(s["Action"])]
    assert reads and all(s["Action"] == "dynamodb:GetItem" for s in reads), reads
    assert all(s["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["APIKEY#*"]}} for s in reads), (
        reads
    )


def _pause_wait_returns_to(scope: dict[str, Any], state: dict[str, Any], name: str) -> None:
    """`state` (named `name`) catches `JobPaused` before its catch-all, into a steer-lane wait on a task token that
    returns to it, on an answer and on the wait's timeout alike."""
    catches = state.get("Catch", [])
    paused = [n for n, c in enumerate(catches) if c["ErrorEquals"] == ["JobPaused"]]
    assert paused, f"{name} does not catch JobPaused"
    every = [n for n, c in enumerate(catches) if c["ErrorEquals"] == ["States.ALL"]]
    assert not every or paused[0] < every[0], f"{name}: its catch-all comes before JobPaused"
    catch = catches[paused[0]]
    assert catch.get("ResultPath", "$") is None, f"{name}: a pause keeps the state as it was"
    wait = scope[catch["Next"]]
    assert wait["Type"] == "Task" and wait["Resource"].endswith(":lambda:invoke.waitForTaskToken"), name
    assert wait["Parameters"]["Payload"]["action"] == "pause", name
    assert wait["Next"] == name, f"{name}: its pause wait does not return to it"
    ended = [c for c in wait.get("Catch", []) if "States.Timeout" in c["ErrorEquals"]]
    assert ended and ended[0]["Next"] == name, f"{name}: a pause wait that timed out does not return to it"
    assert "TimeoutSeconds" in wait, name


def test_every_step_task_catches_job_paused_into_a_wait_that_returns_to_it(machines):
    for machine in machines.values():
        for name, state, scope in step_tasks(machine):
            in_map = name.endswith((" item", " group")) and not name.endswith(("(one item)", "(one group)"))
            if in_map:  # an item fails its Map with JobPaused: the Map waits (below)
                catch = next(c for c in state.get("Catch", []) if c["ErrorEquals"] == ["JobPaused"])
                fail = scope[catch["Next"]]
                assert fail["Type"] == "Fail" and fail["Error"] == "JobPaused", name
                continue
            _pause_wait_returns_to(scope, state, name)
        for name, state, scope in all_states(machine["States"]):
            if state["Type"] == "Map" and "Fan-out of" in state.get("Comment", ""):
                _pause_wait_returns_to(scope, state, name)


def test_rate_limited_is_retried_first_longer_and_further_apart(machines):
    for machine in machines.values():
        for name, state, _ in all_states(machine["States"]):
            if state["Type"] != "Task":
                continue
            first = state["Retry"][0]
            assert first["ErrorEquals"] == ["RateLimitedError"], name
            assert first["MaxAttempts"] == limits.RATE_LIMITED_RETRY_MAX_ATTEMPTS > limits.RETRY_MAX_ATTEMPTS, name
            assert first["IntervalSeconds"] == limits.RATE_LIMITED_RETRY_INTERVAL_SECONDS, name
            assert first["MaxDelaySeconds"] == limits.RATE_LIMITED_RETRY_MAX_DELAY_SECONDS, name
