"""Run each workflow's eval dataset through the local platform, score it, print a table per workflow, write the scores
as JSON, and compare them with the committed baseline: a score worse than the baseline by more than the tolerance its
dataset states is a regression, and the command exits non-zero.

    make eval                                          # every case, the offline model (python -m evals)
    python -m evals --small                            # the small set `make test` runs
    LONGHAUL_MODEL_ROUTES='{"bedrock": {...}}' python -m evals --route bedrock   # any configured route
    python -m evals --update-baseline                  # accept the scores as the new baseline (an intended change)
    python -m evals --compare default,loose --repeat 3 # routes compared (evals.compare)
    python -m evals --ops [--small]                    # operational and cost evals under faults (evals.ops)

Datasets (`evals/datasets/<workflow>.json`) hold cases with their expected outcomes and the dataset's tolerance.
Scores per workflow:
- success rate: jobs that completed with everything expected (every fact, every page, faithful citations; every
  invoice's status, total and discrepancies; for a question the documents cannot answer: no claim at all);
- citation faithfulness: citations whose quote is verbatim (whitespace aside) on the page they cite, read from the
  source document itself (the text, the PDF's text layer; a page without one: the platform's OCR text of it);
- fact recall, page recall: expected facts the answer states, expected pages it cites;
- discrepancy precision and recall: (invoice, rule, field) found against the answer key;
- for the agent workflow (dispute resolution: a reconciliation, then its dispute, the review approved): tool selection
  (the tools a right run calls and those it has no reason to call, one send per notice), notices right per vendor
  (sent, to its address, disputing exactly the expected lines; none for a clean vendor) and no duplicate effect (one
  e-mail per notice, counted in the in-memory SES);
- model calls, tokens, cost (USD, as the job reports it) and latency (submit to finish) per job.
Cost and latency are printed, not gated: locally they follow the machine's load (Lambda time is measured in-process).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from io import BytesIO
from pathlib import Path
from typing import Any, Literal

import requests
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parent.parent
DATASETS = Path(__file__).resolve().parent / "datasets"
BASELINE = Path(__file__).resolve().parent / "baseline.json"
OPS_BASELINE = Path(__file__).resolve().parent / "ops-baseline.json"
RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_ROUTE = "default"
OPERATOR, TENANT, REVIEWER = "ops", "alpha", "alpha-reviewer"
# Better when higher (a drop beyond the tolerance is a regression) and when lower (a rise beyond it, relative).
HIGHER_IS_BETTER = (
    "success_rate",
    "citation_faithfulness",
    "fact_recall",
    "page_recall",
    "discrepancy_precision",
    "discrepancy_recall",
    "tool_selection",
    "notices_right_per_vendor",
    "no_duplicate_effect",
)
LOWER_IS_BETTER = ("model_calls_per_job", "tokens_per_job")
MEDIA_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain", ".pdf": "application/pdf"}


# --------------------------------------------------------------------------------------------------- datasets


class CitedPage(BaseModel):
    document: str
    page: int


class ExpectedDiscrepancy(BaseModel):
    rule: str
    field: str


class ExpectedInvoice(BaseModel):
    status: Literal["matched", "discrepancies", "unreadable"]
    total: str | None = None
    discrepancies: list[ExpectedDiscrepancy] = Field(default_factory=list)


class ExpectedLine(BaseModel):
    rule: str
    product_code: str | None = None


class ExpectedNotice(BaseModel):
    to: str
    lines: list[ExpectedLine]


class Case(BaseModel):
    id: str
    small: bool = False
    hard: str | None = Field(default=None, description="What makes it hard, for the reader of the dataset.")
    # document-analysis
    question: str | None = None
    documents: list[str] = Field(default_factory=list)
    facts: list[list[str]] = Field(default_factory=list, description="Each fact: the ways an answer may state it.")
    cite: list[CitedPage] = Field(default_factory=list)
    unanswerable: bool = False
    # invoice-reconciliation
    contract: str | None = None
    invoices: list[str] = Field(default_factory=list)
    expected: dict[str, ExpectedInvoice] = Field(default_factory=dict)
    # dispute-resolution (its reconciliation: `contract` and `invoices` above)
    contacts: dict[str, str] = Field(default_factory=dict)
    default_contact: str | None = None
    notices: dict[str, ExpectedNotice] = Field(default_factory=dict, description="By vendor: the notice it gets.")
    clean_vendors: list[str] = Field(default_factory=list)
    tools_called: dict[str, list[str]] = Field(
        default_factory=dict, description="By agent step: the tools a right run calls (each at least once)."
    )
    tools_not_called: dict[str, list[str]] = Field(
        default_factory=dict, description="By agent step: the tools a right run has no reason to call."
    )


class Dataset(BaseModel):
    workflow: str
    description: str = ""
    tolerance: dict[str, float]
    cases: list[Case]

    @classmethod
    def load(cls, path: Path) -> Dataset:
        return cls.model_validate_json(path.read_text())


def datasets(folder: Path = DATASETS) -> list[Dataset]:
    return [Dataset.load(p) for p in sorted(folder.glob("*.json"))]


# --------------------------------------------------------------------------------------------------- one job


@dataclass
class CaseScore:
    case: str
    status: str
    success: bool = False
    citations: int = 0
    faithful: int = 0
    facts: int = 0
    facts_found: int = 0
    pages: int = 0
    pages_cited: int = 0
    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    tool_checks: int = 0
    tool_checks_right: int = 0
    vendors: int = 0
    vendors_right: int = 0
    effects: int = 0
    duplicate_effects: int = 0
    model_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    model_usd: float = 0.0
    latency_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    job_id: str = ""


class Api:
    """The platform's API as a tenant (jobs) and an operator (a job's model calls)."""

    def __init__(self, platform: Any) -> None:
        self.base = platform.api_url
        self.tenant = {**platform.auth_header(TENANT), "Content-Type": "application/json"}
        self.operator = platform.auth_header(OPERATOR)
        self.reviewer = platform.auth_header(REVIEWER)

    def document(self, path: str) -> dict[str, Any]:
        """A request's `<document>`: a text inline, a PDF through an upload."""
        source = ROOT / path
        media_type = MEDIA_TYPES[source.suffix.lower()]
        if media_type != "application/pdf":
            return {"name": source.name, "media_type": media_type, "text": source.read_text()}
        ticket = self._json("POST", "/v1/uploads", {"filename": source.name, "media_type": media_type})
        put = requests.put(ticket["upload_url"], data=source.read_bytes(), headers=ticket["headers"], timeout=60)
        put.raise_for_status()
        return {"name": source.name, "upload_id": ticket["upload_id"]}

    def run(self, body: Mapping[str, Any], timeout: float = 900, until: Sequence[str] = ()) -> dict[str, Any]:
        """Submit a job and wait until it finishes (or reaches a status of `until`)."""
        job_id = self._json("POST", "/v1/jobs", body)["job_id"]
        return self.run_until_finished(job_id, timeout, until)

    def run_until_finished(self, job_id: str, timeout: float = 900, until: Sequence[str] = ()) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self._json("GET", f"/v1/jobs/{job_id}")
            if job["status"] in ("completed", "failed", "cancelled", "expired", *until):
                return job
            time.sleep(0.25)
        raise TimeoutError(f"job {job_id} did not finish in {timeout:.0f} s")

    def decide(self, review_id: str, decision: Mapping[str, Any]) -> None:
        """A review decided by the tenant's reviewer."""
        headers = {**self.reviewer, "Content-Type": "application/json"}
        url = f"{self.base}/v1/reviews/{review_id}/decision"
        response = requests.post(url, data=json.dumps(decision), headers=headers, timeout=60)
        if response.status_code >= 400:
            raise RuntimeError(f"POST {url}: {response.status_code} {response.text[:500]}")

    def result(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/jobs/{job_id}/result")

    def model_calls(self, job_id: str) -> int:
        calls = requests.get(f"{self.base}/v1/ops/jobs/{job_id}/calls", headers=self.operator, timeout=60)
        calls.raise_for_status()
        return sum(1 for c in calls.json()["calls"] if c["status"] == "settled")

    def _json(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        data = json.dumps(body) if body is not None else None
        response = requests.request(method, f"{self.base}{path}", data=data, headers=self.tenant, timeout=60)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:500]}")
        answer: dict[str, Any] = response.json()
        return answer


