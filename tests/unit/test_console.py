"""The web console as the API function serves it (no key needed, nothing from another host), and the routes it adds
to the API: who a key is (`/v1/me`), a job's workflow graph, a page of a job's document."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest

from handlers.api_console import CONSOLE_DIR, CONTENT_SECURITY_POLICY
from longhaul.core.auth import api_key_item
from longhaul.documents.parsing import parse_document
from longhaul.storage.artifacts import ArtifactStore
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.workflows.document_analysis.steps import ParsedGroup, _group_key
from tests.unit.api_helpers import BODY, assert_problem, submit
from tests.unit.conftest import KEY_A, KEY_B, TENANT_A, CallApi

pytestmark = pytest.mark.usefixtures("api_keys")
REVIEWER_KEY = "key-reviewer-a-0123456789"
SVG_NAMESPACE = "http://www.w3.org/2000/svg"  # an XML namespace name in graph.js, never fetched


class _References(HTMLParser):
    """Every URL the page itself names (src, href, action)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "href" and tag == "base":
                self.base = value
            elif name in ("src", "href", "action") and value is not None:
                self.urls.append(value)


def _page(call_api: CallApi, path: str = "/console") -> tuple[Any, _References]:
    response = call_api("GET", path)
    references = _References()
    references.feed(response.raw_body)
    return response, references


def test_the_console_page_is_served_without_a_key_and_says_where_it_lives(call_api: CallApi) -> None:
    response, references = _page(call_api)

    assert response.status == 200 and response.content_type.startswith("text/html")
    assert references.base == "/prod/console/"  # the stage the API is served under (API Gateway's default endpoint)
    assert response.header("Content-Security-Policy") == CONTENT_SECURITY_POLICY
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY and "connect-src 'self'" in CONTENT_SECURITY_POLICY
    assert response.header("X-Content-Type-Options") == "nosniff" and response.header("X-Frame-Options") == "DENY"


@pytest.mark.parametrize("path", ["/console/", "/console/jobs", "/console/jobs/job_0123", "/console/ops/dead-letters"])
def test_every_path_of_the_console_is_its_page(call_api: CallApi, path: str) -> None:
    response, references = _page(call_api, path)

    assert response.status == 200 and references.base == "/prod/console/"


def test_the_page_and_its_assets_name_no_other_host(call_api: CallApi) -> None:
    _, references = _page(call_api)
    local = [u for u in references.urls if not u.startswith(("data:", "#"))]
    files = {u.split("?")[0].removeprefix("assets/") for u in local if u.startswith("assets/")}
    for name in list(files):
        if name.endswith(".js"):
            files |= set(re.findall(r"from '\./([\w.-]+\.js)'", (CONSOLE_DIR / name).read_text()))

    assert local and all(not re.match(r"^([a-z]+:)?//", u) for u in local), local
    assert {"app.js", "graph.js", "style.css"} <= files
    for name in files:
        response = call_api("GET", f"/console/assets/{name}")
        assert response.status == 200, name
        text = response.raw_body.replace(SVG_NAMESPACE, "")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.IGNORECASE), name
        assert "@import" not in text and "url(http" not in text, name
    # The console's own page links only to itself and the API's docs (same origin, under the stage).
    assert {u for u in local if not u.startswith("assets/")} <= {"./", "../v1/docs"}


def test_an_asset_is_revalidated_by_its_etag(call_api: CallApi) -> None:
    first = call_api("GET", "/console/assets/app.js")
    again = call_api("GET", "/console/assets/app.js", headers={"If-None-Match": first.header("ETag") or ""})

    assert first.content_type.startswith("text/javascript") and first.header("Cache-Control") == "no-cache"
    assert again.status == 304 and again.raw_body == ""


@pytest.mark.parametrize("name", ["missing.js", "..%2Fhandlers%2Fapi.py", ".hidden.js", "app.py"])
def test_only_the_consoles_own_files_are_served(call_api: CallApi, name: str) -> None:
    assert_problem(call_api("GET", f"/console/assets/{name}"), 404, "not-found")


# ---------------------------------------------------------------------- who a key is


@pytest.mark.parametrize(
    ("key", "tenant", "role"),
    [(KEY_A, TENANT_A, "tenant"), (REVIEWER_KEY, TENANT_A, "reviewer"), ("key-operator-0123456789", "ops", "operator")],
)
def test_every_role_may_ask_who_its_key_is(
    call_api: CallApi, table: Any, operator_key: str, key: str, tenant: str, role: str
) -> None:
    table.put_item(Item=api_key_item(REVIEWER_KEY, TENANT_A, role="reviewer"))

    response = call_api("GET", "/v1/me", key=key)

    assert response.status == 200 and response.body == {"tenant_id": tenant, "role": role}


