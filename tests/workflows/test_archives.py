"""Scenario: a client uploads its documents as one ZIP archive (presigned PUT) and asks a question; the job reads
each member from the archive and cites the documents by their paths in it. A hostile archive is refused at the door."""

from __future__ import annotations

import io
import zipfile

import requests

from tests.workflows.conftest import SAMPLES, Client

DOCUMENTS = SAMPLES / "documents"
MEMBERS = {
    "contracts/master_services_agreement.pdf": DOCUMENTS / "master_services_agreement.pdf",
    "contracts/addenda/data_processing_addendum.md": DOCUMENTS / "data_processing_addendum.md",
    "letters/supplier_letter.txt": DOCUMENTS / "supplier_letter.txt",
}


def upload_zip(client: Client, data: bytes) -> str:
    ticket = client.post("/v1/uploads", {"filename": "documents.zip", "media_type": "application/zip"}).json()
    put = requests.put(ticket["upload_url"], data=data, headers=ticket["headers"], timeout=30)
    assert put.status_code == 200
    return str(ticket["upload_id"])


def test_an_uploaded_archive_completes_with_citations_naming_its_documents(alpha: Client):
    # Given the sample documents zipped in folders (with the entries a Mac adds), uploaded with a presigned PUT
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("contracts/", b"")
        for name, path in MEMBERS.items():
            archive.write(path, name)
        archive.writestr("__MACOSX/contracts/._master_services_agreement.pdf", b"\x00\x05\x16\x07")
        archive.writestr(".DS_Store", b"\x00\x00\x00\x01Bud1")
    upload_id = upload_zip(alpha, buffer.getvalue())

    # When a job names the archive
    job_id = alpha.submit(
        {
            "workflow": "document-analysis",
            "input": {
                "question": "What is the liability cap and how is notice given?",
                "archive": {"upload_id": upload_id},
            },
        }
    )

    # Then it completes, its documents are the archive's members in order, named by their paths
    job = alpha.wait(job_id)
    assert job["status"] == "completed", job
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    assert [d["name"] for d in result["documents"]] == list(MEMBERS)
    assert [d["media_type"] for d in result["documents"]] == ["application/pdf", "text/markdown", "text/plain"]
    # and its citations name those documents
    assert result["citations"]
    assert {c["document"] for c in result["citations"]} <= set(MEMBERS)


def test_a_hostile_archive_is_refused_naming_the_entry(alpha: Client):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("fine.txt", b"A harmless document.")
        archive.writestr("../../etc/cron.d/evil.txt", b"* * * * * root sh")
    upload_id = upload_zip(alpha, buffer.getvalue())
    jobs_before = [j["job_id"] for j in alpha.get("/v1/jobs", limit=200).json()["jobs"]]

    response = alpha.post(
        "/v1/jobs",
        {"workflow": "document-analysis", "input": {"question": "Anything?", "archive": {"upload_id": upload_id}}},
    )

    assert response.status_code == 422
    assert response.headers["Content-Type"].startswith("application/problem+json")
    errors = response.json()["errors"]
    assert ["input", "archive", "entries", "../../etc/cron.d/evil.txt"] in [e["loc"] for e in errors]
    assert [j["job_id"] for j in alpha.get("/v1/jobs", limit=200).json()["jobs"]] == jobs_before  # no job stored


def test_invoices_as_one_archive_are_reconciled_by_their_paths(alpha: Client):
    # Given two invoices (a PDF with a planted price discrepancy, a clean text) zipped in a folder and uploaded
    invoices = SAMPLES / "invoices"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in ("inv_03_cobalt.pdf", "inv_01_northwind.txt"):
            archive.write(invoices / name, f"2025/{name}")
    upload_id = upload_zip(alpha, buffer.getvalue())
    contract = {"name": "contract_price_list.txt", "text": (invoices / "contract_price_list.txt").read_text()}

    # When a reconciliation job names the archive
    job_id = alpha.submit(
        {
            "workflow": "invoice-reconciliation",
            "input": {"contract": contract, "invoices_archive": {"upload_id": upload_id}},
        }
    )

    # Then it completes, each invoice reported under its path, the planted discrepancy found in the PDF member
    job = alpha.wait(job_id)
    assert job["status"] == "completed", job
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    statuses = {i["document"]: i["status"] for i in result["invoices"]}
    assert statuses == {"2025/inv_03_cobalt.pdf": "discrepancies", "2025/inv_01_northwind.txt": "matched"}
    [cobalt] = [i for i in result["invoices"] if i["document"] == "2025/inv_03_cobalt.pdf"]
    assert ("contract-price", "85.00", "95.00") in [
        (d["rule"], d["expected"], d["actual"]) for d in cobalt["discrepancies"]
    ]