def _normal(text: str) -> str:
    """For comparing quotes and facts: one space for any run of whitespace, typographic quotes as plain ones."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return " ".join(text.split())


def source_pages(path: str) -> dict[int, str]:
    """A document's pages as the eval reads them, independently of the platform: a text's pages (form feeds), a
    PDF's text layer (pypdf); a page with no text layer is absent (only OCR reads it)."""
    source = ROOT / path
    if source.suffix.lower() != ".pdf":
        return {n: page for n, page in enumerate(source.read_text().split("\f"), start=1)}
    from pypdf import PdfReader

    reader = PdfReader(BytesIO(source.read_bytes()))
    return {n: text for n, page in enumerate(reader.pages, start=1) if (text := page.extract_text() or "").strip()}


def ocr_pages(platform: Any, job_id: str) -> dict[tuple[str, int], str]:
    """The platform's own text of each page it OCR'd (its chunks of that page), for the pages with no text layer."""
    from local.recording import reader

    job = reader(platform, job_id)
    chunks = []
    for batch in job.items("STEP#build_index#"):  # one item per batch of documents
        key = (batch.get("output") or {}).get("chunks_key")
        chunks += json.loads(job.read(str(key)) or b"[]") if key else []
    pages: dict[tuple[str, int], str] = {}
    for chunk in chunks:
        if chunk.get("source") == "ocr":
            page = (str(chunk["document"]), int(chunk["page"]))
            pages[page] = pages.get(page, "") + " " + str(chunk["text"])
    return pages


