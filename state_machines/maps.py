"""The fan-out Maps of the house policy: an inline Map for a short item list, a Distributed Map for a long one.

A fan-out runs over an `ItemList` (`longhaul.engine.items`): `count`, `manifest_key` and, while they are few, the
`items`. A Choice on `count` picks the branch:

- one item (a step whose list may hold one item, `single`): its Task alone, no Map around it (a job of one batch
  pays one transition for it, as a plain step would, plus the count and the Choice);
- inline (count <= `INLINE_MAP_MAX_ITEMS`): a Map over `items` in the execution itself;
- distributed (above): a Distributed Map whose ItemReader reads the manifest (batches of items) from the artifacts
  bucket, one child execution per batch; each child runs an inline Map over its batch's items. Child executions
  keep their own histories, so the parent's history grows by a few events per batch, not per item; the
  ResultWriter keeps the children's results out of the parent's state.

Both branches run the very same per-item processor (built twice: state names are unique per definition), so an item
is one Lambda invocation, one checkpoint, one fault index and one dead letter whatever the branch. Every item runs
even when some fail (a failing item records its failure, sends its own dead letter and yields `true`); after the
Map the job fails once (`ItemsFailed`) if any item failed. The inline branch tallies its results; the distributed
branch cannot see them, so a small platform function counts the step's committed items in the checkpoint store.
"""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks

from longhaul.core import limits
from longhaul.core.errors import ITEMS_FAILED, JOB_PAUSED, JOB_STOPPED
from longhaul.core.schema import MAP_RESULTS_PREFIX
from longhaul.core.step_events import TallyEvent, payload
from state_machines.parts import WorkflowParts
from state_machines.policy import STOPPED_ERRORS

# Builds one copy of a step's per-item processor; its argument prefixes every state name of the copy.
ProcessorFactory = Callable[[str], sfn.IChainable]
# Builds the Task that runs a list's only item outside any Map: (its state name, where its failure path ends).
SingleFactory = Callable[[str, sfn.IChainable], sfn.TaskStateBase]
# Builds a grouped step's Task over a group of items: (its state name, the path of the group's items, the path of the
# workflow state, its result path, where a failed group ends once its items' failures are recorded, where a stopped
# job goes, where a paused one goes: None, its own pause wait).
GroupFactory = Callable[[str, str, str, str, sfn.IChainable, sfn.IChainable, sfn.IChainable | None], sfn.TaskStateBase]


def item_map(
    b: WorkflowParts,
    name: str,
    make_processor: ProcessorFactory,
    *,
    max_concurrency: int | None = None,
    skip_empty: bool = False,
    single: SingleFactory | None = None,
) -> sfn.Chain:
    """The fan-out of step `name` over its `over` ItemList: a Choice on its count → one item's Task, or an inline or
    distributed Map → a verdict Choice; three transitions besides the items' own (two for one item run alone).

    `skip_empty` (container steps): an empty list goes on to the next state at once (one transition). `single`: a
    list of one item runs that item's Task alone; its failure is recorded and dead-lettered as an item's, and the job
    fails with the same summary as after a Map (`ItemsFailed`, from the items that did not commit).
    """
    over = f"$.steps.{b.spec.step(name).over}"
    counted = f"{over}.count"
    concurrency = max_concurrency or b.policy.map_max_concurrency
    # The summary names the failed items from the Map's own outcomes (inline) or the items that did not commit
    # (distributed: its results stay in S3), never only from what the items' recorders got to write.
    items_failed = b.failure_path(
        f"{name} items",
        job_path="$.job_id",
        end=b.job_failed,
        step=name,
        error=ITEMS_FAILED,
        dead_letter=False,
        outcomes_path=f"$.fanout.{name}.outcomes",
    )
    batched_items_failed = _counted_items_failed(b, f"{name} batched items", name, counted)

    inline = _inline(b, name, make_processor, over, concurrency)
    inline_verdict = sfn.Choice(b, f"{name}: any item failed?").when(
        sfn.Condition.boolean_equals(f"$.fanout.{name}.any_failed", True), items_failed
    )
    inline.next(inline_verdict)

    child = _batch_child(b, name, make_processor, concurrency)
    distributed = _distributed(b, name, child, over, f"batches of {limits.MAP_BATCH_ITEMS} items")
    distributed_verdict = sfn.Choice(b, f"{name}: any batched item failed?").when(
        sfn.Condition.boolean_equals(f"$.fanout_tally.{name}.any_failed", True), batched_items_failed
    )
    distributed.next(_tally_task(b, name, reenter=distributed)).next(distributed_verdict)

    choice = sfn.Choice(b, f"{name}: inline or distributed?")
    ends: list[sfn.INextable] = []
    if single is not None:
        alone = single(f"{name} (one item)", batched_items_failed)
        choice.when(sfn.Condition.number_equals(counted, 1), alone)
        ends.append(alone)  # straight on to the next step: no verdict to take
    choice.when(sfn.Condition.number_greater_than(counted, limits.INLINE_MAP_MAX_ITEMS), distributed)
    for verdict in (inline_verdict, distributed_verdict):  # no item failed: on to the next state
        ends.extend(verdict.afterwards(include_otherwise=True).end_states)
    if skip_empty:
        choice.when(sfn.Condition.number_greater_than(counted, 0), inline)
        ends.extend(choice.afterwards(include_otherwise=True).end_states)
    else:
        choice.otherwise(inline)
    return sfn.Chain.custom(choice, ends, inline_verdict)


