"""ECS: RunTask starts the container's worker as a subprocess, StopTask stops it; task names as AWS writes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from local.moto_patches.core import _original, _replace, _restore

# --- ECS: RunTask starts the container's worker, StopTask stops it -------------------------------------------


def _ecs_backend_class() -> type:
    from moto.ecs.models import EC2ContainerServiceBackend

    return EC2ContainerServiceBackend


def _run_task(self: Any, *args: Any, **kwargs: Any) -> Any:
    """`EC2ContainerServiceBackend.run_task`, then each recorded task's worker started (`local.workers.launch`)."""
    from local import workers

    tasks = _original(_ecs_backend_class(), "run_task")(self, *args, **kwargs)
    for task in tasks:
        workers.launch(task, self.describe_task_definition(task.task_definition_arn))
    return tasks


def _stop_task(self: Any, cluster_str: str, task_str: str, reason: str) -> Any:
    """`EC2ContainerServiceBackend.stop_task`, and the task's worker told to stop (SIGTERM, then SIGKILL)."""
    from local import workers

    task = _original(_ecs_backend_class(), "stop_task")(self, cluster_str, task_str, reason)
    workers.stop(task.task_arn)
    return task


def _recase_keys(value: Any, first: Callable[[str], str]) -> Any:
    """`value` with the first letter of every dict key passed through `first`, recursively, in place."""
    if isinstance(value, dict):
        for key in list(value):
            item = _recase_keys(value.pop(key), first)
            value[first(key[:1]) + key[1:]] = item
    elif isinstance(value, list):
        for item in value:
            _recase_keys(item, first)
    return value


def _ecs_normalise_parameters(self: Any, parameters: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    _recase_keys(parameters, str.lower)


def _ecs_normalise_response(self: Any, response: Any, *args: Any, **kwargs: Any) -> None:
    _recase_keys(response, str.upper)


def _ecs_state_class() -> type:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_ecs import (
        StateTaskServiceEcs,
    )

    return StateTaskServiceEcs


def translate_ecs_task_names() -> None:
    """Make the interpreter's ECS integration speak both its languages: ASL's PascalCase, ECS's camelCase.

    Upstream passes a Task's `Parameters` as written (`Cluster`, `TaskDefinition`, `Overrides`...) to boto3, whose
    serializer (parameter validation off) knows only `cluster`, `taskDefinition`...: every `ecs:runTask` Task fails
    with `States.Runtime` "'Cluster'". Its response normalisation is the base no-op too, so reading the result's
    `Tasks[0].ClusterArn` would fail next. Now parameter keys are lowered and response keys raised at their first
    letter, recursively, which is exactly the mapping between the two (`AwsvpcConfiguration` ↔ `awsvpcConfiguration`).
    """
    _replace(_ecs_state_class(), "_normalise_parameters", _ecs_normalise_parameters)
    _replace(_ecs_state_class(), "_normalise_response", _ecs_normalise_response)


def untranslate_ecs_task_names() -> None:
    _restore(_ecs_state_class(), "_normalise_response")
    _restore(_ecs_state_class(), "_normalise_parameters")


def run_container_tasks_locally() -> None:
    """Make ECS `RunTask` run the task, as `ecs:runTask.waitForTaskToken` expects.

    Upstream records the task (status RUNNING for ever) and runs nothing: the state machine would wait for a token
    nobody holds until its heartbeat bound. Now each container of the task whose name is a worker of this
    repository (`lambdas/workers/<name>`) starts as a subprocess with the task's environment and overrides
    (`local.workers`); its exit marks the task STOPPED, and `StopTask` terminates it.
    """
    _replace(_ecs_backend_class(), "run_task", _run_task)
    _replace(_ecs_backend_class(), "stop_task", _stop_task)


def record_container_tasks_only() -> None:
    _restore(_ecs_backend_class(), "stop_task")
    _restore(_ecs_backend_class(), "run_task")
