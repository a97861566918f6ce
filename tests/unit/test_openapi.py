"""The committed OpenAPI document is generated from the models; this fails when they drift apart."""

from __future__ import annotations

import json
from pathlib import Path

from handlers.api import openapi_json

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_committed_openapi_matches_the_models():
    assert json.loads(COMMITTED.read_text()) == json.loads(openapi_json()), "run `make openapi` and commit"


def test_openapi_documents_problem_responses_and_bearer_auth():
    spec = json.loads(openapi_json())
    submit = spec["paths"]["/v1/jobs"]["post"]
    assert {"202", "400", "413", "422"} <= set(submit["responses"])
    assert "application/problem+json" in submit["responses"]["422"]["content"]
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