def _usage(api: Api, job: dict[str, Any], score: CaseScore) -> None:
    score.job_id = job["job_id"]
    score.model_calls = api.model_calls(job["job_id"])
    score.tokens = int(job["usage"]["input_tokens"]) + int(job["usage"]["output_tokens"])
    score.cost_usd = float((job.get("cost") or {}).get("total") or 0)
    score.model_usd = float(((job.get("cost") or {}).get("model") or {}).get("usd") or 0)
    if job.get("finished_at"):
        started, finished = datetime.fromisoformat(job["created_at"]), datetime.fromisoformat(job["finished_at"])
        score.latency_seconds = (finished - started).total_seconds()


def score_document_analysis(platform: Any, api: Api, case: Case, sla_class: str | None = None) -> CaseScore:
    body: dict[str, Any] = {
        "workflow": "document-analysis",
        "input": {"question": case.question, "documents": [api.document(d) for d in case.documents]},
    }
    if sla_class is not None:  # the class's retrieval depth (and its class route, when one is configured)
        body["sla_class"] = sla_class
    job = api.run(body)
    score = CaseScore(case.id, job["status"], facts=len(case.facts), pages=len(case.cite))
    _usage(api, job, score)
    if job["status"] != "completed":
        score.notes.append(f"ended {job['status']}: {(job.get('error') or {}).get('message')}")
        return score
    result = api.result(job["job_id"])
    claims, citations = result.get("claims") or [], result.get("citations") or []
    stated = _normal(" ".join([result.get("answer") or "", *(str(c.get("text") or "") for c in claims)])).casefold()
    score.facts_found = sum(1 for ways in case.facts if any(_normal(w).casefold() in stated for w in ways))
    cited = {(str(c["document"]), int(c["page"])) for c in citations}
    score.pages_cited = sum(1 for p in case.cite if (p.document, p.page) in cited)
    pages = {(Path(d).name, n): text for d in case.documents for n, text in source_pages(d).items()}
    pages |= {k: v for k, v in ocr_pages(platform, job["job_id"]).items() if k not in pages}
    score.citations = len(citations)
    for citation in citations:
        page = pages.get((str(citation["document"]), int(citation["page"])), "")
        if _normal(str(citation["quote"])) in _normal(page):
            score.faithful += 1
        else:
            score.notes.append(f"not on {citation['document']} p.{citation['page']}: {str(citation['quote'])[:60]!r}")
    if case.unanswerable:
        score.success = not claims and not citations
    else:
        everything = score.facts_found == score.facts and score.pages_cited == score.pages
        score.success = everything and score.faithful == score.citations
    return score


