"""Every alarm the stack declares, asserted: what it watches (namespace, metric, dimensions, statistic, period), when it
fires (threshold, comparison, evaluation periods, missing data) and whom it tells (the alarm topic).

The table below is keyed by each alarm's stable id (its logical id without CDK's hash suffix) and compared both ways:
an alarm added to the stack without its row here fails, and so does a row whose alarm is gone. The alarms the README
and the manual name (SLA queue wait, cost anomaly, breaker open, daily allowance, stuck jobs, review wait) are rows.
Each row also names its page in the manual (`docs/operating/alarms/`), which must exist.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from longhaul.core.observability import NAMESPACE
from longhaul.core.settings import Settings
from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import ROOT, resources, synthesize

HASH = re.compile(r"[0-9A-F]{8}$")
GE, GT = "GreaterThanOrEqualToThreshold", "GreaterThanThreshold"
ALARM_PAGES = ROOT / "docs" / "operating" / "alarms"


@dataclass(frozen=True)
class Expected:
    namespace: str
    metric: str
    dimensions: dict[str, Any]  # a name → its value, or the stable id of the resource a Ref/GetAtt names
    statistic: str
    period: int
    threshold: float
    comparison: str
    page: str
    evaluation_periods: int = 1
    missing: str = "notBreaching"
    anomaly: bool = field(default=False)  # an anomaly-detection band alarm (metric math: the band's expression)


@pytest.fixture(scope="module")
def bedrock_template(bedrock_assembly: Path) -> dict[str, Any]:
    return json.loads(next(bedrock_assembly.glob("Longhaul-prod.template.json")).read_text())


def _stable(logical_id: str) -> str:
    return HASH.sub("", logical_id)


def _dlq(queue: str, page: str, period: int = 60) -> Expected:
    return Expected("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": queue}, "Maximum", period, 1, GE,
                    page)  # fmt: skip


def _workflow_id(name: str) -> str:
    return "".join(part.title() for part in name.split("-"))


# The dead-letter queues of each workflow's steps (and its compensation lane): one alarm each. A new step adds a row.
STEP_DLQS = {
    "document-analysis": ("list_documents", "parse_documents", "plan_ocr", "ocr_pages", "build_index",
                          "ocr_and_index", "retrieve_passages", "extract_evidence", "draft_answer",
                          "verify_citations", "review", "publish_result"),
    "dispute-resolution": ("load_reconciliation", "draft_notices", "review", "send_notices", "publish_result",
                           "compensation"),
    "invoice-reconciliation": ("parse_documents", "extract_invoices", "price_list", "check_invoices",
                               "summarize_findings", "review", "publish_report", "resolve_disputes"),
}  # fmt: skip
SLA_TARGETS = {"interactive": 60, "standard": 600, "batch": 3600}  # QueueWaitSeconds p90 targets (s)
INTAKE_WAIT = {"interactive": 300, "standard": 1800, "batch": 21600}  # the oldest intake message's age (s)
REVIEW_WORKFLOWS = ("document-analysis", "dispute-resolution", "invoice-reconciliation")


def expected_alarms(providers: tuple[str, ...], *, bedrock: bool) -> dict[str, Expected]:
    review_limit = Settings.model_fields["review_wait_alarm_minutes"].default * 60
    table: dict[str, Expected] = {"WebhooksDeadLettersAlarm": _dlq("WebhooksDeadLetters", "webhooks-dead")}
    for workflow, steps in STEP_DLQS.items():
        w = _workflow_id(workflow)
        for step in steps:
            s = step.replace("_", "")
            table[f"Workflows{w}{s}dlqalarm"] = _dlq(f"Workflows{w}{s}dlq", "dead-letters")
        table[f"Workflows{w}ExecutionsFailed"] = Expected(
            "AWS/States", "ExecutionsFailed", {"StateMachineArn": f"Workflows{w}StateMachine"}, "Sum", 300, 1, GE,
            "executions-failed",
        )  # fmt: skip
        plain = workflow.replace("-", "")
        table[f"ObservabilityCostAnomaly{plain}"] = Expected(
            NAMESPACE, "ModelCostUSD", {"workflow": workflow}, "Sum", 300, 0, "GreaterThanUpperThreshold",
            "cost-anomaly", evaluation_periods=3, anomaly=True,
        )  # fmt: skip
        if workflow in REVIEW_WORKFLOWS:
            table[f"ObservabilityReviewWait{plain}"] = Expected(
                NAMESPACE, "ReviewWaitSeconds", {"workflow": workflow}, "p50", 3600, review_limit, GT, "review-wait"
            )
    for sla_class, target in SLA_TARGETS.items():
        title = sla_class.title()
        table[f"Admission{title}DeadLettersAlarm"] = _dlq(f"Admission{title}DeadLetters", "intake-dead-letters", 300)
        table[f"Admission{title}WaitAlarm"] = Expected(
            "AWS/SQS", "ApproximateAgeOfOldestMessage", {"QueueName": f"Admission{title}Intake"}, "Maximum", 300,
            INTAKE_WAIT[sla_class], GE, "queue-wait",
        )  # fmt: skip
        table[f"ObservabilityQueueWait{sla_class}"] = Expected(
            NAMESPACE, "QueueWaitSeconds", {"sla_class": sla_class}, "p90", 300, target, GT, "queue-wait",
            evaluation_periods=3,
        )  # fmt: skip
    table["ObservabilityTenantAllowanceReached"] = Expected(
        NAMESPACE, "TenantDailyAllowanceReached", {}, "Sum", 300, 1, GE, "daily-allowance"
    )
    table["ObservabilityStuckJobs"] = Expected(NAMESPACE, "StuckJobs", {}, "Sum", 300, 1, GE, "stuck-jobs")
    for provider in providers:
        table[f"ObservabilityBreakerOpen{provider}"] = Expected(
            NAMESPACE, "BreakerTransitions", {"provider": provider, "state": "open"}, "Sum", 300, 1, GE, "breaker-open"
        )
    if bedrock:
        table["ObservabilityModelNotConfigured"] = Expected(
            NAMESPACE, "PlatformMisconfigured", {"provider": "bedrock"}, "Sum", 300, 1, GE, "model-not-configured"
        )
    return table


def _dimension_value(value: Any) -> Any:
    if isinstance(value, dict) and "Ref" in value:
        return _stable(value["Ref"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return _stable(value["Fn::GetAtt"][0])
    return value


def _declared(props: dict[str, Any]) -> Expected:
    """An alarm of the template as a row of the table (`page` left blank)."""
    if "Metrics" in props:  # metric math: the anomaly band over one metric
        (stat,) = [m["MetricStat"] for m in props["Metrics"] if "MetricStat" in m]
        (band,) = [m["Expression"] for m in props["Metrics"] if "Expression" in m]
        assert band.startswith("ANOMALY_DETECTION_BAND(") and props["ThresholdMetricId"]
        metric, statistic, period, threshold = stat["Metric"], stat["Stat"], stat["Period"], 0
    else:
        metric, period, threshold = props, props["Period"], props["Threshold"]
        statistic = props.get("Statistic") or props["ExtendedStatistic"]
    return Expected(
        metric["Namespace"],
        metric["MetricName"],
        {d["Name"]: _dimension_value(d["Value"]) for d in metric.get("Dimensions", [])},
        statistic,
        period,
        threshold,
        props["ComparisonOperator"],
        "",
        props["EvaluationPeriods"],
        props["TreatMissingData"],
        "Metrics" in props,
    )


def _check(template: dict[str, Any], expected: dict[str, Expected]) -> None:
    (topic_id,) = resources(template, "AWS::SNS::Topic")
    alarms = {_stable(k): v["Properties"] for k, v in resources(template, "AWS::CloudWatch::Alarm").items()}
    assert len(alarms) == len(resources(template, "AWS::CloudWatch::Alarm")), "two alarms share a stable id"
    assert sorted(set(alarms) - set(expected)) == [], "alarms without their row in this test's table"
    assert sorted(set(expected) - set(alarms)) == [], "rows of this test's table whose alarm the stack lacks"
    for key, props in alarms.items():
        row = expected[key]
        assert _declared(props) == Expected(**{**row.__dict__, "page": ""}), key
        assert props.get("AlarmActions") == [{"Ref": topic_id}], f"{key} tells no one"
        assert props.get("AlarmDescription"), f"{key} says nothing about what it means"


def test_every_alarm_of_the_local_template_is_asserted(template: dict[str, Any]) -> None:
    _check(template, expected_alarms(("offline",), bedrock=False))


def test_every_alarm_of_a_bedrock_deployment_is_asserted(bedrock_template: dict[str, Any]) -> None:
    _check(bedrock_template, expected_alarms(("bedrock",), bedrock=True))


def test_the_table_knows_every_workflow_and_its_review_step() -> None:
    assert set(STEP_DLQS) == set(REGISTRY)
    assert set(REVIEW_WORKFLOWS) == {name for name, spec in REGISTRY.items() if spec.review_step is not None}


@pytest.mark.parametrize("page", sorted({row.page for row in expected_alarms(("bedrock",), bedrock=True).values()}))
def test_each_alarm_has_its_page_in_the_manual_linked_from_the_runbooks(page: str) -> None:
    text = (ALARM_PAGES / f"{page}.md").read_text()
    assert all(heading in text for heading in ("## What it means", "## What to check", "## What to do")), page
    assert f"alarms/{page}.md" in (ROOT / "docs" / "operating" / "runbooks.md").read_text()
    assert f"operating/alarms/{page}.md" in (ROOT / "mkdocs.yml").read_text()


def test_the_stuck_and_review_wait_limits_are_settings(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`-c longhaul:stuck_after_minutes` and `-c longhaul:review_wait_alarm_minutes` reach the sweep's setting and the
    review-wait alarm's threshold."""
    out = synthesize(
        tmp_path_factory.mktemp("cdk.out.limits"),
        {"longhaul:stuck_after_minutes": "40", "longhaul:review_wait_alarm_minutes": "30"},
    )
    template = json.loads(next(out.glob("Longhaul-*.template.json")).read_text())
    alarms = {_stable(k): v["Properties"] for k, v in resources(template, "AWS::CloudWatch::Alarm").items()}
    assert alarms["ObservabilityReviewWaitdocumentanalysis"]["Threshold"] == 30 * 60
    assert "40 minutes" in alarms["ObservabilityStuckJobs"]["AlarmDescription"]
    functions = resources(template, "AWS::Lambda::Function").values()
    sweeper = [f for f in functions if f["Properties"].get("Handler", "").endswith("sweep")]
    assert sweeper, "no sweep function found"
    for function in sweeper:
        assert function["Properties"]["Environment"]["Variables"]["LONGHAUL_STUCK_AFTER_MINUTES"] == "40"
