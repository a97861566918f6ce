"""Scenarios: a tenant disputes what its invoice reconciliation found. An agent drafts one notice per vendor with
discrepancies citing every disputed line, a reviewer approves, an agent sends each notice once (the in-memory SES
keeps them) and remembers the dispute and the agreed prices; a second dispute with the same vendor finds the first
in memory; another tenant's memory is never visible; operators list and delete a tenant's memory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local.platform import LocalPlatform
from tests.faults.helpers import assert_consistent
from tests.workflows.conftest import Client
from tests.workflows.disputes import (
    CONTACTS,
    LUMEN_HW,
    ORION,
    ORION_1,
    ORION_2,
    VEGA,
    VEGA_CO,
    approve,
    dispute_request,
    messages_of,
    reconcile,
    sent_messages,
)

SOURCES = {"orion-1.txt": ORION_1, "orion-2.txt": ORION_2, "vega.txt": VEGA}


@pytest.fixture(scope="module")
def disputed(platform: LocalPlatform) -> dict[str, Any]:
    """One reconciliation of the three vendors, disputed once and approved (run once for the scenarios below)."""
    alpha, reviewer = Client(platform, "alpha"), Client(platform, "alpha-reviewer")
    # What alpha's memory holds counts below: start from none (other modules' disputes, a child job's, share it).
    assert _delete(platform, "/v1/ops/tenants/alpha/memory").status_code == 200
    reconciliation = reconcile(alpha)
    job_id = alpha.submit(dispute_request(reconciliation))
    job = approve(alpha, reviewer, job_id)
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    return {"job": job, "result": result, "events": alpha.events(job_id), "reconciliation": reconciliation}


def test_the_job_completes_after_approval_with_one_notice_per_vendor_with_discrepancies(disputed: dict[str, Any]):
    job, result = disputed["job"], disputed["result"]
    assert job["status"] == "completed", job
    notices = {n["vendor"]: n for n in result["notices"]}
    assert set(notices) == {ORION, VEGA_CO}
    assert result["clean_vendors"] == [LUMEN_HW]
    for vendor, notice in notices.items():
        assert notice["status"] == "sent" and notice["to"] == CONTACTS[vendor] and notice["operation_id"]
        (message,) = messages_of(notice["operation_id"])  # exactly one e-mail per notice
        assert message.destinations["ToAddresses"] == [notice["to"]] and message.subject == notice["subject"]
        for line in notice["lines"]:  # every disputed line cited, with its verbatim source
            assert line["source"]["quote"] in SOURCES[line["document"]]
            assert line["source"]["quote"] in message.body
    assert sorted((line["rule"], line["product_code"]) for line in notices[ORION]["lines"]) == [
        ("contract-price", "TL-100"),
        ("line-total", "TL-400"),
    ]
    assert [(line["rule"], line["actual"]) for line in notices[VEGA_CO]["lines"]] == [("unknown-product", "TL-999")]
    recon = disputed["reconciliation"]
    to_this_reconciliation = [m for m in sent_messages() if recon in m.body]
    assert sorted(m.destinations["ToAddresses"][0] for m in to_this_reconciliation) == sorted(CONTACTS.values())
    assert result["memory"] == {"episodes_recorded": 2, "facts_recorded": 1}


def test_each_turn_is_a_step_of_the_loop_and_an_agent_turn_event(disputed: dict[str, Any]):
    events = disputed["events"]
    top = [e["step"] for e in events if e["type"] == "step_finished" and e.get("item") is None]
    assert top == ["load_reconciliation", "draft_notices", "review", "send_notices", "publish_result"]
    for step in ("draft_notices", "send_notices"):
        turns = [e for e in events if e["type"] == "agent_turn" and e["step"] == step]
        assert [e["item"] for e in turns] == list(range(len(turns))) and len(turns) >= 3
        assert [t["detail"]["turn"] for t in turns] == list(range(1, len(turns) + 1))
        assert all(t["detail"]["tokens"]["input"] > 0 for t in turns)
        assert turns[-1]["detail"]["finished"] and not any(t["detail"]["finished"] for t in turns[:-1])
    sends = [e for e in events if e["type"] == "effect_intended" and e["detail"]["tool"] == "send_notice"]
    assert len(sends) == 2 and all(e["detail"]["side_effect"] == "irreversible" for e in sends)
    types = [e["type"] for e in events]
    assert types.index("review_decided") < types.index(next(e["type"] for e in sends))  # sent after approval
    assert_consistent(events)


def test_a_second_dispute_with_the_same_vendor_finds_the_first_in_memory(
    platform: LocalPlatform, disputed: dict[str, Any], alpha: Client
):
    first = disputed["job"]["job_id"]
    reconciliation = reconcile(alpha, vendors=("orion",))
    job_id = alpha.submit(dispute_request(reconciliation))
    job = approve(alpha, Client(platform, "alpha-reviewer"), job_id)
    assert job["status"] == "completed", job
    (notice,) = alpha.get(f"/v1/jobs/{job_id}/result").json()["notices"]
    assert notice["vendor"] == ORION
    assert first in [p["job_id"] for p in notice["past_disputes"]]
    (fact,) = notice["facts"]
    assert fact["value"] == "120.00 USD" and fact["provenance"]["job_id"] == disputed["reconciliation"]
    assert fact["provenance"]["document"] == "acme-prices.txt" and "TL-100" in fact["provenance"]["quote"]
    (message,) = messages_of(notice["operation_id"])
    assert first in message.body  # the notice says so
    memory = alpha.get(f"/v1/jobs/{job_id}/result").json()["memory"]
    assert memory == {"episodes_recorded": 1, "facts_recorded": 0}  # the agreed price was known already


def test_another_tenants_memory_is_never_visible(platform: LocalPlatform, disputed: dict[str, Any], beta: Client):
    ops = Client(platform, "ops")
    alpha_memory = ops.get("/v1/ops/tenants/alpha/memory").json()["memories"]
    assert {m["subject"] for m in alpha_memory} >= {ORION, VEGA_CO}
    reconciliation = reconcile(beta, vendors=("orion",))
    job_id = beta.submit(dispute_request(reconciliation))
    job = approve(beta, Client(platform, "beta-reviewer"), job_id)
    assert job["status"] == "completed", job
    (notice,) = beta.get(f"/v1/jobs/{job_id}/result").json()["notices"]
    assert notice["past_disputes"] == [] and notice["facts"] == []  # alpha's disputes with Orion stay alpha's
    recalls = [
        e for e in beta.events(job_id) if e["type"] == "agent_turn" and "recall_episodes" in e["detail"]["tools"]
    ]
    assert recalls
    beta_memory = ops.get("/v1/ops/tenants/beta/memory").json()["memories"]
    assert beta_memory and {m["job_id"] for m in beta_memory} == {job_id}
    assert not {m["memory_id"] for m in beta_memory} & {m["memory_id"] for m in alpha_memory}
    # nor can a tenant dispute (and so read) another tenant's reconciliation, or reach the operators' routes
    refused = beta.post("/v1/jobs", dispute_request(disputed["reconciliation"]))
    assert refused.status_code == 422 and ["input", "reconciliation_job_id"] in [
        e["loc"] for e in refused.json()["errors"]
    ]
    assert beta.get("/v1/ops/tenants/alpha/memory").status_code == 403


def test_operators_list_and_delete_a_tenants_memory(platform: LocalPlatform, disputed: dict[str, Any], beta: Client):
    ops = Client(platform, "ops")
    reconciliation = reconcile(beta, vendors=("vega",))
    approve(beta, Client(platform, "beta-reviewer"), beta.submit(dispute_request(reconciliation)))
    episodes = ops.get("/v1/ops/tenants/beta/memory", kind="episode", subject="vega supply co.").json()["memories"]
    assert [m["subject"] for m in episodes] == [VEGA_CO] and episodes[0]["kind"] == "episode"
    one = episodes[0]["memory_id"]
    deleted = _delete(platform, f"/v1/ops/tenants/beta/memory/{one}")
    assert deleted.status_code == 200 and deleted.json()["deleted"] == 1
    assert _delete(platform, f"/v1/ops/tenants/beta/memory/{one}").status_code == 404
    left = ops.get("/v1/ops/tenants/beta/memory").json()["memories"]
    everything = _delete(platform, "/v1/ops/tenants/beta/memory")
    assert everything.json() == {"tenant_id": "beta", "deleted": len(left)}
    assert ops.get("/v1/ops/tenants/beta/memory").json()["memories"] == []
    assert ops.get("/v1/ops/tenants/alpha/memory").json()["memories"]  # another tenant's is untouched


def _delete(platform: LocalPlatform, path: str) -> Any:
    import requests

    return requests.delete(f"{platform.api_url}{path}", headers=platform.auth_header("ops"), timeout=30)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reconciliation_job_id": "job_" + "0" * 28}, ["input", "reconciliation_job_id"]),
        ({"contacts": {ORION: "not-an-address"}}, ["body", "input", "contacts", ORION]),
        ({"contacts": None, "default_contact": None}, ["input", "default_contact"]),
        ({"surprise": True}, ["body", "input", "surprise"]),
    ],
    ids=["unknown-reconciliation", "bad-address", "no-contact", "unknown-field"],
)
def test_malformed_input_is_a_422_naming_the_field_and_nothing_is_stored(
    alpha: Client, disputed: dict[str, Any], change: dict[str, Any], field: list[str]
):
    body = dispute_request(disputed["reconciliation"])
    body["input"].update(change)
    body["input"] = {k: v for k, v in body["input"].items() if v is not None}
    before = len(alpha.get("/v1/jobs", limit=200).json()["jobs"])
    response = alpha.post("/v1/jobs", body)
    assert response.status_code == 422, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    assert field in [e["loc"] for e in response.json()["errors"]], json.dumps(response.json())
    assert len(alpha.get("/v1/jobs", limit=200).json()["jobs"]) == before


def test_agent_limits_above_the_tenants_ceilings_are_a_422(alpha: Client, disputed: dict[str, Any]):
    response = alpha.post("/v1/jobs", dispute_request(disputed["reconciliation"], agent={"max_turns": 99}))
    assert response.status_code == 422
    assert ["body", "agent", "max_turns"] in [e["loc"] for e in response.json()["errors"]]
