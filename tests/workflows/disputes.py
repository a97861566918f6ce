"""What the dispute scenarios share: a reconciliation none of the samples is (three vendors, two of them with
discrepancies over three invoices, one clean), submitting disputes, approving their review, and the e-mail the
in-memory SES kept."""

from __future__ import annotations

from typing import Any

from local.deploy import wait_until
from tests.workflows.conftest import Client

CONTRACT = """ACME TOOLING - PRICE AGREEMENT 2026
Currency: USD

Product Code   Description                 Agreed Unit Price
-------------  --------------------------  -----------------
TL-100         Torque wrench                          120.00
TL-200         Socket set                              45.50
TL-300         Impact driver                          210.00
TL-400         Drill bits (set of 20)                  18.75
"""
ORION_1 = """Supplier: Orion Tools Ltd
Invoice No: OT-5001
Invoice Date: 2026-02-10
Currency: USD

Code     Description              Qty   Unit Price     Amount
TL-100   Torque wrench              2       125.00     250.00
TL-200   Socket set                 4        45.50     182.00

Subtotal                                               432.00
Total                                                  432.00
"""
ORION_2 = """Supplier: Orion Tools Ltd
Invoice No: OT-5002
Invoice Date: 2026-02-17
Currency: USD

Code     Description              Qty   Unit Price     Amount
TL-400   Drill bits (set of 20)    10        18.75     178.50

Subtotal                                               178.50
Total                                                  178.50
"""
VEGA = """Supplier: Vega Supply Co
Invoice No: VS-77
Invoice Date: 2026-02-12
Currency: USD

Code     Description              Qty   Unit Price     Amount
TL-300   Impact driver              1       210.00     210.00
TL-999   Work lamp                  2        35.00      70.00

Subtotal                                               280.00
Total                                                  280.00
"""
LUMEN = """Supplier: Lumen Hardware
Invoice No: LH-9
Invoice Date: 2026-02-14
Currency: USD

Code     Description              Qty   Unit Price     Amount
TL-200   Socket set                 2        45.50      91.00

Subtotal                                                91.00
Total                                                   91.00
"""
ORION, VEGA_CO, LUMEN_HW = "Orion Tools Ltd", "Vega Supply Co", "Lumen Hardware"
CONTACTS = {ORION: "ar@orion.example", VEGA_CO: "billing@vega.example"}
DEFAULT_CONTACT = "disputes@buyer.example"


def reconciliation_request(*, vendors: tuple[str, ...] = ("orion", "vega", "lumen")) -> dict[str, Any]:
    texts = {"orion": [("orion-1.txt", ORION_1), ("orion-2.txt", ORION_2)], "vega": [("vega.txt", VEGA)]}
    texts["lumen"] = [("lumen.txt", LUMEN)]
    invoices = [{"name": name, "text": text} for vendor in vendors for name, text in texts[vendor]]
    return {
        "workflow": "invoice-reconciliation",
        "input": {"contract": {"name": "acme-prices.txt", "text": CONTRACT}, "invoices": invoices},
    }


def reconcile(client: Client, **options: Any) -> str:
    job_id = client.submit(reconciliation_request(**options))
    job = client.wait(job_id)
    assert job["status"] == "completed", job
    return job_id


def dispute_request(reconciliation_job_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "workflow": "dispute-resolution",
        "input": {
            "reconciliation_job_id": reconciliation_job_id,
            "contacts": CONTACTS,
            "default_contact": DEFAULT_CONTACT,
        },
        **extra,
    }


def status_of(client: Client, job_id: str, *wanted: str, timeout: float = 120) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        return job if job["status"] in wanted else None

    return wait_until(reached, timeout=timeout, interval=0.2, what=f"job {job_id} to be {wanted}")


def approve(client: Client, reviewer: Client, job_id: str, **decision: Any) -> dict[str, Any]:
    """Wait for the job's review, decide it (approve unless told otherwise) and wait for the job to finish."""
    waiting = status_of(client, job_id, "waiting_for_review", "failed", "completed")
    assert waiting["status"] == "waiting_for_review", waiting
    review_id = waiting["review"]["review_id"]
    body = decision or {"decision": "approve"}
    response = reviewer.post(f"/v1/reviews/{review_id}/decision", body)
    assert response.status_code == 200, response.text
    return client.wait(job_id)


def sent_messages() -> list[Any]:
    """Every message the in-memory SES sent in this session (its backend, in this process)."""
    from moto.ses.models import ses_backends

    return [m for account in ses_backends.values() for region in account.values() for m in region.sent_messages]


def messages_of(operation_id: str) -> list[Any]:
    """The messages that carry an operation's reference (a notice) or withdraw it (its retraction)."""
    return [m for m in sent_messages() if operation_id in m.body]
