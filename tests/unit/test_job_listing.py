"""Job listings (`JobStore.list_jobs` and `page_jobs`, from `longhaul.storage.listing`) against moto's DynamoDB with
the synthesized table's indexes: a tenant's jobs by creation, jobs in a status by last update, every tenant's jobs
by creation; pages without gaps or repeats, and cursors that resume only the listing that handed them out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from longhaul.core.contracts import JobStatus
from longhaul.storage.jobs import JobStore, NewJob
from longhaul.storage.listing import BadCursor
from tests.unit.conftest import FakeClock

S = JobStatus


def seed(store: JobStore, clock: FakeClock, tenants: list[str]) -> list[str]:
    """One job per entry, a second apart, oldest first; returns the job ids (job_00, job_01, …)."""
    ids = []
    for n, tenant in enumerate(tenants):
        clock.advance(timedelta(seconds=1))
        job_id = f"job_{n:02d}"
        store.create_job(NewJob(job_id, tenant, "document-analysis", f"work/{job_id}/input.json", "h", "offline:t", 42))
        ids.append(job_id)
    return ids


def ids(jobs: list[Any]) -> list[str]:
    return [j.job_id for j in jobs]


def listed(store: JobStore, **query: Any) -> tuple[list[list[str]], list[str | None]]:
    """Every page of a listing (page size 2): the job ids of each page and each page's cursor."""
    pages: list[list[str]] = []
    cursors: list[str | None] = []
    cursor = None
    for _ in range(20):
        jobs, cursor = store.page_jobs(limit=2, cursor=cursor, **query)
        pages.append(ids(jobs))
        cursors.append(cursor)
        if cursor is None:
            break
    return pages, cursors


# ---------------------------------------------------------------------- whole listings (the sweep's)


def test_list_jobs_by_tenant_is_newest_first_and_filters_by_status(store: JobStore, clock: FakeClock) -> None:
    # Given three jobs of tenant a (one running) and one of tenant b
    seed(store, clock, ["tenant-a", "tenant-a", "tenant-b", "tenant-a"])
    store.transition("job_01", S.RUNNING, event="job_started")

    # Then a tenant's listing is its own jobs, newest first; with a status, only those
    assert ids(store.list_jobs(tenant_id="tenant-a")) == ["job_03", "job_01", "job_00"]
    assert ids(store.list_jobs(tenant_id="tenant-a", limit=2)) == ["job_03", "job_01"]
    assert ids(store.list_jobs(tenant_id="tenant-a", status=S.RUNNING)) == ["job_01"]
    assert ids(store.list_jobs(tenant_id="tenant-b", status=S.RUNNING)) == []


def test_list_jobs_by_status_follows_the_status_and_orders_by_last_update(store: JobStore, clock: FakeClock) -> None:
    seed(store, clock, ["tenant-a"] * 3)
    clock.advance(timedelta(minutes=1))
    store.transition("job_00", S.RUNNING, event="job_started")  # job_00 leaves `queued`, updated last

    assert ids(store.list_jobs(status=S.QUEUED, oldest_first=True)) == ["job_01", "job_02"]
    assert ids(store.list_jobs(status=S.QUEUED)) == ["job_02", "job_01"]
    assert ids(store.list_jobs(status=S.RUNNING, limit=None)) == ["job_00"]


def test_list_jobs_without_a_filter_is_every_tenants_jobs_by_creation(store: JobStore, clock: FakeClock) -> None:
    seed(store, clock, ["tenant-a", "tenant-b", "tenant-c"])
    store.transition("job_00", S.RUNNING, event="job_started")  # an update does not reorder the listing

    assert ids(store.list_jobs()) == ["job_02", "job_01", "job_00"]
    assert ids(store.list_jobs(oldest_first=True, limit=None)) == ["job_00", "job_01", "job_02"]
    assert ids(store.list_jobs(limit=1)) == ["job_02"]


# ---------------------------------------------------------------------- pages (the API's)


def test_every_tenants_jobs_are_listed_newest_first_in_pages_without_gaps_or_repeats(
    store: JobStore, clock: FakeClock
) -> None:
    job_ids = seed(store, clock, ["tenant-a", "tenant-b", "tenant-c", "tenant-a", "tenant-b"])
    store.transition("job_00", S.RUNNING, event="job_started")  # updates do not reorder the listing

    pages, cursors = listed(store)

    assert pages == [["job_04", "job_03"], ["job_02", "job_01"], ["job_00"]]
    assert cursors[-1] is None and all(cursors[:-1])
    assert sorted(j for page in pages for j in page) == job_ids
    # the index holds keys only: the listing reads the whole jobs, as they are now
    [first] = [j for j in store.page_jobs(limit=50)[0] if j.job_id == "job_00"]
    assert first.status == S.RUNNING and first.tenant_id == "tenant-a" and first.input_key == "work/job_00/input.json"


def test_a_tenants_jobs_in_a_status_are_paged_through_the_filter(store: JobStore, clock: FakeClock) -> None:
    seed(store, clock, ["tenant-a"] * 6 + ["tenant-b"])
    for job_id in ("job_01", "job_02", "job_04"):
        store.transition(job_id, S.RUNNING, event="job_started")

    pages, _ = listed(store, tenant_id="tenant-a", status=S.RUNNING)
    everyone, _ = listed(store, status=S.QUEUED)

    assert [j for page in pages for j in page] == ["job_04", "job_02", "job_01"]
    assert [j for page in everyone for j in page] == ["job_06", "job_05", "job_03", "job_00"]


def test_an_exact_last_page_ends_the_listing(store: JobStore, clock: FakeClock) -> None:
    seed(store, clock, ["tenant-a"] * 2)

    jobs, cursor = store.page_jobs(tenant_id="tenant-a", limit=2)

    assert ids(jobs) == ["job_01", "job_00"]
    assert cursor is None or store.page_jobs(tenant_id="tenant-a", limit=2, cursor=cursor)[0] == []


def test_a_cursor_resumes_only_the_listing_that_handed_it_out(store: JobStore, clock: FakeClock) -> None:
    seed(store, clock, ["tenant-a", "tenant-a", "tenant-a", "tenant-b", "tenant-b", "tenant-b"])
    _, of_a = store.page_jobs(tenant_id="tenant-a", limit=1)
    _, of_all = store.page_jobs(limit=1)
    assert of_a and of_all

    for misuse in (
        {"tenant_id": "tenant-b", "cursor": of_a},  # never into another tenant's jobs
        {"cursor": of_a},
        {"tenant_id": "tenant-a", "cursor": of_all},
        {"status": S.QUEUED, "cursor": of_all},
        {"cursor": "not-a-cursor"},
        {"cursor": "eyJpbmRleCI6ICJieV9jcmVhdGVkIn0"},  # {"index": "by_created"}: no key
    ):
        with pytest.raises(BadCursor):
            store.page_jobs(limit=1, **misuse)
