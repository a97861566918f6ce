"""Schemathesis hooks: what an OpenAPI schema cannot say, given to the cases the fuzzer means to be valid.

A request can match its schema and still be refused for a reason no schema states: it names an upload that does not
exist, reuses an Idempotency-Key with another payload, names a cursor this listing never handed out, two documents
share a name, a contract lists no prices, a callback's host is not public, a route is not configured, a replay names
a step of another workflow, a dispute names a reconciliation that is not a completed one of its tenant, a job
supersedes one that is not its tenant's (each a 422 naming the field, as the OpenAPI document says). The fuzzer's
`positive_data_acceptance` check expects a schema-valid request to be accepted, so each positive case gets here what
a real client would send: real uploads of the tenant (`UPLOADS_ENV`, made before the run), a fresh key, no cursor,
unique names, a priced contract, no callback, route or job to supersede, no replay step (its default), approve for
an edit, a policy change and a tenant erasure to a tenant of its own (not the run's, whose jobs follow), the run key's
completed reconciliation (`RECONCILIATION_ENV`) with a contact for its notices, a bulk action's fresh key and a filter
on a tenant of its own. Negative cases are left as generated (they must be refused), and every check still runs on
every case.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import schemathesis

UPLOADS_ENV = "LONGHAUL_FUZZ_UPLOADS"  # {"text": upload_id, "archive": …, "invoices_archive": …}
RECONCILIATION_ENV = "LONGHAUL_FUZZ_RECONCILIATION"  # a completed invoice-reconciliation job of the run's key
NOTICE_CONTACT = "disputes@example.com"
POLICY_TENANT = "fuzz-policies"  # the tenant whose policy valid PUTs and PATCHes change
ERASED_TENANT = "fuzz-erasure"  # the tenant whose data a valid tenant erasure erases
CONTRACT = (
    "PRICE AGREEMENT\nCurrency: USD\n\nProduct Code   Description           Agreed Unit Price\n"
    "-------------  --------------------  -----------------\nNW-1001        Steel bracket, 40 mm               4.75\n"
)
LISTINGS = (
    "list_jobs",
    "ops_list_jobs",
    "get_events",
    "ops_get_events",
    "list_reviews",
    "ops_list_tenant_memory",
    "list_audit",
    "ops_list_audit",
)
REPORTS = ("get_usage_report", "get_ops_report")


def _uploads() -> dict[str, str]:
    uploads: dict[str, str] = json.loads(os.environ.get(UPLOADS_ENV) or "{}")
    return uploads


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return case
    return _realistic(case)


@schemathesis.hook
def before_add_examples(context: Any, examples: list[Any]) -> None:
    """The schema's own examples (the Examples phase, which `map_case` does not see) get the same: an example names
    a placeholder upload or reconciliation, which a real client replaces with its own."""
    for index, case in enumerate(examples):
        examples[index] = _realistic(case)


def _realistic(case: Any) -> Any:
    operation = case.operation.definition.raw.get("operationId")
    if operation in LISTINGS and isinstance(case.query, dict):
        case.query.pop("cursor", None)  # a cursor is only ever one a listing handed out
    if operation == "submit_job" and isinstance(case.body, dict):
        if case.headers and "idempotency-key" in {k.lower() for k in case.headers}:
            for name in [k for k in case.headers if k.lower() == "idempotency-key"]:
                case.headers[name] = f"fuzz-{uuid.uuid4().hex}"  # a reused key with another payload is a 422
        _realistic_job(case.body)
    if operation == "replay_job" and isinstance(case.body, dict):
        case.body.pop("from_step", None)  # a step of the job's own workflow: by default, where it failed
    if operation in ("bulk_replay_jobs", "bulk_terminate_jobs") and isinstance(case.body, dict):
        if case.headers and "idempotency-key" in {k.lower() for k in case.headers}:
            for name in [k for k in case.headers if k.lower() == "idempotency-key"]:
                case.headers[name] = f"fuzz-{uuid.uuid4().hex}"  # a reused key with another request is a 422
        case.body.pop("from_step", None)  # (a step some jobs' workflows lack only refuses those jobs, but is noise)
        # A bulk action of its own tenant's jobs: executed, it must not end or replay the jobs the run follows.
        given = case.body.get("filter")
        case.body["filter"] = {**(given if isinstance(given, dict) else {}), "tenant_id": POLICY_TENANT}
    if operation in ("put_tenant_policy", "patch_tenant_policy"):
        if isinstance(case.body, dict):
            case.body.pop("routes", None)  # routes are the deployment's configuration
        if isinstance(case.path_parameters, dict):
            # A tenant of its own: a valid policy with a lower ceiling would make the run's later valid jobs 422s.
            case.path_parameters["tenant_id"] = POLICY_TENANT
    if operation == "erase_tenant_data" and isinstance(case.path_parameters, dict):
        # A tenant of its own: erasing the run's tenant would erase the jobs the run follows.
        case.path_parameters["tenant_id"] = ERASED_TENANT
    if (
        operation == "decide_review"
        and isinstance(case.body, dict)
        and case.body.get("decision") in ("edit", "complete")
    ):
        # Edits are the reviewed workflow's, and `complete` is for a review of kind `complete` (a failed job handed to
        # a person): neither can the schema say.
        case.body = {"decision": "approve"}
    if operation in REPORTS and isinstance(case.query, dict):
        # A window the schema cannot bound: `since` before `until`, at most 400 days long.
        case.query["since"] = "7d"
        case.query.pop("until", None)
    return case


def _realistic_job(body: dict[str, Any]) -> None:
    body.pop("callback_url", None)  # must resolve to a public address
    body.pop("route", None)  # must be a configured route
    body.pop("supersedes", None)  # must name a job of the tenant (a 422 naming `supersedes` otherwise)
    body.pop("then", None)  # its input must be the next workflow's, with references into this one's result
    job_input = body.get("input")
    if not isinstance(job_input, dict):
        return
    uploads = _uploads()
    documents = [d for d in (job_input.get("documents"), job_input.get("invoices")) if isinstance(d, list)]
    if isinstance(job_input.get("contract"), dict):
        contract = job_input["contract"]
        job_input["contract"] = {"name": contract.get("name") or "contract.txt", "text": CONTRACT}
    taken = {job_input["contract"]["name"]} if isinstance(job_input.get("contract"), dict) else set()
    for listed in documents:
        for index, document in enumerate(listed):
            if not isinstance(document, dict):
                continue
            if document.get("upload_id"):
                document["upload_id"] = uploads.get("text", document["upload_id"])
            name = document.get("name")
            if isinstance(name, str) and name in taken:  # names are unique within a job (citations use them)
                document["name"] = f"{index}-{uuid.uuid4().hex[:8]}.txt"
            taken.add(document.get("name"))
    for field in ("archive", "invoices_archive"):
        if isinstance(job_input.get(field), dict):
            job_input[field]["upload_id"] = uploads.get(field, job_input[field].get("upload_id"))
    if isinstance(job_input.get("resolve_disputes"), dict):  # the addresses are checked by dispute resolution's model
        job_input["resolve_disputes"] = {"default_contact": NOTICE_CONTACT}
    if "reconciliation_job_id" in job_input:  # a dispute names a completed reconciliation of the same tenant
        job_input["reconciliation_job_id"] = os.environ.get(RECONCILIATION_ENV) or job_input["reconciliation_job_id"]
        job_input["default_contact"] = NOTICE_CONTACT  # every vendor with discrepancies needs somewhere to go
