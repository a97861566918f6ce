"""Old versions, for operators: each deploy publishes a version of every workflow's state machine (and of the step
functions it invokes) and retains the previous ones, so that a job finishes on the version it started on. A version
may go once no live job runs it and no alias routes to it; pruning is an operator's command
(`longhaul admin prune-versions`), never automatic: a failed job replayed on its own version
needs its version too, and once it is pruned such a replay must choose the current one.

The plan is a pure function of what exists and what is in use; `prune` carries it out through the versions adapter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from longhaul.adapters.stepfunctions import machine_arn
from longhaul.adapters.versions import MachineVersion
from longhaul.core.contracts import TERMINAL_STATUSES, JobStatus
from longhaul.storage.jobs import JobStore


class Versions(Protocol):
    def versions(self, machine_arn: str) -> list[MachineVersion]: ...

    def routed(self, alias_arn: str) -> set[str]: ...

    def delete_machine_version(self, arn: str) -> None: ...

    def delete_function_version(self, qualified_arn: str) -> None: ...


@dataclass(frozen=True)
class WorkflowVersions:
    workflow: str
    kept: dict[int, str] = field(default_factory=dict)  # version number -> why it stays
    pruned: list[str] = field(default_factory=list)  # machine version ARNs
    functions: list[str] = field(default_factory=list)  # Lambda versions only pruned versions invoke


@dataclass(frozen=True)
class PrunePlan:
    workflows: list[WorkflowVersions]

    @property
    def empty(self) -> bool:
        return not any(w.pruned for w in self.workflows)

    def lines(self) -> list[str]:
        """The plan as an operator reads it."""
        out = []
        for w in self.workflows:
            for number, why in sorted(w.kept.items()):
                out.append(f"{w.workflow}: keep version {number} ({why})")
            for arn in w.pruned:
                out.append(f"{w.workflow}: prune version {arn.rsplit(':', 1)[1]} ({arn})")
            out += [f"{w.workflow}: prune function version {f}" for f in w.functions]
        return out


def in_use(jobs: JobStore) -> dict[str, int]:
    """{state machine version ARN: live jobs running it} (every job that is not finished)."""
    found: dict[str, int] = {}
    for status in JobStatus:
        if status in TERMINAL_STATUSES:
            continue
        for job in jobs.list_jobs(status=status, limit=None):
            if job.state_machine_version:
                found[job.state_machine_version] = found.get(job.state_machine_version, 0) + 1
    return found


def plan(versions: Versions, aliases: Mapping[str, str], used: Mapping[str, int]) -> PrunePlan:
    """What may go, by workflow (`aliases`: {workflow: its alias ARN}): every version that no alias routes to and no
    live job runs, and the function versions that only such versions invoke."""
    planned = []
    for workflow, alias in sorted(aliases.items()):
        routed = versions.routed(alias)
        existing = versions.versions(machine_arn(alias))
        kept: dict[int, str] = {}
        pruned: list[MachineVersion] = []
        for version in existing:
            if version.arn in routed:
                kept[version.number] = "the alias routes new jobs to it"
            elif used.get(version.arn):
                kept[version.number] = f"{used[version.arn]} live job(s) run it"
            else:
                pruned.append(version)
        still_invoked = {f for v in existing if v.number in kept for f in v.functions}
        functions = sorted({f for v in pruned for f in v.functions} - still_invoked)
        planned.append(WorkflowVersions(workflow, kept, [v.arn for v in pruned], functions))
    return PrunePlan(planned)


def prune(versions: Versions, planned: PrunePlan) -> int:
    """Delete what the plan prunes: machine versions first (nothing then invokes their functions' versions), then
    those function versions. Returns how many versions were deleted."""
    deleted = 0
    for workflow in planned.workflows:
        for arn in workflow.pruned:
            versions.delete_machine_version(arn)
            deleted += 1
    for function in _unique(f for w in planned.workflows for f in w.functions):
        versions.delete_function_version(function)
        deleted += 1
    return deleted


def _unique(items: Iterable[str]) -> list[str]:
    return sorted(set(items))