def score_invoice_reconciliation(platform: Any, api: Api, case: Case) -> CaseScore:
    assert case.contract is not None
    body = {
        "workflow": "invoice-reconciliation",
        "input": {"contract": api.document(case.contract), "invoices": [api.document(i) for i in case.invoices]},
    }
    job = api.run(body)
    expected = {(doc, d.rule, d.field) for doc, inv in case.expected.items() for d in inv.discrepancies}
    score = CaseScore(case.id, job["status"], false_negatives=len(expected))
    _usage(api, job, score)
    if job["status"] != "completed":
        score.notes.append(f"ended {job['status']}: {(job.get('error') or {}).get('message')}")
        return score
    invoices = {str(i["document"]): i for i in api.result(job["job_id"])["invoices"]}
    found = {
        (doc, str(d["rule"]), str(d["field"])) for doc, i in invoices.items() for d in i.get("discrepancies") or []
    }
    score.true_positives = len(found & expected)
    score.false_positives = len(found - expected)
    score.false_negatives = len(expected - found)
    right = True
    for document, want in case.expected.items():
        got = invoices.get(document) or {}
        total = (got.get("totals") or {}).get("total")
        if got.get("status") != want.status or (want.total is not None and total != want.total):
            right = False
            score.notes.append(f"{document}: {got.get('status')} total {total}, expected {want.status} {want.total}")
    score.success = right and not (found ^ expected)
    return score


def sent_messages() -> list[Any]:
    """Every e-mail the in-memory SES of this process sent (the platform runs in this process)."""
    from moto.ses.models import ses_backends

    return [m for account in ses_backends.values() for region in account.values() for m in region.sent_messages]


