"""A tenant's memory: episodes and long-term facts with provenance, kept per tenant; stale facts re-checked
against their source before use (and retired when it no longer says so); what a tool call recorded is forgotten
by its compensation. The stores are the real ones on moto, the clock is faked."""

from __future__ import annotations

from datetime import timedelta

import pytest

from longhaul.core.contracts import FactSource, JobStatus
from longhaul.core.records import Job, MemoryRecord
from longhaul.documents.intake import StoredDocument
from longhaul.engine.memory import (
    RecallEpisodesInput,
    RecallFactsInput,
    forget_memory,
    recall_episodes,
    recall_facts,
    record_episode,
    remember_fact,
    supports,
)
from longhaul.engine.spec import Undo
from longhaul.engine.tools import ToolContext
from longhaul.services import Services
from longhaul.storage.memory import BadMemoryCursor, subject_key
from longhaul.workflows import REGISTRY
from tests.unit.conftest import FakeClock
from tests.unit.test_sweep import create, read

CONTRACT = "Product Code  Description        Price\nTL-100        Torque wrench      120.00\n"
SOURCE_KEY = "work/job_x/source/000"


@pytest.fixture
def job(services: Services) -> Job:
    return read(services.jobs, create(services, to=[JobStatus.RUNNING]))


def ctx(services: Services, job: Job, operation: str = "op_1", *, tenant: str | None = None) -> ToolContext:
    owner = job if tenant is None else job.model_copy(update={"tenant_id": tenant})
    return ToolContext(services, owner, REGISTRY["dispute-resolution"], "send_notices", 0, 0, operation_id=operation)


def remember(services: Services, job: Job, operation: str = "op_f1", value: str = "120.00 USD", **kwargs):
    services.artifacts.put_bytes(SOURCE_KEY, CONTRACT.encode(), "text/plain")
    return remember_fact(
        ctx(services, job, operation),
        subject="Orion Tools Ltd",
        key="contract-price:TL100",
        value=value,
        text=f"The agreed unit price of TL-100 is {value}",
        provenance=FactSource(job_id="job_recon", document="prices.txt", page=1, quote="TL-100  Torque wrench  120.00"),
        source=StoredDocument(index=0, name="prices.txt", media_type="text/plain", key=SOURCE_KEY),
        **kwargs,
    )


def test_episodes_are_recalled_by_subject_newest_first_and_never_across_tenants(
    services: Services, job: Job, clock: FakeClock
) -> None:
    record_episode(ctx(services, job, "op_1"), subject="Orion Tools Ltd", text="first", details={"kind": "dispute"})
    clock.advance(timedelta(days=1))
    record_episode(ctx(services, job, "op_2"), subject="orion tools ltd.", text="second", details={"kind": "dispute"})
    record_episode(ctx(services, job, "op_3"), subject="Orion Tools Ltd", text="other", details={"kind": "audit"})
    other_job = read(services.jobs, create(services, 2, to=[JobStatus.RUNNING]))

    found = recall_episodes(ctx(services, other_job), RecallEpisodesInput(subject="ORION TOOLS LTD", kind="dispute"))
    mine = recall_episodes(ctx(services, job), RecallEpisodesInput(subject="Orion Tools Ltd"))
    elsewhere = recall_episodes(
        ctx(services, other_job, tenant="tenant-b"), RecallEpisodesInput(subject="Orion Tools Ltd")
    )

    assert [e.summary for e in found.episodes] == ["second", "first"]
    assert mine.episodes == []  # a job does not recall its own episodes
    assert elsewhere.episodes == []  # another tenant's memory is another partition


def test_a_fact_is_recorded_once_and_a_new_value_supersedes_the_old(services: Services, job: Job) -> None:
    first = remember(services, job, "op_f1")
    same = remember(services, job, "op_f2")
    changed = remember(services, job, "op_f3", value="125.00 USD")

    assert first.memory_id is not None and same.memory_id is None
    assert changed.memory_id is not None and changed.superseded == [first.memory_id]
    facts = services.memory.facts("tenant-a", "Orion Tools Ltd", active_only=False)
    assert {f.memory_id: f.status for f in facts} == {first.memory_id: "retired", changed.memory_id: "active"}

    forgotten = forget_memory(ctx(services, job, "op_f3-undo"), Undo(
        operation_id="op_f3", tool="confirm_contract_price", input={}, output=changed.model_dump()
    ))  # fmt: skip

    assert forgotten.forgotten == [changed.memory_id] and forgotten.restored == [first.memory_id]
    (left,) = services.memory.facts("tenant-a", "Orion Tools Ltd")
    assert left.memory_id == first.memory_id and left.status == "active"


