"""Memory in layers, as agents use it:

- session memory is the agent's conversation and scratchpad, in its turns' checkpoints (`engine.agent`);
- episodic memory: per tenant, what past jobs did about a subject (e.g. the disputes sent to a vendor), recorded by a
  workflow's tool (`record_episode`) and recalled with the platform's tool `recall_episodes`;
- long-term facts: per tenant, statements with provenance (the job, document, page and verbatim quote they came
  from) and a `valid_until`. A fact is used as is until then; after, it is re-checked against its source before use
  (`recall_facts`): the quote must still be on that page of the stored document and state the value. One that its
  source no longer supports (or whose source is gone) is retired, never shown again.

Every read and write names the job's tenant (`ToolContext.tenant_id`), never one the model proposes: a tenant never
reads another's memory. A memory's id derives from the tool call that recorded it, so a retried call writes the same
item, and the compensation `forget_memory` deletes what a call recorded (and brings back what it superseded).
"""

import hashlib
import re
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from botocore.exceptions import ClientError
from pydantic import Field

from longhaul.core import limits
from longhaul.core.contracts import FactSource
from longhaul.core.model import Model
from longhaul.core.records import MemoryRecord
from longhaul.documents.intake import StoredDocument, read_document
from longhaul.engine.spec import FORGET, Tool, Undo
from longhaul.engine.tools import ToolContext
from longhaul.services import Services
from longhaul.storage.artifacts import ArtifactStore
from longhaul.storage.memory import subject_key

_NUMBER = re.compile(r"\d+(?:[.,']\d+)*")


def memory_id(operation_id: str, part: str = "") -> str:
    return "mem_" + hashlib.sha256(f"{operation_id}/{part}".encode()).hexdigest()[:24]


# ---------------------------------------------------------------------- recording (for workflows' tools)


def record_episode(
    ctx: ToolContext, *, subject: str, text: str, details: dict[str, Any], part: str = ""
) -> MemoryRecord:
    """An episode of this job about `subject` (its id derives from the call: a retry writes the same one)."""
    assert ctx.operation_id is not None, "memory is written by a tool with a side effect (through the outbox)"
    return ctx.services.memory.put(
        MemoryRecord(
            memory_id=memory_id(ctx.operation_id, part),
            tenant_id=ctx.tenant_id,
            kind="episode",
            subject=subject,
            subject_key=subject_key(subject),
            text=text,
            job_id=ctx.job_id,
            recorded_at=ctx.services.now(),
            details=details,
            operation_id=ctx.operation_id,
        )
    )


class Remembered(Model):
    memory_id: str | None = Field(description="The fact recorded, or None when the same fact was already known.")
    superseded: list[str] = Field(default_factory=list, description="Facts of the same key it retired.")


def remember_fact(
    ctx: ToolContext,
    *,
    subject: str,
    key: str,
    value: str,
    text: str,
    provenance: FactSource,
    source: StoredDocument | None,
    valid_days: int = limits.DEFAULT_FACT_VALID_DAYS,
    part: str = "",
) -> Remembered:
    """A fact about `subject` with its provenance: nothing new when an active fact says the same (it is refreshed as
    verified); a different value of the same key supersedes (retires) the old one."""
    assert ctx.operation_id is not None, "memory is written by a tool with a side effect (through the outbox)"
    store, now = ctx.services.memory, ctx.services.now()
    mine = memory_id(ctx.operation_id, part)
    same_key = [f for f in store.facts(ctx.tenant_id, subject) if f.key == key and f.memory_id != mine]
    for fact in same_key:
        if fact.value == value:
            store.change(fact, {"verified_at": now, "valid_until": now + timedelta(days=valid_days)})
            return Remembered(memory_id=None)
    for fact in same_key:
        store.change(fact, {"status": "retired", "retired_reason": f"superseded by {mine}"})
    store.put(
        MemoryRecord(
            memory_id=mine,
            tenant_id=ctx.tenant_id,
            kind="fact",
            subject=subject,
            subject_key=subject_key(subject),
            text=text,
            job_id=ctx.job_id,
            recorded_at=now,
            key=key,
            value=value,
            provenance=provenance,
            source=source.model_dump(mode="json") if source else None,
            valid_until=now + timedelta(days=valid_days),
            verified_at=now,
            operation_id=ctx.operation_id,
        )
    )
    return Remembered(memory_id=mine, superseded=[f.memory_id for f in same_key])