def _events(api: Api, job_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = api._json("GET", f"/v1/jobs/{job_id}/events" + (f"?cursor={cursor}" if cursor else ""))
        events += page["events"]
        cursor = page.get("next_cursor")
        if not cursor:
            return events


def score_dispute_resolution(platform: Any, api: Api, case: Case) -> CaseScore:
    """A reconciliation, then its dispute (the review approved by the tenant's reviewer): each vendor's notice (its
    address and its disputed lines, rule and product), no notice for a clean vendor, the agents' tool selection, and
    every side effect done once (the in-memory SES's e-mails, by the notice's operation id)."""
    assert case.contract is not None
    reconciliation = api.run(
        {
            "workflow": "invoice-reconciliation",
            "input": {"contract": api.document(case.contract), "invoices": [api.document(i) for i in case.invoices]},
        }
    )
    score = CaseScore(case.id, reconciliation["status"], vendors=len(case.notices) + len(case.clean_vendors))
    if reconciliation["status"] != "completed":
        score.notes.append(f"the reconciliation ended {reconciliation['status']}")
        return score
    body: dict[str, Any] = {
        "workflow": "dispute-resolution",
        "input": {"reconciliation_job_id": reconciliation["job_id"], "contacts": case.contacts},
    }
    if case.default_contact:
        body["input"]["default_contact"] = case.default_contact
    job = api.run(body, until=("waiting_for_review",))
    if job["status"] == "waiting_for_review":
        api.decide(job["review"]["review_id"], {"decision": "approve"})
        job = api.run_until_finished(job["job_id"])
    score.status = job["status"]
    _usage(api, job, score)
    events = _events(api, job["job_id"])
    called: dict[str, list[str]] = {}
    for event in events:
        if event["type"] == "agent_turn":
            called.setdefault(str(event["step"]), []).extend(event["detail"]["tools"])
    for step, tools in case.tools_called.items():
        for tool in tools:
            score.tool_checks += 1
            score.tool_checks_right += tool in called.get(step, [])
    for step, tools in case.tools_not_called.items():
        for tool in tools:
            score.tool_checks += 1
            score.tool_checks_right += tool not in called.get(step, [])
    sends = called.get("send_notices", []).count("send_notice")
    score.tool_checks += 1  # one send per notice, never two
    score.tool_checks_right += sends == len(case.notices)
    done = [e["detail"] for e in events if e["type"] == "effect_done" and e["detail"].get("acted")]
    operations = {str(d["operation_id"]) for d in done}
    score.effects = len(operations)
    mail = sent_messages()
    for operation in operations:
        acted = sum(1 for d in done if d["operation_id"] == operation)
        mailed = sum(1 for m in mail if operation in m.body and "retract" not in str(m.subject).lower())
        score.duplicate_effects += max(acted, mailed) > 1
    if job["status"] != "completed":
        score.notes.append(f"ended {job['status']}: {(job.get('error') or {}).get('message')}")
        return score
    result = api.result(job["job_id"])
    notices = {str(n["vendor"]): n for n in result.get("notices") or []}
    for vendor, want in case.notices.items():
        got = notices.get(vendor) or {}
        lines = sorted((str(x["rule"]), x.get("product_code")) for x in got.get("lines") or [])
        wanted = sorted((x.rule, x.product_code) for x in want.lines)
        if got.get("status") == "sent" and got.get("to") == want.to and lines == wanted:
            score.vendors_right += 1
        else:
            score.notes.append(f"{vendor}: {got.get('status')} to {got.get('to')} lines {lines}, expected {wanted}")
    for vendor in case.clean_vendors:
        if vendor in notices or vendor not in (result.get("clean_vendors") or []):
            score.notes.append(f"{vendor}: a clean vendor, noticed or not listed clean")
        else:
            score.vendors_right += 1
    extra = sorted(set(notices) - set(case.notices))
    if extra:
        score.notes.append(f"notices nobody expected: {extra}")
    score.success = (
        score.vendors_right == score.vendors
        and not extra
        and score.tool_checks_right == score.tool_checks
        and score.duplicate_effects == 0
    )
    return score


SCORERS = {
    "document-analysis": score_document_analysis,
    "invoice-reconciliation": score_invoice_reconciliation,
    "dispute-resolution": score_dispute_resolution,
}


# --------------------------------------------------------------------------------------------------- scores


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def summarize(workflow: str, scores: Sequence[CaseScore]) -> dict[str, float | int | None]:
    jobs = len(scores)
    skipped = ("case", "status", "notes", "job_id")
    total = {k: sum(getattr(s, k) for s in scores) for k in asdict(scores[0]) if k not in skipped}
    summary: dict[str, float | int | None] = {"jobs": jobs, "success_rate": _ratio(int(total["success"]), jobs)}
    if workflow == "document-analysis":
        summary["citation_faithfulness"] = _ratio(total["faithful"], total["citations"])
        summary["fact_recall"] = _ratio(total["facts_found"], total["facts"])
        summary["page_recall"] = _ratio(total["pages_cited"], total["pages"])
    elif workflow == "dispute-resolution":
        summary["tool_selection"] = _ratio(total["tool_checks_right"], total["tool_checks"])
        summary["notices_right_per_vendor"] = _ratio(total["vendors_right"], total["vendors"])
        summary["no_duplicate_effect"] = _ratio(jobs - sum(1 for s in scores if s.duplicate_effects), jobs)
    else:
        found = total["true_positives"] + total["false_positives"]
        summary["discrepancy_precision"] = _ratio(total["true_positives"], found)
        summary["discrepancy_recall"] = _ratio(
            total["true_positives"], total["true_positives"] + total["false_negatives"]
        )
    summary["model_calls_per_job"] = round(total["model_calls"] / jobs, 2)
    summary["tokens_per_job"] = round(total["tokens"] / jobs, 1)
    summary["cost_per_job_usd"] = round(total["cost_usd"] / jobs, 6)
    summary["latency_per_job_seconds"] = round(total["latency_seconds"] / jobs, 2)
    return summary


@dataclass(frozen=True)
class Regression:
    workflow: str
    metric: str
    baseline: float
    now: float | None
    tolerance: float

    def __str__(self) -> str:
        where = f"{self.workflow}: {self.metric} {self.now}"
        return f"{where} against the baseline's {self.baseline} (tolerance {self.tolerance})"


def compare(
    summaries: Mapping[str, Mapping[str, float | int | None]],
    baseline: Mapping[str, Mapping[str, float | int | None]],
    tolerances: Mapping[str, Mapping[str, float]],
) -> list[Regression]:
    """Every gated score worse than its baseline by more than the dataset's tolerance (a missing score, e.g. no
    citation where the baseline had some, is worse)."""
    found: list[Regression] = []
    for workflow, summary in summaries.items():
        before = baseline.get(workflow) or {}
        for metric in (*HIGHER_IS_BETTER, *LOWER_IS_BETTER):
            was, now = before.get(metric), summary.get(metric)
            if was is None:
                continue
            tolerance = float(tolerances.get(workflow, {}).get(metric, 0.0))
            if now is None:
                found.append(Regression(workflow, metric, float(was), None, tolerance))
                continue
            worse = (
                float(now) < float(was) - tolerance - 1e-9
                if metric in HIGHER_IS_BETTER
                else float(now) > float(was) * (1 + tolerance) + 1e-9
            )
            if worse:
                found.append(Regression(workflow, metric, float(was), float(now), tolerance))
    return found


# --------------------------------------------------------------------------------------------------- the command


COLUMNS = {
    "document-analysis": ("citation_faithfulness", "fact_recall", "page_recall"),
    "invoice-reconciliation": ("discrepancy_precision", "discrepancy_recall"),
    "dispute-resolution": ("tool_selection", "notices_right_per_vendor", "no_duplicate_effect"),
}
LABELS = {
    "success_rate": "success",
    "citation_faithfulness": "faithful",
    "fact_recall": "facts",
    "page_recall": "pages",
    "discrepancy_precision": "disc. precision",
    "discrepancy_recall": "disc. recall",
    "tool_selection": "tools",
    "notices_right_per_vendor": "notices/vendor",
    "no_duplicate_effect": "once",
    "model_calls_per_job": "calls/job",
    "tokens_per_job": "tokens/job",
    "cost_per_job_usd": "USD/job",
    "latency_per_job_seconds": "s/job",
}


def _case_row(workflow: str, s: CaseScore) -> list[str]:
    one = summarize(workflow, [s])
    return [s.case, s.status, *(_cell(one[m]) for m in _metrics(workflow))]


def _metrics(workflow: str) -> list[str]:
    tail = ("model_calls_per_job", "tokens_per_job", "cost_per_job_usd", "latency_per_job_seconds")
    return ["success_rate", *COLUMNS.get(workflow, ()), *tail]


def _cell(value: float | int | None) -> str:
    return "-" if value is None else f"{value:g}"


def print_tables(scores: Mapping[str, list[CaseScore]], summaries: Mapping[str, Mapping[str, Any]], out: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, width=160)
    for workflow, cases in scores.items():
        table = Table(title=f"{workflow}: {len(cases)} jobs", title_justify="left")
        for column in ("case", "status", *(LABELS[m] for m in _metrics(workflow))):
            table.add_column(column, justify="left" if column in ("case", "status") else "right")
        for score in cases:
            table.add_row(*_case_row(workflow, score))
        table.add_row(
            "all", "", *(_cell(summaries[workflow][m]) for m in _metrics(workflow)), style="bold", end_section=True
        )
        console.print(table)
        for score in cases:
            for note in score.notes[:3]:
                console.print(f"  {score.case}: {note}", markup=False, highlight=False)


def evaluate(
    platform: Any, chosen: Sequence[Dataset], *, small: bool
) -> tuple[dict[str, list[CaseScore]], dict[str, dict[str, Any]]]:
    api = Api(platform)
    scores: dict[str, list[CaseScore]] = {}
    for dataset in chosen:
        cases = [c for c in dataset.cases if c.small or not small]
        if cases:
            scores[dataset.workflow] = [SCORERS[dataset.workflow](platform, api, c) for c in cases]
    return scores, {w: summarize(w, s) for w, s in scores.items()}


# --------------------------------------------------------------------------------------------------- depths

DEPTH_METRICS = ("success_rate", "fact_recall", "page_recall", "citation_faithfulness")


def depth_score(summary: Mapping[str, Any]) -> float:
    """One score of a depth's answers: the mean of its success rate, fact and page recall and faithfulness."""
    values = [float(summary.get(m) or 0) for m in DEPTH_METRICS]
    return round(sum(values) / len(values), 4)


def evaluate_depths(platform: Any, chosen: Sequence[Dataset], *, small: bool) -> dict[str, dict[str, Any]]:
    """Document analysis's cases once per SLA class (each class's retrieval depth): scores and model dollars."""
    from longhaul.workflows.document_analysis.retrieval import DEPTHS

    api = Api(platform)
    cases = [c for d in chosen if d.workflow == "document-analysis" for c in d.cases if c.small or not small]
    rows: dict[str, dict[str, Any]] = {}
    for sla_class, depth in DEPTHS.items():
        scores = [score_document_analysis(platform, api, case, sla_class) for case in cases]
        summary = summarize("document-analysis", scores)
        summary["model_usd_per_job"] = round(sum(s.model_usd for s in scores) / max(1, len(scores)), 6)
        summary["score"] = depth_score(summary)
        rows[sla_class] = {"depth": depth._asdict(), "summary": summary}
    return rows


def print_depths(rows: Mapping[str, Mapping[str, Any]], out: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="document-analysis: retrieval depth by SLA class", title_justify="left")
    columns = ("class", "top-k", "group", "rerank", *(LABELS[m] for m in DEPTH_METRICS), "score", "calls/job",
               "tokens/job", "model $/job", "model $/1,000 jobs")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "class" else "right")
    for sla_class, row in rows.items():
        depth, summary = row["depth"], row["summary"]
        table.add_row(
            sla_class,
            str(depth["top_k"]),
            str(depth["group_size"]),
            "yes" if depth["rerank"] else "no",
            *(_cell(summary[m]) for m in DEPTH_METRICS),
            _cell(summary["score"]),
            _cell(summary["model_calls_per_job"]),
            _cell(summary["tokens_per_job"]),
            f"{summary['model_usd_per_job']:.6f}",
            f"{summary['model_usd_per_job'] * 1000:.2f}",
        )
    Console(file=out, width=180).print(table)
    if "interactive" in rows and "batch" in rows and rows["batch"]["summary"]["score"]:
        ratio = rows["interactive"]["summary"]["score"] / rows["batch"]["summary"]["score"]
        print(f"interactive depth's score is {ratio:.1%} of batch depth's (target: at least 90%)", file=out)