def test_a_fresh_fact_is_used_as_is(services: Services, job: Job) -> None:
    remember(services, job)
    services.artifacts.put_bytes(SOURCE_KEY, b"a different document", "text/plain")  # not read while fresh

    (fact,) = recall_facts(ctx(services, job), RecallFactsInput(subject="Orion Tools Ltd")).facts

    assert not fact.reverified and fact.value == "120.00 USD"


def test_a_stale_fact_its_source_still_supports_is_verified_again(
    services: Services, job: Job, clock: FakeClock
) -> None:
    remember(services, job, valid_days=7)
    clock.advance(timedelta(days=8))

    recalled = recall_facts(ctx(services, job), RecallFactsInput(subject="Orion Tools Ltd"))

    (fact,) = recalled.facts
    assert fact.reverified and fact.verified_at == clock.now() and recalled.retired == []
    assert fact.valid_until is not None and fact.valid_until > clock.now()


@pytest.mark.parametrize(
    ("source", "reason"),
    [(b"TL-100  Torque wrench  135.00\n", "no longer reads"), (None, "no longer available")],
    ids=["changed", "gone"],
)
def test_a_stale_fact_its_source_no_longer_supports_is_retired(
    services: Services, job: Job, clock: FakeClock, source: bytes | None, reason: str
) -> None:
    remembered = remember(services, job)
    if source is None:
        services.artifacts.s3.delete_object(Bucket=services.artifacts.bucket, Key=SOURCE_KEY)
    else:
        services.artifacts.put_bytes(SOURCE_KEY, source, "text/plain")
    clock.advance(timedelta(days=30))

    recalled = recall_facts(ctx(services, job), RecallFactsInput(subject="Orion Tools Ltd"))

    assert recalled.facts == []
    (retired,) = recalled.retired
    assert retired.memory_id == remembered.memory_id and reason in retired.reason
    assert services.memory.facts("tenant-a", "Orion Tools Ltd") == []
    assert "fact_retired" in [e.type for e in services.jobs.list_events(job.job_id)[0]]


def test_a_quote_supports_a_value_only_with_its_numbers() -> None:
    assert supports("TL-100  Torque wrench  120.00", "120 USD")
    assert supports("Net 30 days", "net 30 days")
    assert not supports("TL-100  Torque wrench  120.00", "125.00 USD")
    assert not supports("Payment on receipt", "net 30 days")


def test_operators_page_and_delete_a_tenants_memory_and_only_its_own(services: Services, job: Job) -> None:
    for n in range(3):
        record_episode(ctx(services, job, f"op_{n}"), subject=f"Vendor {n}", text=f"e{n}", details={})
    record_episode(ctx(services, job, "op_b", tenant="tenant-b"), subject="Vendor 0", text="b", details={})
    store = services.memory

    first, cursor = store.page("tenant-a", limit=2)
    second, end = store.page("tenant-a", limit=2, cursor=cursor)

    assert [r.text for r in first + second] == ["e0", "e1", "e2"] and end is None
    with pytest.raises(BadMemoryCursor):
        store.page("tenant-a", cursor="bm90LWEta2V5")
    assert store.delete("tenant-b", first[0].memory_id) is False  # not that tenant's
    assert store.delete_all("tenant-a", subject="vendor 1") == 1
    assert [r.text for r in store.page("tenant-a")[0]] == ["e0", "e2"]
    assert store.delete_all("tenant-a") == 2 and store.page("tenant-a")[0] == []
    assert [r.text for r in store.page("tenant-b")[0]] == ["b"]


def test_subjects_are_filed_regardless_of_case_spacing_and_punctuation() -> None:
    assert subject_key("Falcon Facility Products Ltd.") == subject_key("falcon  facility products ltd")
    assert subject_key("Falcon Ltd") != subject_key("Falcon Inc")


def test_a_memory_is_its_tenants_record(services: Services, job: Job) -> None:
    record = record_episode(ctx(services, job), subject="Orion", text="x", details={"kind": "dispute"})
    assert isinstance(record, MemoryRecord) and record.tenant_id == "tenant-a" and record.view().job_id == job.job_id
