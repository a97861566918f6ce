"""What operators read about a job's model calls: each call as the budget ledger has it (route, model, prompt version
and hash, tokens, cost, the code and workflow versions that made it) with links to the exact request and the raw
response, which the model gateway keeps in the job's artifacts under their hashes (they expire with the job's other
intermediate artifacts).

Personal data: a tenant whose policy redacts some kinds (`redact`) has its prompts and responses kept redacted (the
gateway's `_keep`); one kept before the policy said so is redacted here when an operator reads it, with the policy in
force then. No operator role reads them unredacted (`longhaul.core.auth`).

Reaches AWS through the stores only (the ledger, the artifact store).
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from longhaul.core.budgets import usd
from longhaul.core.contracts import CallLinks, KeptPrompt, KeptResponse, ModelCallList, ModelCallView
from longhaul.core.problems import NotFound
from longhaul.core.records import JOB_ID, Charge, Job
from longhaul.core.redaction import Redactor
from longhaul.services import Services
from longhaul.storage.artifacts import prompt_key, response_key

SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _job(services: Services, job_id: str) -> Job:
    job = services.jobs.get_job(job_id) if JOB_ID.match(job_id) else None
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    return job


def model_calls(services: Services, job_id: str, *, base_url: str) -> ModelCallList:
    """Every model call of the job (every attempt's), in the order they were made."""
    _job(services, job_id)
    ledger = sorted(services.budgets.ledger(job_id), key=lambda c: (c.at, c.charge_id))
    return ModelCallList(job_id=job_id, calls=[_view(c, f"{base_url}/v1/ops/jobs/{job_id}") for c in ledger])


def _view(charge: Charge, job_url: str) -> ModelCallView:
    links = None
    if charge.prompt_hash:
        response = f"{job_url}/responses/{charge.response_hash}" if charge.response_hash else None
        links = CallLinks(prompt=f"{job_url}/prompts/{charge.prompt_hash}", response=response)
    return ModelCallView(
        charge_id=charge.charge_id,
        step=charge.step,
        item=charge.item,
        status=charge.status,
        at=charge.at,
        route=charge.route,
        provider=charge.provider,
        model_id=charge.model_id,
        prompt_version=charge.prompt_version,
        prompt_hash=charge.prompt_hash,
        response_hash=charge.response_hash,
        input_tokens=charge.input_tokens,
        output_tokens=charge.output_tokens,
        cost_usd=usd(charge.cost_micro),
        code_version=charge.code_version,
        workflow_version=charge.workflow_version,
        links=links,
    )


def kept_prompt(services: Services, job_id: str, prompt_hash: str) -> KeptPrompt:
    """The exact request a call of the job sent (with placeholders for the personal data its tenant's policy
    redacts)."""
    job = _job(services, job_id)
    kept = KeptPrompt.model_validate(_kept(services, job_id, prompt_hash, prompt_key, "prompt"))
    redactor = _late(services, job, kept.redacted)
    if redactor is None:
        return kept
    update = {
        "system": redactor.redact(kept.system),
        "prompt": redactor.redact(kept.prompt),
        "instructions": redactor.redact(kept.instructions) if kept.instructions else kept.instructions,
        "redacted": sorted(redactor.kinds),
    }
    return kept.model_copy(update=update)


def kept_response(services: Services, job_id: str, response_hash: str) -> KeptResponse:
    """The raw response a call of the job got (with placeholders for the personal data its tenant's policy
    redacts)."""
    job = _job(services, job_id)
    kept = KeptResponse.model_validate(_kept(services, job_id, response_hash, response_key, "response"))
    redactor = _late(services, job, kept.redacted)
    if redactor is None:
        return kept
    return kept.model_copy(update={"text": redactor.redact(kept.text), "redacted": sorted(redactor.kinds)})


def _late(services: Services, job: Job, redacted: list[str] | None) -> Redactor | None:
    """A redactor for a copy kept before the tenant's policy redacted (or redacted fewer kinds): None when the policy
    redacts nothing the copy does not already."""
    kinds = set(services.budgets.policy(job.tenant_id).redact) | set(redacted or ())
    if not kinds or kinds == set(redacted or ()):
        return None
    return Redactor(kinds)


def _kept(services: Services, job_id: str, digest: str, key_of: object, what: str) -> object:
    assert callable(key_of)
    key = key_of(job_id, digest) if SHA256.match(digest) else None
    if key is None or services.artifacts.head(key) is None:
        raise NotFound(f"job {job_id} kept no {what} {digest!r} (kept ones expire with its intermediate artifacts)")
    try:
        return services.artifacts.get_json(key)
    except (ValueError, ValidationError) as error:  # pragma: no cover - written by the gateway as JSON
        raise NotFound(f"the kept {what} {digest!r} is unreadable") from error
