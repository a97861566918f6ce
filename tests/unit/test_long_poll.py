"""The events long-poll (`GET …/events?wait=`): it answers as soon as an event after the cursor is written, with an
empty page when the wait runs out, at once for a finished job, and never past what is left of the function's time.

The waits are a fake clock's: `LongPoll.sleep` advances it and may write an event "meanwhile"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from handlers import api_shared
from longhaul.api.jobs import JobService, LongPoll
from longhaul.core import limits
from longhaul.core.auth import Principal
from longhaul.core.contracts import JobStatus
from longhaul.services import services as wired_services
from longhaul.storage.jobs import JobStore
from tests.unit.api_helpers import assert_problem, submit
from tests.unit.conftest import KEY_A, TENANT_A, CallApi, LambdaContext

pytestmark = pytest.mark.usefixtures("api_keys")
CALLER = Principal(tenant_id=TENANT_A)


@dataclass
class FakeWait:
    """A monotonic clock that moves only when slept on; `on_sleep(n)` runs after the n-th sleep (from 1)."""

    now: float = 1000.0
    on_sleep: Callable[[int], None] = lambda _n: None

    def __post_init__(self) -> None:
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        self.on_sleep(len(self.sleeps))

    def monotonic(self) -> float:
        return self.now

    def policy(self) -> LongPoll:
        return LongPoll(sleep=self.sleep, monotonic=self.monotonic)


def _service(wait: FakeWait) -> JobService:
    return JobService(wired_services(), wait.policy())


def _queued_job(call_api: CallApi) -> str:
    return str(submit(call_api).body["job_id"])  # its one event: job_queued, seq 1


def test_the_first_event_written_while_a_long_poll_waits_is_answered_at_once(
    call_api: CallApi, table: Any, settings_env: dict[str, str]
) -> None:
    job_id = _queued_job(call_api)
    store = JobStore(table)
    wait = FakeWait(
        on_sleep=lambda n: store.append_event(job_id, "step_started", step="parse_documents") if n == 3 else 0
    )

    with _environment(settings_env):
        page = _service(wait).events(CALLER, job_id, "1", 100, wait_seconds=20)

    assert [(e.seq, e.type) for e in page.events] == [(2, "step_started")]
    assert wait.sleeps == [0.05, 0.1, 0.2], "read again with back-off, and answered at the first read that finds it"


def test_without_an_event_the_long_poll_answers_an_empty_page_when_its_wait_runs_out(
    call_api: CallApi, settings_env: dict[str, str]
) -> None:
    job_id = _queued_job(call_api)
    wait = FakeWait()

    with _environment(settings_env):
        page = _service(wait).events(CALLER, job_id, "1", 100, wait_seconds=5)

    assert page.events == [] and page.next_cursor is None
    assert sum(wait.sleeps) == pytest.approx(5)
    assert max(wait.sleeps) == LongPoll().longest, "the back-off is capped: a new event waits at most that long"


def test_events_already_after_the_cursor_are_answered_without_waiting(
    call_api: CallApi, settings_env: dict[str, str]
) -> None:
    job_id = _queued_job(call_api)
    wait = FakeWait()

    with _environment(settings_env):
        page = _service(wait).events(CALLER, job_id, None, 100, wait_seconds=20)

    assert [e.type for e in page.events] == ["job_queued"]
    assert wait.sleeps == []


def test_a_finished_job_is_answered_at_once(call_api: CallApi, table: Any, settings_env: dict[str, str]) -> None:
    job_id = _queued_job(call_api)
    store = JobStore(table)
    store.transition(job_id, JobStatus.RUNNING, event="job_started")
    store.transition(job_id, JobStatus.FAILED, event="job_failed")
    wait = FakeWait()

    with _environment(settings_env):
        page = _service(wait).events(CALLER, job_id, "3", 100, wait_seconds=20)

    assert page.events == []
    assert wait.sleeps == [], "nothing more is coming: no reason to hold the caller"


def test_the_route_waits_as_asked(call_api: CallApi, monkeypatch: pytest.MonkeyPatch) -> None:
    job_id = _queued_job(call_api)
    wait = FakeWait()
    monkeypatch.setattr(api_shared, "job_service", lambda: JobService(wired_services(), wait.policy()))

    response = call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A, query={"cursor": "1", "wait": "3"})

    assert response.status == 200, response.raw_body
    assert response.body == {"events": [], "next_cursor": None}
    assert sum(wait.sleeps) == pytest.approx(3)


def test_the_wait_stays_inside_the_functions_time(
    call_api: CallApi, monkeypatch: pytest.MonkeyPatch, settings_env: dict[str, str]
) -> None:
    """A function with 5 s left waits 2 s at most (it keeps ANSWER_MARGIN_SECONDS to answer), whatever `wait` says."""
    from handlers import api
    from longhaul.core.settings import function_environment
    from tests.unit.conftest import rest_event

    job_id = _queued_job(call_api)
    wait = FakeWait()
    monkeypatch.setattr(api_shared, "job_service", lambda: JobService(wired_services(), wait.policy()))
    event = rest_event(
        "GET",
        f"/v1/jobs/{job_id}/events",
        headers={"Authorization": f"Bearer {KEY_A}"},
        query={"cursor": "1", "wait": "20"},
    )

    with function_environment(settings_env):
        raw = api.handler(event, _ContextWithTimeLeft(remaining_ms=5000))

    assert raw["statusCode"] == 200, raw["body"]
    assert sum(wait.sleeps) == pytest.approx(5 - api_shared.ANSWER_MARGIN_SECONDS)


@pytest.mark.parametrize("value", ["-1", str(limits.MAX_EVENTS_WAIT_SECONDS + 1), "soon"])
def test_a_wait_outside_its_range_is_422_naming_it(call_api: CallApi, value: str) -> None:
    job_id = _queued_job(call_api)

    response = call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A, query={"wait": value})

    problem = assert_problem(response, 422, "invalid-request")
    assert [e["loc"] for e in problem["errors"]] == [["query", "wait"]]


@dataclass
class _ContextWithTimeLeft(LambdaContext):
    remaining_ms: int = 29_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def _environment(settings_env: dict[str, str]) -> Any:
    from longhaul.core.settings import function_environment

    return function_environment(settings_env)