def test_without_a_known_key_there_is_nobody(call_api: CallApi) -> None:
    assert_problem(call_api("GET", "/v1/me"), 401, "unauthorized")
    assert_problem(call_api("GET", "/v1/me", key="not-a-key"), 401, "unauthorized")


# ---------------------------------------------------------------------- the graph and the pages


def test_a_jobs_graph_is_its_state_machines_states_for_its_tenant_and_operators(
    call_api: CallApi, table: Any, operator_key: str
) -> None:
    table.put_item(Item=api_key_item(REVIEWER_KEY, TENANT_A, role="reviewer"))
    job_id = submit(call_api).body["job_id"]

    mine = call_api("GET", f"/v1/jobs/{job_id}/graph", key=KEY_A)
    theirs = call_api("GET", f"/v1/jobs/{job_id}/graph", key=KEY_B)
    as_operator = call_api("GET", f"/v1/ops/jobs/{job_id}/graph", key=operator_key)
    as_reviewer = call_api("GET", f"/v1/jobs/{job_id}/graph", key=REVIEWER_KEY)

    assert mine.status == 200, mine.raw_body
    graph = mine.body
    assert graph["job_id"] == job_id and graph["start_at"] == "Done" and graph["execution"] == job_id
    assert [n["name"] for n in graph["nodes"]] == ["Done"] and graph["nodes"][0]["type"] == "Pass"
    assert {f["step"] for f in graph["fan_outs"]} == {"parse_documents", "ocr_pages", "build_index", "extract_evidence"}
    assert_problem(theirs, 404, "not-found")
    assert as_operator.status == 200 and as_operator.body["nodes"] == graph["nodes"]
    assert_problem(as_reviewer, 403, "forbidden")


def test_a_page_of_a_job_parsed_one_object_per_document_is_still_served(
    call_api: CallApi, s3: Any, bucket: str, checkpoints: CheckpointStore
) -> None:
    job_id = submit(call_api).body["job_id"]
    document = BODY["input"]["documents"][1]
    parsed = parse_document(index=1, name=document["name"], data=document["text"].encode(), media_type="text/plain")
    key = ArtifactStore(s3, bucket).put_json(f"work/{job_id}/parse_documents/001.json", parsed)  # the former layout
    checkpoints.put_step(job_id, "parse_documents", 1, {"status": "succeeded", "output": {"parsed_key": key}})

    page = call_api("GET", f"/v1/jobs/{job_id}/pages", key=KEY_A, query={"document": "notes.txt", "page": "1"})

    assert page.status == 200, page.raw_body
    assert page.body["text"] == document["text"]


def test_a_page_of_a_jobs_document_is_its_text_as_the_steps_read_it(
    call_api: CallApi, s3: Any, bucket: str, checkpoints: CheckpointStore
) -> None:
    job_id = submit(call_api).body["job_id"]
    document = BODY["input"]["documents"][1]
    parsed = parse_document(index=1, name=document["name"], data=document["text"].encode(), media_type="text/plain")
    # its group's object (the parse step writes one per group of documents), named by the document's item
    key = ArtifactStore(s3, bucket).put_json(_group_key(job_id, 0), ParsedGroup(documents=[parsed]))
    checkpoints.put_step(job_id, "parse_documents", 1, {"status": "succeeded", "output": {"parsed_key": key}})

    page = call_api("GET", f"/v1/jobs/{job_id}/pages", key=KEY_A, query={"document": "notes.txt", "page": "1"})
    missing = call_api("GET", f"/v1/jobs/{job_id}/pages", key=KEY_A, query={"document": "notes.txt", "page": "2"})
    not_parsed = call_api("GET", f"/v1/jobs/{job_id}/pages", key=KEY_A, query={"document": "contract.md", "page": "1"})
    theirs = call_api("GET", f"/v1/jobs/{job_id}/pages", key=KEY_B, query={"document": "notes.txt", "page": "1"})

    assert page.status == 200, page.raw_body
    assert page.body == {"document": "notes.txt", "page": 1, "text": document["text"], "source": "text"}
    for response in (missing, not_parsed, theirs):
        assert_problem(response, 404, "not-found")
