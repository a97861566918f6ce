"""A job whose documents are one uploaded ZIP archive, through `handlers.api.handler`: accepted with one document per
member, or a 422 naming the entry that leaves nothing behind but the upload itself."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest

from tests.unit.api_helpers import BODY, assert_problem, executions, job_items, object_keys, submit
from tests.unit.conftest import KEY_A, KEY_B, TENANT_A, CallApi

pytestmark = pytest.mark.usefixtures("api_keys")

QUESTION = BODY["input"]["question"]


def zip_of(*entries: tuple[str | zipfile.ZipInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buffer.getvalue()


def uploaded_archive(call_api: CallApi, s3: Any, bucket: str, data: bytes) -> tuple[str, str]:
    """An upload ticket for a ZIP and the archive PUT at its key (as the presigned URL would): (upload id, key)."""
    response = call_api(
        "POST", "/v1/uploads", key=KEY_A, body={"filename": "documents.zip", "media_type": "application/zip"}
    )
    assert response.status == 201, response.raw_body
    assert response.body["headers"] == {"Content-Type": "application/zip"}
    upload_id = response.body["upload_id"]
    key = f"uploads/{TENANT_A}/{upload_id}"
    s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType="application/zip")
    return upload_id, key


def archive_body(upload_id: str) -> dict[str, Any]:
    return {"workflow": "document-analysis", "input": {"question": QUESTION, "archive": {"upload_id": upload_id}}}


def test_an_archive_job_is_accepted_with_one_document_per_member(
    call_api: CallApi, s3: Any, bucket: str, sfn: Any, state_machine_arn: str
) -> None:
    # Given an uploaded archive of two documents in folders (and a directory entry)
    data = zip_of(
        ("contracts/", b""),
        ("contracts/2024/msa.md", b"# MSA\nEither party may terminate with 30 days notice."),
        ("letters/notice.txt", b"Termination requires written notice."),
    )
    upload_id, key = uploaded_archive(call_api, s3, bucket, data)

    # When a job names it
    accepted = submit(call_api, archive_body(upload_id))

    # Then it is accepted, its input lists the members as documents of the archive upload, and it started
    assert accepted.status == 202, accepted.raw_body
    job_id = accepted.body["job_id"]
    stored = json.loads(s3.get_object(Bucket=bucket, Key=f"work/{job_id}/input.json")["Body"].read())
    assert [(d["index"], d["name"], d["media_type"], d["key"]) for d in stored["documents"]] == [
        (0, "contracts/2024/msa.md", "text/markdown", key),
        (1, "letters/notice.txt", "text/plain", key),
    ]
    assert [d["member"]["name"] for d in stored["documents"]] == ["contracts/2024/msa.md", "letters/notice.txt"]
    assert [e["name"] for e in executions(sfn, state_machine_arn)] == [job_id]
    # and nothing was extracted from the archive at submission: the bucket holds the upload and the input
    assert sorted(object_keys(s3, bucket)) == sorted([key, f"work/{job_id}/input.json"])


def test_an_archive_of_another_tenant_cannot_be_referenced(call_api: CallApi, s3: Any, bucket: str, table: Any) -> None:
    upload_id, _ = uploaded_archive(call_api, s3, bucket, zip_of(("a.txt", b"hello")))

    problem = assert_problem(submit(call_api, archive_body(upload_id), key=KEY_B), 422, "invalid-request")

    assert problem["errors"][0]["loc"] == ["input", "archive", "upload_id"]
    assert job_items(table) == []


def symlink() -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("link.txt")
    info.create_system, info.external_attr = 3, 0o120777 << 16
    return info


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        (zip_of(("ok.txt", b"fine"), ("../escape.txt", b"x")), ["input", "archive", "entries", "../escape.txt"]),
        (zip_of(("/etc/x.txt", b"x")), ["input", "archive", "entries", "/etc/x.txt"]),
        (zip_of((symlink(), b"/etc/passwd")), ["input", "archive", "entries", "link.txt"]),
        (zip_of(("zeros.txt", bytes(4 * 1024 * 1024))), ["input", "archive", "entries", "zeros.txt"]),
        (b"not a zip at all", ["input", "archive", "upload_id"]),
    ],
    ids=["traversal", "absolute", "symlink", "bomb", "not-a-zip"],
)
def test_a_hostile_archive_is_422_and_nothing_is_stored(
    call_api: CallApi, s3: Any, bucket: str, table: Any, sfn: Any, state_machine_arn: str, data: bytes, loc: list[Any]
) -> None:
    # Given an uploaded hostile archive
    _, key = uploaded_archive(call_api, s3, bucket, data)

    # When a job names it
    problem = assert_problem(submit(call_api, archive_body(upload_id=key.rsplit("/", 1)[-1])), 422, "invalid-request")

    # Then the problem names the archive and the entry
    assert loc in [e["loc"] for e in problem["errors"]], problem["errors"]
    # and nothing is stored: no job, no artifact beside the upload itself, no execution
    assert job_items(table) == []
    assert object_keys(s3, bucket) == [key]
    assert executions(sfn, state_machine_arn) == []


@pytest.mark.parametrize(
    "documents",
    [None, [{"name": "a.txt", "text": "also inline"}]],
    ids=["neither", "both"],
)
def test_documents_or_archive_exactly_one(
    call_api: CallApi, nothing_stored: Any, documents: list[dict[str, str]] | None
) -> None:
    body: dict[str, Any] = {"workflow": "document-analysis", "input": {"question": QUESTION}}
    if documents is not None:
        body["input"] |= {"documents": documents, "archive": {"upload_id": "up_" + "0" * 32}}

    problem = assert_problem(submit(call_api, body), 422, "invalid-request")

    assert any("exactly one of `documents` or `archive`" in e["msg"] for e in problem["errors"]), problem["errors"]
    nothing_stored()
