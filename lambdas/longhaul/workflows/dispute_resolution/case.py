"""Where the dispute's working records are and how they are read: the case file (written by `load_reconciliation`),
each vendor's draft, the drafting agent's output, and the review's decision (which notices are withheld)."""

from longhaul.services import Services
from longhaul.storage import artifacts as keys
from longhaul.storage.memory import subject_key
from longhaul.workflows.dispute_resolution.models import CaseFile, Draft, Drafts
from longhaul.workflows.dispute_resolution.spec import NoticeEdits

LOAD_STEP, DRAFT_STEP, REVIEW_STEP, SEND_STEP = "load_reconciliation", "draft_notices", "review", "send_notices"


def case_key(job_id: str) -> str:
    return keys.work_key(job_id, LOAD_STEP, "case.json")


def load_case(services: Services, job_id: str) -> CaseFile:
    return CaseFile.model_validate(services.artifacts.get_json(case_key(job_id)))


def draft_key(job_id: str, vendor: str) -> str:
    return keys.work_key(job_id, DRAFT_STEP, f"notice-{subject_key(vendor)}.json")


def drafted_keys(services: Services, job_id: str) -> list[str]:
    """The keys of the drafted notices, as the drafting agent finished with them (none before)."""
    done = services.checkpoints.get_step(job_id, DRAFT_STEP, None)
    output_key = (done.output or {}).get("output_key") if done is not None and done.succeeded else None
    if not output_key:
        return []
    return [d.draft_key for d in Drafts.model_validate(services.artifacts.get_json(str(output_key))).drafts]


def drafts(services: Services, job_id: str) -> list[Draft]:
    """The drafted notices (none before the drafting agent finished)."""
    return [Draft.model_validate(services.artifacts.get_json(key)) for key in drafted_keys(services, job_id)]


def withheld(services: Services, job_id: str) -> set[str]:
    """Vendors (as memory files them) the reviewer held back; none without a review or with an approval."""
    decided = services.checkpoints.get_step(job_id, REVIEW_STEP, None)
    edits_key = (decided.output or {}).get("edits_key") if decided is not None and decided.succeeded else None
    if not edits_key:
        return set()
    edits = NoticeEdits.model_validate(services.artifacts.get_json(str(edits_key)))
    return {subject_key(v) for v in edits.withhold}


def approved(services: Services, job_id: str) -> list[Draft]:
    held = withheld(services, job_id)
    return [d for d in drafts(services, job_id) if subject_key(d.vendor) not in held]