# ---------------------------------------------------------------------- re-verification


def reverify(
    services: Services,
    fact: MemoryRecord,
    *,
    valid_days: int = limits.DEFAULT_FACT_VALID_DAYS,
    sources: ArtifactStore | None = None,
) -> MemoryRecord:
    """A stale fact checked against its source (read from `sources`, else `services.artifacts`): verified again
    (valid for `valid_days` more) or retired."""
    now = services.now()
    reason = _unsupported(sources or services.artifacts, fact)
    if reason is None:
        return services.memory.change(fact, {"verified_at": now, "valid_until": now + timedelta(days=valid_days)})
    return services.memory.change(fact, {"status": "retired", "retired_reason": reason})


def _unsupported(sources: ArtifactStore, fact: MemoryRecord) -> str | None:
    """Why the fact's source no longer supports it, or None when it does."""
    provenance = fact.provenance
    if provenance is None or fact.source is None:
        return "no stored source to check it against"
    document = StoredDocument.model_validate({**fact.source, "name": provenance.document, "index": 0})
    try:
        data = read_document(sources, document)
    except ClientError:
        return f"its source {provenance.document} is no longer available"
    from longhaul.documents.parsing import parse_document  # pypdf: only where a document is read

    parsed = parse_document(index=0, name=document.name, data=data, media_type=document.media_type)
    page = next((p.text for p in parsed.pages if p.number == provenance.page), None)
    if page is None or _flat(provenance.quote) not in _flat(page):
        return f"{provenance.document} page {provenance.page} no longer reads {provenance.quote!r}"
    if not supports(provenance.quote, fact.value or ""):
        return f"the quote {provenance.quote!r} does not state {fact.value!r}"
    return None


def supports(quote: str, value: str) -> bool:
    """Whether a quote states a value: each of its numbers is a number of the quote (`85` is `85.00`), and a value
    without numbers is written in it (case aside)."""
    numbers = [_decimal(n) for n in _NUMBER.findall(value)]
    if not numbers:
        return value.strip().casefold() in quote.casefold()
    written = {_decimal(n) for n in _NUMBER.findall(quote)}
    return all(n is not None and n in written for n in numbers)


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", "").replace("'", ""))
    except InvalidOperation:
        return None