# The routes an eval's own platform adds to those configured (`LONGHAUL_MODEL_ROUTES`): the offline model's loose
# sibling (`longhaul.adapters.models.offline.LOOSE_MODEL_ID`), so that two routes differ locally.
EVAL_ROUTES = {"loose": {"provider": "offline", "model_id": "longhaul-offline-loose-1"}}


def eval_routes() -> dict[str, str]:
    """The eval platform's `LONGHAUL_MODEL_ROUTES`: the configured routes and `EVAL_ROUTES` (a configured route of
    the same name wins)."""
    import os

    configured = json.loads(os.environ.get("LONGHAUL_MODEL_ROUTES") or "{}")
    return {"LONGHAUL_MODEL_ROUTES": json.dumps({**EVAL_ROUTES, **configured})}


def _routes(route: str) -> str:
    """Every model step of every workflow on `route` (`LONGHAUL_STEP_ROUTES`)."""
    from longhaul.workflows import REGISTRY

    return json.dumps({step: route for spec in REGISTRY.values() for step in spec.model_steps})


def main(argv: Sequence[str] | None = None, *, out: Any = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals", description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="only the small set (the cases marked `small`)")
    parser.add_argument("--route", default=DEFAULT_ROUTE, help="the model route of every model step (configured in "
                        "LONGHAUL_MODEL_ROUTES); default: the platform's default route")  # fmt: skip
    parser.add_argument("--workflow", action="append", help="only this workflow's dataset (repeatable)")
    parser.add_argument("--out", type=Path, help="where to write the scores (default: evals/results/<set>.json)")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument("--update-baseline", action="store_true", help="store these scores as the baseline")
    parser.add_argument("--depths", action="store_true", help="document analysis once per SLA class: each retrieval "
                        "depth's scores and model dollars (a table; no baseline gate)")  # fmt: skip
    parser.add_argument("--compare", metavar="ROUTE_A,ROUTE_B", help="every case on each of these routes: success, "
                        "latency per call and per job, timeouts and errors, first-try schema adherence, repair and "
                        "escalation rates, tokens and dollars per completed job, output variance under retry (a table "
                        "and evals/results/<set>-compare.json; no baseline gate)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, metavar="K", help="with --compare: each case K times per "
                        "route (variance under retry needs K >= 2)")  # fmt: skip
    parser.add_argument("--ops", action="store_true", help="the operational and cost evals: jobs under injected "
                        "faults, gated against evals/ops-baseline.json (with --small: each scenario once)")  # fmt: skip
    parser.add_argument("--ops-baseline", type=Path, default=OPS_BASELINE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ops:
        from evals.ops import main_ops

        return main_ops(args, out)
    chosen = [d for d in datasets() if not args.workflow or d.workflow in args.workflow]
    kind = "small" if args.small else "full"
    routes = [r.strip() for r in (args.compare or "").split(",") if r.strip()]
    if args.compare is not None and len(routes) < 2:
        parser.error("--compare needs two routes or more, e.g. --compare default,loose")
    if args.repeat < 1:
        parser.error("--repeat is at least 1")

    from local import lambda_runtime
    from local.platform import LocalPlatform

    running = LocalPlatform.current()
    platform = running or LocalPlatform.start(ROOT, env_overrides=eval_routes())
    before = lambda_runtime.environment_overrides()
    try:
        if args.route != DEFAULT_ROUTE:
            platform.set_function_environment(LONGHAUL_STEP_ROUTES=_routes(args.route))
        if routes:
            from evals.compare import compare_routes

            def on(route: str) -> None:
                platform.set_function_environment(LONGHAUL_STEP_ROUTES=_routes(route))

            compared = compare_routes(platform, chosen, routes, repeat=args.repeat, small=args.small, set_route=on)
        elif args.depths:
            rows = evaluate_depths(platform, chosen, small=args.small)
        else:
            scores, summaries = evaluate(platform, chosen, small=args.small)
    finally:
        lambda_runtime.configure(environment_overrides=before)
        if running is None:
            platform.stop()

    if routes:
        from evals.compare import print_comparison

        print_comparison(compared, out)
        target = args.out or RESULTS / f"{kind}-compare.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        summaries_only = {r: v["summary"] for r, v in compared["routes"].items()}
        print(json.dumps(summaries_only, indent=1, sort_keys=True), file=out)
        target.write_text(json.dumps(compared, indent=1, sort_keys=True) + "\n")
        print(f"comparison written to {target}", file=out)
        return 0

    if args.depths:
        print_depths(rows, out)
        target = args.out or RESULTS / f"{kind}-depths.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
        print(f"depths written to {target}", file=out)
        return 0

    print_tables(scores, summaries, out)
    stored = json.loads(args.baseline.read_text()) if args.baseline.exists() else {}
    baseline = stored.get(kind, {}).get(args.route, {})
    tolerances = {d.workflow: d.tolerance for d in chosen}
    regressions = compare(summaries, baseline, tolerances)
    report = {
        "set": kind,
        "route": args.route,
        "workflows": {w: {"scores": summaries[w], "cases": [asdict(s) for s in scores[w]]} for w in scores},
        "baseline": {w: baseline.get(w) for w in scores},
        "regressions": [asdict(r) for r in regressions],
    }
    target = args.out or RESULTS / f"{kind}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(f"scores written to {target}", file=out)
    if args.update_baseline:
        stored.setdefault(kind, {}).setdefault(args.route, {}).update(summaries)
        args.baseline.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        print(f"baseline updated: {args.baseline} ({kind}, route {args.route})", file=out)
        return 0
    if not baseline:
        print(f"no baseline for the {kind} set on route {args.route!r}: nothing to compare", file=out)
        return 0
    for regression in regressions:
        print(f"REGRESSION {regression}", file=out)
    print("no regression beyond the datasets' tolerances" if not regressions else "", file=out)
    return 1 if regressions else 0
