"""A review under a tenant's redaction policy: a `reviewer` sees the draft and evidence with placeholders, a
`pii_reviewer` sees them as they are, and an edit that kept a placeholder gets its value back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from longhaul import services as wiring
from longhaul.api.reviews import ReviewService
from longhaul.core.auth import Principal
from longhaul.core.budgets import TenantPolicy
from longhaul.core.records import ReviewRecord
from longhaul.review.contracts import DecisionRequest, ReviewMaterial
from longhaul.storage.artifacts import work_key

JOB = "job_rv_1"
IBAN = "DE89 3704 0044 0532 0130 00"
DRAFT = {"answer": f"Pay {IBAN}, ask jane@acme.example.", "claims": []}


def _review(s: wiring.Services) -> ReviewRecord:
    material = ReviewMaterial.model_validate(
        {
            "draft": DRAFT,
            "evidence": [{"document": "d1", "page": 1, "quote": f"IBAN {IBAN}", "verified": True}],
        }
    )
    key = s.artifacts.put_json(work_key(JOB, "review", "material.json"), material)
    now = datetime.now(UTC)
    record = ReviewRecord(
        review_id="rev_000000000000000000000001",
        job_id=JOB,
        tenant_id="tenant-a",
        workflow="document-analysis",
        step="review",
        since=now,
        deadline=now + timedelta(hours=1),
        deadline_seconds=3600,
        assignee_group="analysts",
        secondary_group="analysis-leads",
        material_key=key,
    )
    return s.reviews.open(record)


def test_a_reviewer_sees_placeholders_and_a_pii_reviewer_the_values(services: wiring.Services) -> None:
    services.budgets.put_policy("tenant-a", TenantPolicy.model_validate({"redact": ["iban", "email"]}))
    review = _review(services)
    reviews = ReviewService(services)

    seen = reviews.detail(Principal(tenant_id="tenant-a", role="reviewer"), review.review_id)
    assert seen.draft["answer"] == "Pay <IBAN_1>, ask <EMAIL_1>."
    assert seen.evidence[0].quote == "IBAN <IBAN_1>" and seen.redacted == ["email", "iban"]

    cleared = reviews.detail(Principal(tenant_id="tenant-a", role="pii_reviewer"), review.review_id)
    assert cleared.draft == DRAFT and cleared.evidence[0].quote == f"IBAN {IBAN}" and cleared.redacted is None


def test_an_edit_that_kept_a_placeholder_gets_its_value_back(services: wiring.Services) -> None:
    services.budgets.put_policy("tenant-a", TenantPolicy.model_validate({"redact": ["iban", "email"]}))
    review = _review(services)
    request = DecisionRequest.model_validate({"decision": "edit", "edits": {"answer": "Pay <IBAN_1> only."}})

    key = ReviewService(services)._edits(Principal(tenant_id="tenant-a", role="reviewer"), review, request)

    assert key is not None and services.artifacts.get_json(key)["answer"] == f"Pay {IBAN} only."