def _flat(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------- the platform's memory tools


class RecallEpisodesInput(Model):
    subject: str = Field(min_length=1, max_length=200, description="Who or what, e.g. a vendor's name.")
    kind: str | None = Field(default=None, max_length=40, description="Only episodes of this kind (e.g. `dispute`).")
    limit: int = Field(default=5, ge=1, le=20)


class Episode(Model):
    memory_id: str
    subject: str
    summary: str
    job_id: str
    recorded_at: datetime
    details: dict[str, Any] = Field(default_factory=dict)


class RecallEpisodesOutput(Model):
    episodes: list[Episode]


def recall_episodes(ctx: ToolContext, request: RecallEpisodesInput) -> RecallEpisodesOutput:
    found = ctx.services.memory.episodes(
        ctx.tenant_id, request.subject, kind=request.kind, exclude_job=ctx.job_id, limit=request.limit
    )
    return RecallEpisodesOutput(
        episodes=[
            Episode(
                memory_id=r.memory_id,
                subject=r.subject,
                summary=r.text,
                job_id=r.job_id,
                recorded_at=r.recorded_at,
                details=r.details,
            )
            for r in found
        ]
    )


class RecallFactsInput(Model):
    subject: str = Field(min_length=1, max_length=200)
    key: str | None = Field(default=None, max_length=200, description="Only facts of this key.")


class Fact(Model):
    memory_id: str
    key: str | None
    value: str | None
    statement: str
    provenance: FactSource | None
    verified_at: datetime | None
    valid_until: datetime | None
    reverified: bool = Field(description="It was stale and its source was checked again just now.")


class RetiredFact(Model):
    memory_id: str
    key: str | None
    reason: str


class RecallFactsOutput(Model):
    facts: list[Fact]
    retired: list[RetiredFact] = Field(description="Stale facts their source no longer supports: retired now.")


def recall_facts(ctx: ToolContext, request: RecallFactsInput) -> RecallFactsOutput:
    now = ctx.services.now()
    facts: list[Fact] = []
    retired: list[RetiredFact] = []
    for fact in ctx.services.memory.facts(ctx.tenant_id, request.subject):
        if request.key is not None and fact.key != request.key:
            continue
        stale = fact.valid_until is None or fact.valid_until <= now
        checked = reverify(ctx.services, fact, sources=ctx.sources) if stale else fact
        if checked.status == "retired":
            retired.append(RetiredFact(memory_id=fact.memory_id, key=fact.key, reason=checked.retired_reason or ""))
            ctx.services.jobs.append_event(
                ctx.job_id,
                "fact_retired",
                step=ctx.step,
                item=ctx.turn,
                detail={"memory_id": fact.memory_id, "key": fact.key, "reason": checked.retired_reason},
            )
            continue
        facts.append(
            Fact(
                memory_id=checked.memory_id,
                key=checked.key,
                value=checked.value,
                statement=checked.text,
                provenance=checked.provenance,
                verified_at=checked.verified_at,
                valid_until=checked.valid_until,
                reverified=stale,
            )
        )
    return RecallFactsOutput(facts=facts, retired=retired)


class Forgotten(Model):
    forgotten: list[str]
    restored: list[str] = Field(default_factory=list)


def forget_memory(ctx: ToolContext, undo: Undo) -> Forgotten:
    """The compensation of a tool that recorded memory: delete what it recorded (its output's `memory_id`, or every
    `memory_ids`) and make active again what it superseded."""
    output = undo.output or {}
    ids = [str(i) for i in [output.get("memory_id"), *output.get("memory_ids", [])] if i]
    store = ctx.services.memory
    forgotten = [i for i in ids if store.delete(ctx.tenant_id, i)]
    restored = []
    for old in output.get("superseded", []):
        fact = store.get(ctx.tenant_id, str(old))
        if fact is not None and fact.status == "retired":
            store.change(fact, {"status": "active", "retired_reason": None})
            restored.append(fact.memory_id)
    return Forgotten(forgotten=forgotten, restored=restored)


MEMORY = "longhaul.engine.memory"
RECALL_EPISODES = Tool(
    name="recall_episodes",
    description="Past episodes of this tenant about a subject (e.g. earlier disputes with a vendor), newest first.",
    input_model=RecallEpisodesInput,
    output_model=RecallEpisodesOutput,
    run=f"{MEMORY}:recall_episodes",
    timeout_seconds=10,
)
RECALL_FACTS = Tool(
    name="recall_facts",
    description="Long-term facts of this tenant about a subject, each with its provenance (job, document, page, "
    "verbatim quote); a stale fact is re-checked against its source first, and retired if it no longer holds.",
    input_model=RecallFactsInput,
    output_model=RecallFactsOutput,
    run=f"{MEMORY}:recall_facts",
    timeout_seconds=30,  # a stale fact's source is read and parsed again
)
FORGET_MEMORY = Tool(
    name="forget_memory",
    description="Compensation: deletes the memory a call recorded.",
    input_model=Undo,
    output_model=Forgotten,
    run=f"{MEMORY}:forget_memory",
    side_effect="reversible",
    uses=frozenset({FORGET}),
    timeout_seconds=20,
)
