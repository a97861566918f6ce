"""The OpenAPI document: generated from the models (a test fails when the committed one drifts), valid OpenAPI 3.1,
exact (every operation's success and problems, request schemas as strict as the server), and a client generator
makes a client of it without a warning."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from aws_lambda_powertools.event_handler.openapi.params import Path as PathParam
from hypothesis import given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate
from pydantic import BaseModel, ValidationError

from handlers.api import EVERY_ROLE_PATHS, openapi_json
from handlers.api_shared import ADMIN, JOBS, RESULTS, REVIEWS, TAGS, problems
from handlers.resolver import ThreadSafeRestResolver
from longhaul.core.contracts import NAME_PATTERN, VISIBLE_PATTERN, check_plain_name, check_visible

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.json"
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(openapi_json())
    return document


def operations(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{method.upper()} {path}", op) for path, item in spec["paths"].items() for method, op in item.items()]


def test_committed_openapi_matches_the_models(spec: dict[str, Any]) -> None:
    assert json.loads(COMMITTED.read_text()) == spec, "run `make openapi` and commit"


def test_the_document_is_valid_openapi_3_1(spec: dict[str, Any]) -> None:
    assert spec["openapi"].startswith("3.1")
    validate(spec)  # openapi-spec-validator: raises on the first error
    assert "$defs" not in json.dumps(spec)  # every definition is a component, reachable by its reference


def test_every_operation_has_one_declared_tag_and_a_short_summary(spec: dict[str, Any]) -> None:
    """The reference is navigable: each operation is in one section (a tag the document declares, with its
    description) and says in a few words what it does (its details are its description)."""
    assert [tag["name"] for tag in spec["tags"]] == list(TAGS), "the declared tags, in the order a client meets them"
    assert all(tag.get("description") for tag in spec["tags"])
    for name, operation in operations(spec):
        assert len(operation.get("tags", [])) == 1, f"{name} is not in exactly one section: {operation.get('tags')}"
        assert operation["tags"][0] in TAGS, f"{name}: {operation['tags'][0]!r} is not a declared tag"
        summary = operation.get("summary") or ""
        assert summary, f"{name} has no summary"
        assert len(summary) <= 50 and "\n" not in summary and not summary.endswith("."), f"{name}: {summary!r}"
    used = {operation["tags"][0] for _, operation in operations(spec)}
    assert used == set(TAGS), f"declared but unused: {set(TAGS) - used}"


def test_operations_are_listed_in_the_order_a_client_meets_them(spec: dict[str, Any]) -> None:
    """Section by section, in the order of the declared tags (Powertools would list every path with a parameter
    first): submitting a job comes before following it, results before reviews, operators before administration."""
    listed = operations(spec)
    sections = [list(TAGS).index(operation["tags"][0]) for _, operation in listed]
    assert sections == sorted(sections), [name for name, _ in listed]
    names = [name for name, _ in listed]
    assert (
        names.index("POST /v1/jobs")
        < names.index("GET /v1/jobs/{job_id}")
        < names.index("GET /v1/jobs/{job_id}/events")
    )
    assert names.index("GET /v1/jobs/{job_id}/result") < names.index("GET /v1/jobs/{job_id}/pages")
    assert names[-1] == "GET /v1/health"


def test_every_operation_documents_its_success_with_a_schema(spec: dict[str, Any]) -> None:
    for name, operation in operations(spec):
        successes = {status: r for status, r in operation["responses"].items() if status.startswith("2")}
        assert successes, f"{name} documents no success"
        for status, response in successes.items():
            assert response.get("content"), f"{name} {status} has no content"
            for media, content in response["content"].items():
                assert content.get("schema"), f"{name} {status} {media} has no schema"


def test_every_problem_is_problem_json_with_the_rfc_9457_schema(spec: dict[str, Any]) -> None:
    for name, operation in operations(spec):
        for status, response in operation["responses"].items():
            if status.startswith("2") or (name == "GET /v1/health" and status == "503"):  # readiness is a Health
                continue
            if status == "303":  # a redirection (a large result's download), not a problem: it says where to go
                assert "Location" in response["headers"], f"{name} {status}"
                continue
            assert response["content"] == {"application/problem+json": {"schema": PROBLEM_REF}}, f"{name} {status}"
        assert "500" in operation["responses"], f"{name}: an unexpected error is a 500 problem everywhere"
    problem = spec["components"]["schemas"]["Problem"]
    assert {"type", "title", "status"} <= set(problem["required"])
    assert problem.get("additionalProperties", True) is not False  # RFC 9457 extension members


def test_keyed_operations_document_401_403_and_413_and_body_routes_415_400_422(spec: dict[str, Any]) -> None:
    for name, operation in operations(spec):
        if operation.get("security") == []:
            continue
        forbidden = set() if name.split(" ", 1)[1] in EVERY_ROLE_PATHS else {"403"}  # (every role may ask)
        assert {"401", "413", *forbidden} <= set(operation["responses"]), name
        if name.startswith(("POST", "PUT")):
            assert "415" in operation["responses"], name
        if "requestBody" in operation:
            assert {"400", "422"} <= set(operation["responses"]), name
    assert "WWW-Authenticate" in spec["paths"]["/v1/jobs"]["post"]["responses"]["401"]["headers"]


def test_request_schemas_are_as_strict_as_the_server(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    document = schemas["DocumentInput"]
    assert [branch["required"] for branch in document["oneOf"]] == [["text"], ["upload_id"]]
    assert document["properties"]["text"]["anyOf"][0]["pattern"] == VISIBLE_PATTERN
    assert document["properties"]["name"]["pattern"] == NAME_PATTERN
    assert [b["required"] for b in schemas["DocumentAnalysisInput"]["oneOf"]] == [["documents"], ["archive"]]
    (key,) = [p for p in spec["paths"]["/v1/jobs"]["post"]["parameters"] if p["name"].lower() == "idempotency-key"]
    assert key["schema"]["anyOf"][0]["pattern"] == r"^[A-Za-z0-9._:\-]{1,128}$"
    decision = schemas["DecisionRequest"]
    edits = {branch.get("$ref") for branch in decision["properties"]["edits"]["anyOf"]}
    assert {"#/components/schemas/AnswerEdits", "#/components/schemas/SummaryEdits"} <= edits  # one per workflow
    assert decision["oneOf"][1]["required"] == ["edits"]  # `edit` needs edits; the others take none
    assert schemas["JobBudget"]["properties"]["max_cost_usd"]["anyOf"][0]["type"] == "string"
    for model in ("DocumentInput", "JobBudget", "TenantPolicy", "ReplayRequest", "UploadRequest"):
        assert schemas[model]["additionalProperties"] is False, model
    tenant = spec["paths"]["/v1/ops/tenants/{tenant_id}/policy"]["put"]["parameters"][0]
    assert tenant["schema"]["pattern"]


def _patterns(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every `pattern` of the document and where it is, but a header's or a path parameter's: Powertools checks
    those with pydantic's own engine (Rust's `regex`: no look-ahead, and a `$` that is the end of the text, as
    ECMA-262's is; a header holds no newline anyway)."""
    if isinstance(node, dict):
        if node.get("in") in ("header", "path"):
            return
        if isinstance(node.get("pattern"), str):
            yield where, node["pattern"]
        for key, value in node.items():
            yield from _patterns(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _patterns(value, f"{where}/{index}")


def test_every_pattern_reads_alike_in_ecma_262_and_python(spec: dict[str, Any]) -> None:
    """The dialect of `longhaul.core.contracts`: the fuzzer generates from the document with Python's `re`, whose `$`
    also matches before a final newline and whose `\\s` is not ECMA-262's; the server (pydantic) then refused values
    the document allows (an e-mail address ending in a newline)."""
    patterns = list(_patterns(spec))
    assert len(patterns) > 10
    for where, pattern in patterns:
        assert not pattern.endswith("$"), f"{where}: end with `(?![\\s\\S])`, not `$`: {pattern}"
        assert "\\s" not in pattern.replace("[\\s\\S]", ""), f"{where}: `\\s` differs between dialects: {pattern}"


class Thing(BaseModel):
    name: str


def test_a_route_that_declares_only_problems_still_documents_its_success() -> None:
    """Powertools drops the success response of a route with `responses=`: the resolver merges it back."""
    app = ThreadSafeRestResolver(enable_validation=True)

    @app.get("/things/<thing_id>", responses=problems(404, "No such thing"))
    def get_thing(thing_id: Annotated[str, PathParam()]) -> Thing:
        return Thing(name=thing_id)

    responses = json.loads(app.get_openapi_json_schema())["paths"]["/things/{thing_id}"]["get"]["responses"]
    assert responses["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Thing"}
    assert "application/problem+json" in responses["404"]["content"]


# The schema's patterns and the server's checks are one rule: the fuzzer generates from the patterns, the server
# decides with the checks (Python's `re`, which is also what the tools reading the document use).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["a", ".", "..", "a..b", " a", "a ", "C:x", "\u200b", "\u200ba", "a\n", ".a", "a.", "\u00a0b", "x/y", "\u3164"]
)


