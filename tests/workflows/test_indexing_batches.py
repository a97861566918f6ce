"""Scenario: a job over an archive of 1,000 small documents chunks and indexes them in batches (one fan-out item per
batch of `limits.INDEX_BATCH_MAX_DOCUMENTS`), and retrieval searches the batches' indexes as one: the one passage that
answers the question is found in the last batch, cited by its document's name, and the result lists every document.

Reduced size: 1,000 documents of two sentences each keep the job within a minute or two of a shared 2-core machine;
`bench/large_job.py --documents 5000` runs the full size and prints each step's time and memory per invocation.
"""

from __future__ import annotations

import io
import math
import zipfile
from collections.abc import Iterator

import pytest

from local import lambda_runtime
from longhaul.core import limits
from tests.workflows.conftest import Client
from tests.workflows.test_archives import upload_zip

DOCUMENTS = 1000
ANSWER = 877  # in the last batch


def _name(n: int) -> str:
    return f"agreements/{n // 100:02d}/agreement-{n:04d}.txt"


def _archive() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for n in range(DOCUMENTS):
            text = f"Supply agreement {n}. The supplier's liability under agreement {n} is capped at {1000 + n} EUR."
            if n == ANSWER:
                text += " The escrow agent for the source code is Bluefin Escrow Services."
            archive.writestr(_name(n), text)
    return buffer.getvalue()


@pytest.fixture
def real_time() -> Iterator[None]:
    """Timeouts at their real length: each batch's indexing runs at real speed, and at the suite's tenth of real time
    build_index's 60 s would be 6 s, which four batches indexing at once on a busy 2-core machine can exceed."""
    before = lambda_runtime.time_scale()
    lambda_runtime.set_time_scale(1.0)
    try:
        yield
    finally:
        lambda_runtime.set_time_scale(before)


@pytest.mark.usefixtures("real_time")
def test_a_thousand_documents_are_indexed_in_batches_and_searched_as_one_index(alpha: Client):
    batches = math.ceil(DOCUMENTS / limits.INDEX_BATCH_MAX_DOCUMENTS)
    assert batches > 1 and batches - 1 == ANSWER // limits.INDEX_BATCH_MAX_DOCUMENTS
    # Given an archive of 1,000 short agreements, one of which names an escrow agent
    upload_id = upload_zip(alpha, _archive())

    # When a job asks who the escrow agent is
    job_id = alpha.submit(
        {
            "workflow": "document-analysis",
            "input": {"question": "Who is the escrow agent for the source code?", "archive": {"upload_id": upload_id}},
            "deadline_seconds": limits.MAX_DEADLINE_SECONDS,  # a busy machine must not expire it
        }
    )

    # Then it completes
    job = alpha.wait(job_id, timeout=900)
    assert job["status"] == "completed", job.get("error")
    # And its documents were chunked and indexed in batches, each batch once, as items of build_index
    events = alpha.events(job_id)
    indexed = sorted(e["item"] for e in events if e["type"] == "step_started" and e["step"] == "build_index")
    assert indexed == list(range(batches))
    # And the passage that answers, in the last batch, is cited by its document's name (the batches searched as one)
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    assert "Bluefin Escrow Services" in result["answer"]
    assert {c["document"] for c in result["citations"]} == {_name(ANSWER)}
    # And the result lists every document, in order
    assert [d["name"] for d in result["documents"]] == [_name(n) for n in range(DOCUMENTS)]
