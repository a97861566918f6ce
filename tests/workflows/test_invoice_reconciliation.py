"""Scenario: a client submits a contract's price list and invoices; the job extracts every invoice into a typed
schema, sources every value, checks the business rules, reconciles against the contract and publishes a report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from longhaul.documents.parsing import parse_document
from longhaul.workflows import REGISTRY
from tests.workflows.conftest import SAMPLES, Client

INVOICES = SAMPLES / "invoices"
# (document, rule, field, expected, actual): the discrepancies planted in the samples (samples/invoices/README.md).
PLANTED = {
    ("inv_02_brightline.md", "line-total", "line_items[2].line_total", "59.97", "59.79"),
    ("inv_03_cobalt.pdf", "contract-price", "line_items[0].unit_price", "85.00", "95.00"),
    ("inv_04_delta.pdf", "invoice-total", "totals.total", "1229.52", "1239.52"),
    ("inv_05_eagle.txt", "currency", "currency", "USD", "EUR"),
    ("inv_06_falcon.txt", "unknown-product", "line_items[1].product_code", None, "NW-9999"),
}
CLEAN = {"inv_01_northwind.txt", "inv_07_granite.txt"}


def _upload(client: Client, path: Path) -> str:
    media = "application/pdf" if path.suffix == ".pdf" else "text/markdown" if path.suffix == ".md" else "text/plain"
    ticket = client.post("/v1/uploads", {"filename": path.name, "media_type": media}).json()
    put = requests.put(ticket["upload_url"], data=path.read_bytes(), headers=ticket["headers"], timeout=30)
    assert put.status_code == 200
    return str(ticket["upload_id"])


def _page_texts(path: Path) -> dict[int, str]:
    media = "application/pdf" if path.suffix == ".pdf" else "text/plain"
    parsed = parse_document(index=0, name=path.name, data=path.read_bytes(), media_type=media)
    return {page.number: page.text for page in parsed.pages}


@pytest.fixture(scope="module")
def reconciled(platform: Any) -> dict[str, Any]:
    """One job over every sample invoice (texts inline, PDFs uploaded), run once for the scenarios below."""
    client = Client(platform, "alpha")
    invoices = []
    for path in sorted(INVOICES.glob("inv_*")):
        if path.suffix == ".pdf":
            invoices.append({"name": path.name, "upload_id": _upload(client, path)})
        else:
            invoices.append({"name": path.name, "text": path.read_text()})
    contract = INVOICES / "contract_price_list.txt"
    body = {
        "workflow": "invoice-reconciliation",
        "input": {"contract": {"name": contract.name, "text": contract.read_text()}, "invoices": invoices},
    }
    job_id = client.submit(body)
    job = client.wait(job_id)
    assert job["status"] == "completed", job
    result = client.get(f"/v1/jobs/{job_id}/result").json()
    return {"job": job, "result": result, "events": client.events(job_id), "job_id": job_id, "client": client}


def test_every_planted_discrepancy_is_reported_under_its_rule_with_a_verbatim_source(reconciled: dict[str, Any]):
    found = {
        (invoice["document"], d["rule"], d["field"], d["expected"], d["actual"])
        for invoice in reconciled["result"]["invoices"]
        for d in invoice["discrepancies"]
    }
    assert found == PLANTED
    for invoice in reconciled["result"]["invoices"]:
        pages = _page_texts(INVOICES / invoice["document"])
        for d in invoice["discrepancies"]:
            assert " ".join(d["source"]["quote"].split()) in " ".join(pages[d["source"]["page"]].split())


def test_clean_invoices_match_and_no_value_is_reported_without_a_source(reconciled: dict[str, Any]):
    statuses = {i["document"]: i["status"] for i in reconciled["result"]["invoices"]}
    assert {name for name, status in statuses.items() if status == "matched"} == CLEAN
    assert all(statuses[name] == "discrepancies" for name, *_ in PLANTED)
    for invoice in reconciled["result"]["invoices"]:
        pages = _page_texts(INVOICES / invoice["document"])
        assert invoice["line_items"], invoice["document"]
        for item in invoice["line_items"]:
            assert item["source"]["document"] == invoice["document"]
            assert " ".join(item["source"]["quote"].split()) in " ".join(pages[item["source"]["page"]].split())
            for field in ("unit_price", "line_total"):
                assert "." in item[field] and "," not in item[field]  # decimal strings, never formatted amounts


def test_the_job_runs_the_spec_steps_fans_out_per_invoice_and_renders_markdown(reconciled: dict[str, Any]):
    spec = REGISTRY["invoice-reconciliation"]
    events, client = reconciled["events"], reconciled["client"]
    top = [e["step"] for e in events if e["type"] == "step_finished" and e.get("item") is None]
    # (its review, not asked for, is a Choice of the state machine: no step runs; nor does its dispute resolution,
    # not asked for either: a `when=` step, recorded as skipped)
    assert top == [
        s for s in spec.step_names if s not in spec.fan_out_steps and s not in ("review", "resolve_disputes")
    ]
    assert [e["step"] for e in events if e["type"] == "step_skipped"] == ["resolve_disputes"]
    items = {e["item"] for e in events if e["type"] == "step_finished" and e["step"] == "extract_invoices"}
    assert items == set(range(len(reconciled["result"]["invoices"])))
    assert reconciled["result"]["summary"] and reconciled["result"]["summary_source"] in ("model", "deterministic")
    markdown = requests.get(
        f"{client.base}/v1/jobs/{reconciled['job_id']}/result",
        headers={**client.headers, "Accept": "text/markdown"},
        timeout=30,
    )
    assert markdown.status_code == 200 and markdown.headers["Content-Type"].startswith("text/markdown")
    assert "inv_02_brightline.md" in markdown.text and "line-total" in markdown.text


UNSEEN_CONTRACT = """Rahmenvertrag / Preisliste 2026
Currency: EUR