@settings(max_examples=3000, deadline=None, database=None)
@given(TEXT)
def test_the_name_pattern_is_the_name_check(name: str) -> None:
    try:
        check_plain_name(name)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == (re.search(NAME_PATTERN, name) is not None)


@settings(max_examples=3000, deadline=None, database=None)
@given(TEXT)
def test_the_visible_pattern_is_the_visible_check(text: str) -> None:
    try:
        check_visible(text)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == (re.search(VISIBLE_PATTERN, text) is not None)


ADDRESSES = st.builds(
    lambda local, domain, tld: f"{local}@{domain}.{tld}", TEXT, TEXT, st.sampled_from(["com", "io", "c", "com\n"])
) | st.sampled_from(["ap@vendor.example", "ap\u0085x@vendor.example", "ap@ven\u001ddor.example", "a b@x.io"])


@settings(max_examples=1000, deadline=None, database=None)
@given(ADDRESSES)
def test_the_email_pattern_is_the_servers_check(address: str) -> None:
    """The dispute-resolution input's addresses: the document's pattern, read by Python's `re` (as the fuzzer reads
    it), decides as the server's model does (a NEL or a group separator, which `\\s` means in one dialect and not in
    the other, and a final newline, which Python's `$` lets through)."""
    from longhaul.workflows.dispute_resolution.spec import EMAIL_PATTERN, DisputeResolutionInput

    job = "job_" + "0" * 28
    try:
        DisputeResolutionInput.model_validate({"reconciliation_job_id": job, "default_contact": address})
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted == (re.search(EMAIL_PATTERN, address) is not None)
    if address == "ap@vendor.example":
        assert accepted
    if address.endswith("\n") or "\u0085" in address or "\u001d" in address:
        assert not accepted


def test_a_client_generator_makes_a_client_without_warnings(tmp_path: Path) -> None:
    """`openapi-python-client` (its output goes to a temporary directory; nothing generated is kept)."""
    document = tmp_path / "openapi.json"
    document.write_text(openapi_json())
    bin_dir = Path(sys.executable).parent
    output_path = str(tmp_path / "client")
    generated = subprocess.run(
        [
            str(bin_dir / "openapi-python-client"),
            "generate",
            "--path",
            str(document),
            "--meta",
            "none",
            "--output-path",
            output_path,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},  # its ruff post-hook
        timeout=300,
        check=False,
    )
    output = generated.stdout + generated.stderr
    assert generated.returncode == 0, output
    assert "warning" not in output.lower() and "unable" not in output.lower(), output
    modules = {p.parent.name: set() for p in (tmp_path / "client" / "api").glob("*/*.py")}
    for module in (tmp_path / "client" / "api").glob("*/*.py"):
        modules[module.parent.name].add(module.stem)
    assert set(modules) == set(TAGS), "one package of the client per tag"
    assert {"submit_job", "get_job"} <= modules[JOBS] and "get_result" in modules[RESULTS]
    assert "decide_review" in modules[REVIEWS] and "put_tenant_policy" in modules[ADMIN]
