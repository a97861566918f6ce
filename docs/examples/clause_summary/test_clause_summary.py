from typing import Any

from tests.workflows.conftest import Client


def test_a_contract_is_summarized_clause_by_clause(alpha: Client) -> None:
    body = {"workflow": "clause-summary", "input": {"document": {"name": "msa.md", "text": "# Liability\nCapped.\n"}}}
    job_id = alpha.submit(body)
    job: dict[str, Any] = alpha.wait(job_id)
    assert job["status"] == "completed", job
    assert alpha.get(f"/v1/jobs/{job_id}/result").json()["clauses"] == ["Liability"]