def _counted_items_failed(b: WorkflowParts, state_prefix: str, name: str, counted: str) -> sfn.IChainable:
    """The job's failure after a fan-out whose item outcomes are not at hand (a Distributed Map's stay in S3; a
    group's items are not the Map's): the summary names the items of the `counted` list that did not commit."""
    return b.failure_path(
        state_prefix,
        job_path="$.job_id",
        end=b.job_failed,
        step=name,
        error=ITEMS_FAILED,
        dead_letter=False,
        count_path=counted,
    )


def group_map(
    b: WorkflowParts, name: str, make_group: GroupFactory, *, max_concurrency: int | None = None
) -> sfn.Chain:
    """The fan-out of a grouped step `name` over its `over` ItemList's groups (`longhaul.engine.items`): a Choice →
    its only group's Task (a job of small documents: two transitions for the whole fan-out), an inline Map over the
    groups, or a Distributed Map (one group per child execution) → a verdict Choice.

    A group's Task runs each of its items as its own item; a failed group's recorder records its failed items, and
    the job fails after the fan-out with the same summary as any fan-out's (`ItemsFailed`, from the items that did
    not commit and were not left unrun by their group).
    """
    over = f"$.steps.{b.spec.step(name).over}"
    counted = f"{over}.count"
    concurrency = max_concurrency or b.policy.map_max_concurrency
    items_failed = _counted_items_failed(b, f"{name} groups", name, counted)

    def in_map(prefix: str, items: str, state_input: str) -> sfn.IChainable:
        failed = sfn.Pass(b, f"{prefix} group failed", result=sfn.Result.from_boolean(True))
        stopped = sfn.Fail(b, f"{prefix} group stopped", error=JOB_STOPPED, cause="The job stopped.")
        paused = sfn.Fail(b, f"{prefix} group paused", error=JOB_PAUSED, cause="The job paused.")
        return make_group(f"{prefix} group", items, state_input, "$", failed, stopped, paused)

    inline = sfn.Map(
        b,
        name,
        items_path=f"{over}.groups",
        item_selector={"items.$": "$$.Map.Item.Value.items", "input.$": "$"},
        max_concurrency=concurrency,
        # a group yields `true` when one of its items failed
        result_selector={"any_failed.$": "States.ArrayContains($, true)"},
        result_path=f"$.fanout.{name}",
        comment=f"Fan-out of {name} over {over}.groups (inline: at most {limits.INLINE_MAP_MAX_ITEMS} items)",
    )
    inline.item_processor(in_map(name, "$.items", "$.input"))
    _catch_stops_and_failures(b, name, inline, f"{name} map")
    inline_verdict = sfn.Choice(b, f"{name}: any group failed?").when(
        sfn.Condition.boolean_equals(f"$.fanout.{name}.any_failed", True), items_failed
    )
    inline.next(inline_verdict)

    child = in_map(f"{name} batch", "$.batch.items", "$.input")
    distributed = _distributed(b, name, child, over, f"groups of at most {limits.ITEM_GROUP_MAX_ITEMS} items")
    distributed_verdict = sfn.Choice(b, f"{name}: any batched group failed?").when(
        sfn.Condition.boolean_equals(f"$.fanout_tally.{name}.any_failed", True), items_failed
    )
    distributed.next(_tally_task(b, name, reenter=distributed)).next(distributed_verdict)

    alone = make_group(
        f"{name} (one group)", f"{over}.items", "$", sfn.JsonPath.DISCARD, items_failed, b.job_stopped, None
    )
    choice = (
        sfn.Choice(b, f"{name}: inline or distributed?")
        .when(sfn.Condition.number_greater_than(counted, limits.INLINE_MAP_MAX_ITEMS), distributed)
        .when(sfn.Condition.number_equals(f"{over}.group_count", 1), alone)
        .otherwise(inline)
    )
    ends: list[sfn.INextable] = [alone]
    for verdict in (inline_verdict, distributed_verdict):
        ends.extend(verdict.afterwards(include_otherwise=True).end_states)
    return sfn.Chain.custom(choice, ends, inline_verdict)


def _catch_stops_and_failures(b: WorkflowParts, name: str, map_state: sfn.Map, prefix: str) -> None:
    """A stopped job ends the execution; a paused one (an item found it paused) waits, then enters the Map again;
    anything else is the step's failure."""
    map_state.add_catch(b.job_stopped, errors=[JOB_STOPPED])
    b.pausable(map_state, prefix, step=name)
    map_state.add_catch(
        b.failure_path(prefix, job_path="$.job_id", end=b.job_failed, step=name), result_path="$.failure"
    )


