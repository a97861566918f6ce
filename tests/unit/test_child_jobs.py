"""Jobs that start jobs, on pure code: `when=` predicates (what the Choice state decides, evaluated alike in Python;
serialisable), what a spec refuses about child steps and branches (a later step's output, a child or a skippable step
publishing the result, an unknown child workflow), and a request's `then` (its references resolved by JSON Pointer;
validated against the next workflow's input with each reference as a placeholder)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from longhaul.api.chains import Unresolved, point, pointer_problem, references, resolve, then_problems
from longhaul.core.contracts import ThenRequest
from longhaul.engine.spec import Registry, StepKind, WorkflowSpec, child, output, step
from longhaul.workflows import JOB_REQUEST, REGISTRY

DEPLOYED = tuple(REGISTRY)
JOB = "job_" + "a" * 28


class Nothing(BaseModel):
    pass


def spec(*steps: Any, name: str = "test-flow") -> WorkflowSpec:
    return WorkflowSpec(
        name=name,
        description="a test workflow",
        input_model=Nothing,
        result_model=Nothing,
        steps=steps,
        domain="tests.unit.test_child_jobs",
    )


# ---------------------------------------------------------------------------------------------- `when=`


def test_a_predicate_holds_as_the_choice_decides_and_a_missing_value_is_false() -> None:
    found = output("check").path("discrepancies").gt(0) & output("check").path("resolve").is_true()
    assert found.holds({"check": {"discrepancies": 2, "resolve": True}})
    assert not found.holds({"check": {"discrepancies": 0, "resolve": True}})
    assert not found.holds({"check": {"discrepancies": 2}}), "a missing value makes its leaf false"
    assert not found.holds({"check": {"discrepancies": "2", "resolve": True}}), "a string is not a number"
    assert (~found).holds({"check": {}})
    either = output("a").path("n").le(1) | output("a").path("tag").eq("x")
    assert either.holds({"a": {"n": 5, "tag": "x"}}) and not either.holds({"a": {"n": 5, "tag": "y"}})
    assert output("a").path("tag").ne("x").holds({"a": {"tag": 3}}), "another type is not equal"
    assert not output("a").path("tag").ne("x").holds({"a": {}}), "a missing value is false, `ne` too"
    assert output("a").path("deep.flag").is_false().holds({"a": {"deep": {"flag": False}}})


def test_a_predicate_is_serialisable_and_names_the_steps_it_reads() -> None:
    found = output("check").path("n").gt(0) & ~output("parse").path("ok").is_true()
    assert found.as_json() == {
        "all": [
            {"path": "check.n", "test": "gt", "value": 0},
            {"not": [{"path": "parse.ok", "test": "is_true"}]},
        ]
    }
    assert found.steps == {"check", "parse"}


def test_a_predicate_names_a_field_by_names_and_dots() -> None:
    with pytest.raises(ValueError, match="name the field"):
        output("check").gt(0)
    with pytest.raises(ValueError, match="names separated by dots"):
        output("check").path("a[0]")


def test_a_branch_reads_earlier_steps_only_and_a_step_that_always_runs_publishes() -> None:
    with pytest.raises(ValueError, match="branches on"):
        spec(step("a", when=output("b").path("n").gt(0)), step("b"))
    with pytest.raises(ValueError, match="publishes the result"):
        spec(child("a", workflow="other", input="build"))
    flow = spec(step("a"), step("publish"), step("maybe", when=output("a").path("n").gt(0)))
    assert flow.result_step == "publish" and flow.last_step == "maybe"


def test_only_a_plain_or_child_step_may_branch_and_a_child_step_has_its_policy() -> None:
    made = child("c", workflow="other", input="build", when=output("a").path("n").gt(0))
    assert made.kind == StepKind.CHILD and made.child is not None and made.child.workflow == "other"
    from longhaul.engine.spec import StepSpec

    with pytest.raises(ValueError, match="child policy"):
        StepSpec("c", kind=StepKind.CHILD)


def test_a_child_steps_workflow_must_be_another_installed_one() -> None:
    parent = spec(step("a"), child("c", workflow="nowhere", input="build"))
    with pytest.raises(ValueError, match="starts unknown 'nowhere'"):
        Registry(parent)
    Registry(parent, spec(step("b"), name="nowhere"))  # (known: fine)


def test_invoice_reconciliation_disputes_in_a_child_when_asked_and_something_was_found() -> None:
    recon = REGISTRY["invoice-reconciliation"]
    disputes = recon.step("resolve_disputes")
    assert disputes.kind == StepKind.CHILD and disputes.child and disputes.child.workflow == "dispute-resolution"
    assert disputes.when is not None
    assert disputes.when.holds({"check_invoices": {"discrepancies": 3, "resolve_disputes": True}})
    assert not disputes.when.holds({"check_invoices": {"discrepancies": 3}}), "not asked for"
    assert not disputes.when.holds({"check_invoices": {"discrepancies": 0, "resolve_disputes": True}})
    assert recon.result_step == "publish_report"
    other = {name: s for name, s in REGISTRY.items() if name != "invoice-reconciliation"}
    assert all(not s.child_steps and all(x.when is None for x in s.steps) for s in other.values())


# ---------------------------------------------------------------------------------------------- `then`


def test_references_resolve_by_json_pointer() -> None:
    result = {"job_id": JOB, "invoices": [{"document": "a/b.txt", "n": 1}], "~odd/key": 2}
    template = {"id": {"$result": "/job_id"}, "docs": [{"$result": "/invoices/0/document"}], "k": 1}
    assert resolve(template, result) == {"id": JOB, "docs": ["a/b.txt"], "k": 1}
    assert point(result, "/~0odd~1key") == 2 and point(result, "") == result
    assert references(template) == [(("id",), "/job_id"), (("docs", 0), "/invoices/0/document")]
    with pytest.raises(Unresolved):
        point(result, "/invoices/3/document")
    assert pointer_problem("job_id") and pointer_problem("/a~2") and pointer_problem("/a~1b") is None


def test_then_is_checked_against_the_next_workflows_input_with_references_as_placeholders() -> None:
    good = ThenRequest(
        workflow="dispute-resolution",
        input={"reconciliation_job_id": {"$result": "/job_id"}, "default_contact": "ap@buyer.example"},
    )
    assert then_problems(good, DEPLOYED) == []
    bad = ThenRequest(
        workflow="dispute-resolution",
        input={"reconciliation_job_id": {"$result": "job_id"}, "default_contact": "nope", "extra": 1},
    )
    paths = {tuple(p["loc"]): p["type"] for p in then_problems(bad, DEPLOYED)}
    assert paths == {
        ("body", "then", "input", "reconciliation_job_id", "$result"): "json_pointer",
        ("body", "then", "input", "default_contact"): "string_pattern_mismatch",
        ("body", "then", "input", "extra"): "extra_forbidden",
    }
    unknown = then_problems(ThenRequest(workflow="nowhere", input={}), DEPLOYED)
    assert [p["loc"] for p in unknown] == [["body", "then", "workflow"]]
    assert then_problems(good, ["document-analysis"])[0]["type"] == "unknown_workflow", "not deployed here"


def test_a_request_may_chain_then_and_a_reconciliation_may_ask_for_disputes() -> None:
    request = JOB_REQUEST.validate_python(
        {
            "workflow": "invoice-reconciliation",
            "input": {
                "contract": {"name": "c.txt", "text": "x"},
                "invoices": [{"name": "i.txt", "text": "y"}],
                "resolve_disputes": {"default_contact": "ap@buyer.example"},
            },
            "then": {"workflow": "document-analysis", "input": {"question": {"$result": "/summary"}}},
        }
    )
    assert request.then is not None and request.then.workflow == "document-analysis"
    assert request.input.resolve_disputes.default_contact == "ap@buyer.example"


# ---------------------------------------------------------------------------------------------- a child's end


def _job(job_id: str, **extra: Any) -> Any:
    from longhaul.storage.submissions import NewJob

    return NewJob(
        job_id=job_id,
        tenant_id="tenant-a",
        workflow="dispute-resolution",
        input_key=f"work/{job_id}/input.json",
        payload_hash="hash",
        model="offline:test",
        estimated_sla_seconds=42,
        total_steps=5,
        **extra,
    )


def test_a_childs_end_resumes_its_parents_wait_once_and_a_job_without_a_parent_tells_nobody(services: Any) -> None:
    import dataclasses

    from longhaul.api.children import job_finished, wait_name
    from longhaul.core.contracts import JobStatus
    from tests.unit.fakes import FakeTokens

    tokens = FakeTokens(waiting={"parent-token"})
    wired = dataclasses.replace(services, tokens=tokens)
    told: list[str] = []
    services.jobs.on_finished = lambda job: (told.append(job.job_id), job_finished(wired, job))
    # Given a parent waiting on its child step's token, its child, and a job of nobody's
    services.jobs.create_job(_job("job_parent"))
    services.jobs.create_job(_job("job_child", parent_job_id="job_parent", parent_step="resolve_disputes"))
    services.jobs.create_job(_job("job_alone"))
    services.jobs.set_wait_token("job_parent", wait_name("resolve_disputes"), "parent-token")

    # When the child and the other job end
    for job_id in ("job_child", "job_alone"):
        services.jobs.transition(job_id, JobStatus.RUNNING, event="job_started")
        services.jobs.transition(job_id, JobStatus.FAILED, event="job_failed")

    # Then the parent's wait was resumed with the child's outcome, and only the child told anyone
    assert tokens.succeeded == [("parent-token", {"child_job_id": "job_child", "status": "failed"})]
    assert told == ["job_child"]
