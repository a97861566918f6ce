"""Container tasks on ECS: find a job's running tasks by their group (`longhaul:<job id>`) and stop them."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from longhaul.core.ports import EngineUnavailable
from longhaul.core.step_events import task_group

DESCRIBE_BATCH = 100  # DescribeTasks takes at most 100 tasks


class EcsContainerTasks:
    def __init__(self, client: Any, cluster: str) -> None:
        self._client = client
        self._cluster = cluster

    def stop_job_tasks(self, job_id: str, *, reason: str) -> int:
        group = task_group(job_id)
        try:
            arns: list[str] = []
            for page in self._client.get_paginator("list_tasks").paginate(
                cluster=self._cluster, desiredStatus="RUNNING"
            ):
                arns.extend(page.get("taskArns", []))
            stopped = 0
            for start in range(0, len(arns), DESCRIBE_BATCH):
                described = self._client.describe_tasks(
                    cluster=self._cluster, tasks=arns[start : start + DESCRIBE_BATCH]
                )
                for task in described.get("tasks", []):
                    if task.get("group") == group and task.get("desiredStatus") != "STOPPED":
                        self._client.stop_task(cluster=self._cluster, task=task["taskArn"], reason=reason[:255])
                        stopped += 1
            return stopped
        except (ClientError, BotoCoreError) as error:
            raise EngineUnavailable(f"ECS: {error}") from error