SKU        | Beschreibung              | Price
ZX-01      | Pallet wrap 500 mm        | 21.50
ZX-02      | Corner boards (pack 50)   | 38.00
ZX-03      | Strapping kit             | 112.40
"""
UNSEEN_INVOICE = """Seller: Zeta Logistik GmbH
Inv. No: Z/2026/118
Issue date: 2026-02-02
Currency: EUR

Qty   Item code   Details                   Unit cost    Amount
  10  ZX-01       Pallet wrap 500 mm          21.50      215.00
   3  ZX-03       Strapping kit              112.40      337.20
   2  ZX-02       Corner boards (pack 50)     39.00       78.00

Net total                                   630.20
VAT 20%                                     126.04
Balance due                              EUR 756.24
"""


def test_an_unseen_vendor_layout_is_reconciled(alpha: Client):
    body = {
        "workflow": "invoice-reconciliation",
        "input": {
            "contract": {"name": "preisliste.txt", "text": UNSEEN_CONTRACT},
            "invoices": [{"name": "zeta.txt", "text": UNSEEN_INVOICE}],
        },
    }
    job = alpha.wait(alpha.submit(body))
    assert job["status"] == "completed", job
    (invoice,) = alpha.get(f"/v1/jobs/{job['job_id']}/result").json()["invoices"]
    assert invoice["invoice_number"] == "Z/2026/118" and invoice["currency"] == "EUR"
    assert [(d["rule"], d["field"], d["expected"], d["actual"]) for d in invoice["discrepancies"]] == [
        ("contract-price", "line_items[2].unit_price", "38.00", "39.00")
    ]
    assert invoice["discrepancies"][0]["source"]["quote"] in UNSEEN_INVOICE


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"invoices": []}, "invoices"),
        ({"extra": True}, "extra"),
        ({"contract": {"name": "c.txt", "text": "We agree to agree. No prices here."}}, "contract"),
        ({"invoices": [{"name": "same.txt", "text": "x"}, {"name": "same.txt", "text": "y"}]}, ""),
    ],
    ids=["no-invoices", "unknown-field", "contract-without-prices", "duplicate-names"],
)
def test_malformed_input_is_a_422_naming_the_problem_and_nothing_is_stored(
    alpha: Client, platform: Any, change: dict[str, Any], field: str
):
    contract = (INVOICES / "contract_price_list.txt").read_text()
    body: dict[str, Any] = {
        "workflow": "invoice-reconciliation",
        "input": {"contract": {"name": "prices.txt", "text": contract}, "invoices": [{"name": "a.txt", "text": "x"}]},
    }
    body["input"].update(change)
    before = len(alpha.get("/v1/jobs").json()["jobs"])
    response = alpha.post("/v1/jobs", body)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert response.headers["Content-Type"].startswith("application/problem+json")
    locations = [e["loc"] for e in problem["errors"]]
    assert any(field in json.dumps(loc) for loc in locations), problem
    assert len(alpha.get("/v1/jobs").json()["jobs"]) == before


def test_invoices_share_the_extraction_prefix_and_read_it_from_the_cache(reconciled: dict[str, Any]):
    # Given invoices extracted with one system prompt and schema (a stable prefix over the offline model's 1,024-token
    # minimum), when the job has run, then the calls after the first read that prefix from the model's cache
    job, events = reconciled["job"], reconciled["events"]
    extractions = [e["detail"] for e in events if e["type"] == "model_called" and e["step"] == "extract_invoices"]
    assert len(extractions) >= len(reconciled["result"]["invoices"])
    read = [d.get("cache_read_tokens", 0) for d in extractions]
    assert sum(1 for tokens in read if tokens >= 1024) >= len(extractions) - 1  # all but (at most) the first
    usage, model = job["usage"], job["cost"]["model"]
    every = [e["detail"] for e in events if e["type"] == "model_called"]
    assert usage["cache_read_tokens"] == sum(d.get("cache_read_tokens", 0) for d in every) > 0
    assert usage["cache_write_tokens"] == sum(d.get("cache_write_tokens", 0) for d in every)
    # and the cost shows it: every call on demand, cheaper than the same tokens uncached
    on_demand = model["lanes"]["on_demand"]
    assert (on_demand["cache_read_tokens"], on_demand["usd"]) == (usage["cache_read_tokens"], model["usd"])
    assert model["lanes"]["batch"] == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "usd": "0.000000",
    }
    assert float(model["saved_usd"]) > 0
