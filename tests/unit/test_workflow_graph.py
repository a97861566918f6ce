"""A job's workflow graph (`longhaul.api.graph`): the definition's own states, each with the job's status as its
execution's history says, and each fan-out's items from the job's step records."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from longhaul.api.graph import GraphNode, derive, fan_out_progress, parse_definition, step_of
from longhaul.core.contracts import JobStatus
from longhaul.core.ports import ExecutionStatus, HistoryEvent
from longhaul.core.records import StepRecord
from longhaul.workflows import REGISTRY

STEPS = ("load", "split", "review", "publish")
WAIT = "arn:aws:states:::lambda:invoke.waitForTaskToken"
# A workflow as the builder shapes one: a step, a fan-out behind a Choice (inline or distributed), a review loop, a
# publish; every Task catches into its failure path (record failure → Fail) and a stop into `Job stopped`.
DEFINITION: dict[str, Any] = {
    "StartAt": "load",
    "States": {
        "load": {"Type": "Task", "Resource": "arn:fn", "Next": "split: inline or distributed?", "Catch": [
            {"ErrorEquals": ["CancelledError"], "Next": "Job stopped"},
            {"ErrorEquals": ["States.ALL"], "Next": "load: record failure"}]},
        "split: inline or distributed?": {"Type": "Choice", "Default": "split",
                                          "Choices": [{"Variable": "$.n", "NumericGreaterThan": 40,
                                                       "Next": "split (distributed)"}]},
        "split": {"Type": "Map", "Next": "split: any item failed?", "ItemProcessor": {"StartAt": "split item",
                  "States": {"split item": {"Type": "Task", "Resource": "arn:fn", "End": True}}}},
        "split (distributed)": {"Type": "Map", "Next": "split: any item failed?", "ItemProcessor": {
            "StartAt": "split batch", "States": {"split batch": {"Type": "Pass", "End": True}}}},
        "split: any item failed?": {"Type": "Choice", "Default": "review",
                                    "Choices": [{"Variable": "$.failed", "BooleanEquals": True,
                                                 "Next": "split items: record failure"}]},
        "split items: record failure": {"Type": "Task", "Resource": "arn:fn", "Next": "Job failed"},
        "review": {"Type": "Task", "Resource": "arn:fn", "Next": "review: decided?"},
        "review: decided?": {"Type": "Choice", "Default": "publish", "Choices": [
            {"Variable": "$.next", "StringEquals": "wait", "Next": "review: wait"}]},
        "review: wait": {"Type": "Task", "Resource": WAIT, "Next": "review: decided?", "Catch": [
            {"ErrorEquals": ["States.Timeout"], "Next": "review: decided?"}]},
        "publish": {"Type": "Task", "Resource": "arn:fn", "Next": "Job completed", "Catch": [
            {"ErrorEquals": ["States.ALL"], "Next": "publish: record failure"}]},
        "load: record failure": {"Type": "Task", "Resource": "arn:fn", "Next": "Job failed"},
        "publish: record failure": {"Type": "Task", "Resource": "arn:fn", "Next": "Job failed"},
        "Job stopped": {"Type": "Fail", "Error": "JobStopped"},
        "Job failed": {"Type": "Fail", "Error": "JobFailed"},
        "Job completed": {"Type": "Succeed"},
    },
}  # fmt: skip
TYPES = {name: state["Type"] for name, state in DEFINITION["States"].items()}


def history(*path: str, inside: str | None = None) -> list[HistoryEvent]:
    """The events of passing through `path` (each state entered, then left), then entering `inside` and staying."""
    events: list[HistoryEvent] = []
    for name in path:
        kind = TYPES[name]
        events.append(HistoryEvent(id=len(events) + 1, type=f"{kind}StateEntered", state=name))
        if kind == "Map":  # an iteration's own states come in between, under their own names
            events.append(HistoryEvent(id=len(events) + 1, type="TaskStateEntered", state="split item"))
            events.append(HistoryEvent(id=len(events) + 1, type="TaskStateExited", state="split item"))
        if kind != "Fail":
            events.append(HistoryEvent(id=len(events) + 1, type=f"{kind}StateExited", state=name))
    if inside is not None:
        events.append(HistoryEvent(id=len(events) + 1, type=f"{TYPES[inside]}StateEntered", state=inside))
    return events


def graph(
    events: list[HistoryEvent],
    execution: ExecutionStatus,
    job: JobStatus,
    failed_fan_outs: frozenset[str] = frozenset(),
) -> tuple[dict[str, GraphNode], set[tuple[str, str]]]:
    nodes, edges = derive(
        parse_definition(json.dumps(DEFINITION)),
        events,
        steps=STEPS,
        execution_status=execution,
        job_status=job,
        failed_fan_outs=failed_fan_outs,
    )
    return {n.name: n for n in nodes}, {(e.source, e.target) for e in edges if e.taken}


def statuses(nodes: dict[str, GraphNode]) -> dict[str, str]:
    return {name: node.status for name, node in nodes.items()}


HAPPY = ("load", "split: inline or distributed?", "split", "split: any item failed?", "review", "review: decided?")


def test_a_completed_job_marks_the_states_it_passed_through_done_and_the_others_skipped():
    events = history(*HAPPY, "publish", "Job completed")

    nodes, taken = graph(events, ExecutionStatus.SUCCEEDED, JobStatus.COMPLETED)

    assert {n for n, s in statuses(nodes).items() if s == "done"} == {*HAPPY, "publish", "Job completed"}
    assert {n for n, s in statuses(nodes).items() if s == "skipped"} == set(DEFINITION["States"]) - {
        *HAPPY,
        "publish",
        "Job completed",
    }
    assert ("split: inline or distributed?", "split") in taken and ("load", "Job stopped") not in taken
    assert "split item" not in nodes  # an item's own states are the Map's, not the graph's


def test_every_state_is_one_node_with_its_type_and_step_and_the_failure_path_is_marked():
    nodes, _ = graph([], ExecutionStatus.NOT_STARTED, JobStatus.QUEUED)

    assert set(nodes) == set(DEFINITION["States"]) and all(n.status == "pending" for n in nodes.values())
    assert nodes["split (distributed)"].type == "Map" and nodes["split (distributed)"].step == "split"
    assert nodes["split items: record failure"].step == "split" and nodes["Job failed"].step is None
    assert nodes["review: wait"].waits_for_token and not nodes["review"].waits_for_token
    reached_only_by_catch = {n for n, node in nodes.items() if node.failure_path}
    assert reached_only_by_catch == {"load: record failure", "publish: record failure", "Job stopped"}


def test_a_running_job_is_running_where_it_is_and_pending_ahead():
    events = history("load", inside="split: inline or distributed?")

    nodes, _ = graph(events, ExecutionStatus.RUNNING, JobStatus.RUNNING)

    assert nodes["load"].status == "done"
    assert nodes["split: inline or distributed?"].status == "running"
    assert nodes["publish"].status == "pending" and nodes["split (distributed)"].status == "pending"


def test_a_job_in_review_waits_in_the_task_token_state():
    events = history(*HAPPY, inside="review: wait")

    waiting, _ = graph(events, ExecutionStatus.RUNNING, JobStatus.WAITING_FOR_REVIEW)
    decided, _ = graph(events, ExecutionStatus.RUNNING, JobStatus.RUNNING)

    assert waiting["review: wait"].status == "waiting" and decided["review: wait"].status == "running"


def test_a_loop_counts_each_entry_and_a_timeout_it_catches_as_part_of_its_flow_is_no_failure():
    events = history(*HAPPY, "review: wait", "review: decided?", "review: wait", "review: decided?", "publish")

    nodes, taken = graph(events, ExecutionStatus.RUNNING, JobStatus.RUNNING)

    assert nodes["review: decided?"].entered == 3 and nodes["review: wait"].entered == 2
    assert nodes["review: wait"].status == "done" and nodes["publish"].status == "done"
    assert ("review: wait", "review: decided?") in taken


def test_a_state_left_through_its_catch_failed_and_the_failure_path_shows_what_ran():
    events = history("load", "load: record failure", "Job failed")

    nodes, taken = graph(events, ExecutionStatus.FAILED, JobStatus.FAILED)

    assert nodes["load"].status == "failed"
    assert nodes["load: record failure"].status == "done" and nodes["Job failed"].status == "failed"
    assert nodes["split"].status == "skipped"
    assert ("load", "load: record failure") in taken


def test_a_stopped_job_shows_where_it_stopped():
    caught = history("load", "Job stopped")
    aborted = history("load", inside="split: inline or distributed?")

    by_catch, _ = graph(caught, ExecutionStatus.FAILED, JobStatus.CANCELLED)
    by_abort, _ = graph(aborted, ExecutionStatus.ABORTED, JobStatus.EXPIRED)
    crashed, _ = graph(aborted, ExecutionStatus.ABORTED, JobStatus.FAILED)

    assert by_catch["load"].status == "stopped" and by_catch["Job stopped"].status == "stopped"
    assert by_abort["split: inline or distributed?"].status == "stopped"
    assert crashed["split: inline or distributed?"].status == "failed"


def test_a_fan_out_whose_items_failed_is_failed_though_its_map_ended():
    events = history(*HAPPY[:4], "split items: record failure", "Job failed")

    nodes, _ = graph(events, ExecutionStatus.FAILED, JobStatus.FAILED, failed_fan_outs=frozenset({"split"}))

    assert nodes["split"].status == "failed" and nodes["split: any item failed?"].status == "done"
    assert nodes["split (distributed)"].status == "skipped"


def record(step: str, item: int | None, status: str, output: dict[str, Any] | None = None) -> StepRecord:
    return StepRecord(step=step, item=item, status=status, output=output, updated_at=datetime(2025, 1, 1, tzinfo=UTC))


def test_fan_out_progress_counts_committed_and_failed_items_of_the_producers_list():
    spec = REGISTRY["document-analysis"]
    records = [
        record("list_documents", None, "succeeded", {"documents": {"count": 1000, "manifest_key": "k"}}),
        *(record("parse_documents", i, "succeeded") for i in range(312)),
        record("parse_documents", 312, "failed"),
        record("parse_documents", 313, "running"),
    ]

    progress = {p.step: p for p in fan_out_progress(spec, records)}

    assert progress["parse_documents"].model_dump() == {
        "step": "parse_documents",
        "unit": "document",
        "completed": 312,
        "failed": 1,
        "total": 1000,
    }
    assert progress["extract_evidence"].total is None and progress["extract_evidence"].completed == 0


@pytest.mark.parametrize(
    ("state", "step"),
    [
        ("parse_documents", "parse_documents"),
        ("parse_documents (distributed)", "parse_documents"),
        ("parse_documents: inline or distributed?", "parse_documents"),
        ("parse_documents items: record failure", "parse_documents"),
        ("review: wait", "review"),
        ("Job completed", None),
    ],
)
def test_a_state_belongs_to_the_step_it_is_named_after(state: str, step: str | None):
    assert step_of(state, REGISTRY["document-analysis"].step_names) == step


def test_a_finished_jobs_execution_may_still_run_its_last_states():
    events = history(*HAPPY, inside="publish")

    nodes, _ = graph(events, ExecutionStatus.RUNNING, JobStatus.COMPLETED)

    assert nodes["publish"].status == "running" and nodes["Job completed"].status == "pending"
