"""The batch lane's Task before a fan-out that calls a model: capture each item's first call and hand them to
`longhaul.guardrails.batch.submit`, which batches them (or resumes the wait at once: the step calls on demand).

An item's call is captured by running the step's own domain function for the item with a capturing gateway
(`ModelCalls.capturing`): it raises `Captured` at the item's first call, so the record is the very request the item
will make, and nothing is written or charged meanwhile. An item whose function fails before its call, or makes no
call, is left out (its item runs on demand, and fails there as it would).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from longhaul.core import faults
from longhaul.core.records import Job, Provenance
from longhaul.core.step_events import Item, StepEvent
from longhaul.engine.context import StepContext
from longhaul.engine.items import ItemBatch, ItemList
from longhaul.engine.spec import registry
from longhaul.guardrails import batch
from longhaul.guardrails.gateway import ModelCalls
from longhaul.storage.checkpoints import READ_ITEMS_MAX

if TYPE_CHECKING:
    from longhaul.services import Services


def items_of(services: Services, listed: Mapping[str, Any]) -> list[Item]:
    """A fan-out's items: inline, or read from its manifest."""
    items = ItemList.model_validate(listed)
    if items.items is not None:
        return list(items.items)
    return [i for b in services.artifacts.get_json(items.manifest_key) for i in ItemBatch.model_validate(b).items]


def captured(services: Services, event: StepEvent, job: Job) -> list[tuple[int, batch.Captured]]:
    """Each item's first model call, as the item will make it."""
    spec = registry()[event.input.workflow]
    over = spec.step(event.step).over
    assert over is not None
    source, _, field = over.partition(".")
    work = spec.work(event.step)
    done = set()
    found: list[tuple[int, batch.Captured]] = []
    items = items_of(services, event.input.steps[source][field])
    for start in range(0, len(items), READ_ITEMS_MAX):
        chunk = items[start : start + READ_ITEMS_MAX]
        _, records = services.checkpoints.read_items(job.job_id, event.step, [i.index for i in chunk])
        done |= {index for index, record in records.items() if record.succeeded and index is not None}
    provenance = Provenance(code_version=services.settings.code_version)
    for item in items:
        if item.index in done:
            continue
        one = event.model_copy(update={"item": item.index, "ref": item.ref, "token": None})
        ctx = StepContext(one, services, job_attempt=job.attempts, job=job, provenance=provenance)
        ctx._model = ModelCalls(services, job, event.step, item.index, job.attempts, provenance, capturing=True)
        try:
            work(ctx)
        except batch.Captured as call:
            found.append((item.index, call))
        except Exception:
            continue
    return found


def submit_batch(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The Task's body: decide the step's lane, batch its calls or resume the wait at once."""
    event = StepEvent.model_validate(raw_event)
    job = services.jobs.get_job(event.input.job_id)
    if job is None or job.finished:
        services.tokens and services.tokens.succeed(str(event.token), {"lane": "on_demand"})
        return {"lane": "on_demand"}
    calls = captured(services, event, job)
    outcome = batch.submit(
        services, services.batch_jobs, job, event.step, str(event.token), calls, role_arn=services.settings.batch_role
    )
    # (the local runtime's `crash-after-side-effect` at the step without an item: the process dies after submitting)
    faults.active().crash_point(event.step, None, job_id=job.job_id)
    return {"lane": outcome.lane, "records": outcome.records}
