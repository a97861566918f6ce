"""Scenario: an invoice reconciliation asks to wait for a late price list (signal `price_list`). A price list sent
early is kept and consumed once; one sent while the job waits resumes it; either replaces the contract's in the
reconciliation. Without it the job goes on with the contract's when the wait times out, and a late one is refused."""

from __future__ import annotations

import time
from typing import Any

from local import lambda_runtime
from local.deploy import wait_until
from tests.workflows.conftest import SAMPLES, Client

INVOICES = SAMPLES / "invoices"
CONTRACT = (INVOICES / "contract_price_list.txt").read_text()
NEW_ROW = "NW-5100        Site survey (fixed fee)                       350.00"
# The price list sent late: the contract's, plus the product the Falcon invoice has that the contract does not list.
ADDED_ROW = "NW-9999        Mounting rail 1 m                              12.50"
LATE_PRICES = CONTRACT.replace(NEW_ROW, f"{NEW_ROW}\n{ADDED_ROW}")


def _request(wait_seconds: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "workflow": "invoice-reconciliation",
        "input": {
            "contract": {"name": "contract_price_list.txt", "text": CONTRACT},
            "invoices": [{"name": "inv_06_falcon.txt", "text": (INVOICES / "inv_06_falcon.txt").read_text()}],
        },
    }
    if wait_seconds is not None:
        body["input"]["await_price_list"] = {"timeout_seconds": wait_seconds}
    return body


PRICE_LIST = {"name": "price_list_2025_rev2.txt", "text": LATE_PRICES}


def _rules(client: Client, job_id: str) -> tuple[str, set[str]]:
    """The price list the job's result was reconciled against, and the rules its discrepancies broke."""
    result = client.get(f"/v1/jobs/{job_id}/result").json()
    (invoice,) = result["invoices"]
    return result["contract"]["document"], {d["rule"] for d in invoice["discrepancies"]}


def _types(client: Client, job_id: str) -> list[str]:
    return [e["type"] for e in client.events(job_id)]


def test_a_price_list_sent_early_is_kept_consumed_once_and_used(alpha: Client, beta: Client) -> None:
    def slow_extraction(invocation: Any, call_next: Any) -> Any:
        event = invocation.event if isinstance(invocation.event, dict) else {}
        if event.get("step") == "extract_invoices":
            time.sleep(1.0)  # the signal surely comes before the job reaches its step
        return call_next()

    with lambda_runtime.middleware(slow_extraction):
        job_id = alpha.submit(_request(600))
        # refusals first: nothing of them is kept
        assert beta.post(f"/v1/jobs/{job_id}/signals/price_list", PRICE_LIST).status_code == 404  # another tenant's
        unknown = alpha.post(f"/v1/jobs/{job_id}/signals/nope", PRICE_LIST)
        assert unknown.status_code == 404 and unknown.json()["type"].endswith("/not-found"), unknown.text
        wrong = alpha.post(f"/v1/jobs/{job_id}/signals/price_list", {"name": "p.txt", "text": "no prices here"})
        assert wrong.status_code == 422 and wrong.json()["errors"], wrong.text
        assert alpha.post(f"/v1/jobs/{job_id}/signals/price_list", [1, 2]).status_code == 422  # not an object
        malformed = alpha.post(f"/v1/jobs/{job_id}/signals/price_list", data="{not json")
        assert malformed.status_code == 400 and malformed.json()["type"].endswith("/malformed-json")

        sent = alpha.post(f"/v1/jobs/{job_id}/signals/price_list", PRICE_LIST)
        assert sent.status_code == 202, sent.text
        assert sent.json() == {"job_id": job_id, "signal": "price_list", "early": True, "status": "running"}
        again = alpha.post(f"/v1/jobs/{job_id}/signals/price_list", PRICE_LIST)  # taken once
        assert again.status_code == 409 and again.json()["signal_status"] == "received", again.text
        job = alpha.wait(job_id)
    assert job["status"] == "completed", job
    assert _rules(alpha, job_id) == ("price_list_2025_rev2.txt", set())  # NW-9999 is priced now: no discrepancy
    types = _types(alpha, job_id)
    assert types.count("signal_received") == 1 and "signal_timed_out" not in types
    consumed = alpha.post(f"/v1/jobs/{job_id}/signals/price_list", PRICE_LIST)
    assert consumed.status_code == 409 and consumed.json()["job_status"] == "completed"


def test_a_price_list_sent_while_the_job_waits_resumes_it(alpha: Client) -> None:
    job_id = alpha.submit(_request(600))  # a minute of the platform's scaled time: far more than the test takes

    def waiting() -> dict[str, Any] | None:
        view = alpha.get(f"/v1/jobs/{job_id}").json()
        return view if (view.get("waiting") or {}).get("reason") == "signal" else None

    view = wait_until(waiting, timeout=60, what="the job to wait for its price list")
    assert view["waiting"]["step"] == "price_list" and view["waiting"]["until"]
    started = time.monotonic()
    sent = alpha.post(f"/v1/jobs/{job_id}/signals/price_list", PRICE_LIST)
    assert sent.status_code == 202 and sent.json()["early"] is False, sent.text
    job = alpha.wait(job_id, timeout=50)
    assert job["status"] == "completed" and time.monotonic() - started < 50, job
    assert _rules(alpha, job_id) == ("price_list_2025_rev2.txt", set())
    assert "signal_timed_out" not in _types(alpha, job_id)


def test_without_a_price_list_the_job_proceeds_when_its_wait_times_out(alpha: Client) -> None:
    job_id = alpha.submit(_request(20))  # two seconds at the suite's time scale
    job = alpha.wait(job_id)
    assert job["status"] == "completed", job
    assert _rules(alpha, job_id) == ("contract_price_list.txt", {"unknown-product"})
    events = alpha.events(job_id)
    (timed_out,) = [e for e in events if e["type"] == "signal_timed_out"]
    assert timed_out["detail"] == {"name": "price_list", "timeout_seconds": 20, "on_timeout": "proceed"}
    late = alpha.post(f"/v1/jobs/{job_id}/signals/price_list", PRICE_LIST)
    assert late.status_code == 409, late.text


def test_a_job_that_does_not_ask_never_waits(alpha: Client) -> None:
    job_id = alpha.submit(_request(None))
    job = alpha.wait(job_id)
    assert job["status"] == "completed", job
    types = _types(alpha, job_id)
    assert "signal_timed_out" not in types and "signal_received" not in types
    assert _rules(alpha, job_id) == ("contract_price_list.txt", {"unknown-product"})