def _inline(b: WorkflowParts, name: str, make_processor: ProcessorFactory, over: str, concurrency: int) -> sfn.Map:
    fan_out = sfn.Map(
        b,
        name,
        items_path=f"{over}.items",
        item_selector={
            "item.$": "$$.Map.Item.Value.index",
            "ref.$": "$$.Map.Item.Value.ref",
            "input.$": "$",
        },
        max_concurrency=concurrency,
        # each item yields `true` when it failed (anything else when it committed)
        result_selector={"outcomes.$": "$", "any_failed.$": "States.ArrayContains($, true)"},
        result_path=f"$.fanout.{name}",
        comment=f"Fan-out of {name} over {over}.items (inline: at most {limits.INLINE_MAP_MAX_ITEMS} items)",
    )
    fan_out.item_processor(make_processor(name))
    _catch_stops_and_failures(b, name, fan_out, f"{name} map")
    return fan_out


def _batch_child(b: WorkflowParts, name: str, make_processor: ProcessorFactory, concurrency: int) -> sfn.IChainable:
    """A Distributed Map's child: its batch's items as an inline Map; it yields whether any of them failed."""
    prefix = f"{name} batch"
    batch = sfn.Map(
        b,
        f"{prefix} items",
        items_path="$.batch.items",
        item_selector={
            "item.$": "$$.Map.Item.Value.index",
            "ref.$": "$$.Map.Item.Value.ref",
            "input.$": "$.input",
        },
        max_concurrency=concurrency,
        result_path="$.results",
    )
    batch.item_processor(make_processor(prefix))
    batch_result = sfn.Pass(
        b, f"{prefix}: any item failed", parameters={"any_failed.$": "States.ArrayContains($.results, true)"}
    )
    return batch.next(batch_result)


def _distributed(b: WorkflowParts, name: str, child: sfn.IChainable, over: str, what: str) -> sfn.DistributedMap:
    """One child execution per batch of the manifest (`child` runs it: {batch, input})."""
    bucket = b.artifacts_bucket
    if bucket is None:
        raise ValueError(f"{b.workflow}: {name} may run as a Distributed Map, which needs the artifacts bucket")
    b.distributed_maps += 1
    fan_out = sfn.DistributedMap(
        b,
        f"{name} (distributed)",
        item_reader=sfn.S3JsonItemReader(bucket=bucket, key=sfn.JsonPath.string_at(f"{over}.manifest_key")),
        item_selector={"batch.$": "$$.Map.Item.Value", "input.$": "$"},
        result_writer=sfn.ResultWriter(bucket=bucket, prefix=f"{MAP_RESULTS_PREFIX}{b.workflow}/{name}"),
        tolerated_failure_percentage=0,
        map_execution_type=sfn.StateMachineType.STANDARD,
        max_concurrency=b.policy.distributed_map_max_concurrency,
        result_path=f"$.fanout.{name}",
        comment=f"Fan-out of {name} over the manifest of {over} ({what})",
    )
    fan_out.item_processor(child)
    fan_out.add_catch(b.job_stopped, errors=[JOB_STOPPED])
    b.pausable(fan_out, f"{name} distributed", step=name)
    # A child fails only when its job stopped or its failure path failed; on AWS the Map then fails with
    # `States.ExceedToleratedFailureThreshold` (none is tolerated), not with the child's error. The tally decides
    # which (a stopped job: `CancelledError`, the job stops) and the failure is recorded otherwise.
    tally_after_failure = _tally_task(b, name, state=f"{name}: tally after a failed batch", reenter=fan_out)
    tally_after_failure.next(b.failure_path(f"{name} distributed", job_path="$.job_id", end=b.job_failed, step=name))
    fan_out.add_catch(tally_after_failure, result_path="$.failure")
    return fan_out


def _tally_task(
    b: WorkflowParts, name: str, *, reenter: sfn.IChainable, state: str | None = None
) -> tasks.LambdaInvoke:
    """The platform function that counts the step's committed items against the list's count (the distributed
    branch's results stay in S3). It raises `CancelledError` when the job no longer runs: the job stops; `JobPaused`
    when a batch's item found it paused: the pause wait, then the Distributed Map again (`reenter`)."""
    state = state or f"{name}: tally batched items"
    task = tasks.LambdaInvoke(
        b,
        state,
        lambda_function=b.version_of(b.tally_function),
        payload=sfn.TaskInput.from_object(
            payload(
                TallyEvent,
                step=name,
                workflow=b.workflow,
                job_id="$.job_id",
                count=f"$.steps.{b.spec.step(name).over}.count",
            )
        ),
        payload_response_only=True,
        retry_on_service_exceptions=False,
        result_path=f"$.fanout_tally.{name}",
        task_timeout=sfn.Timeout.duration(Duration.seconds(b.policy.task_timeout())),
    )
    b.apply_retries(task)
    task.add_catch(b.job_stopped, errors=list(STOPPED_ERRORS))
    b.pausable(task, state, step=name, reenter=reenter)
    return task
