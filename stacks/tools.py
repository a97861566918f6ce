"""Agents' tools: the one role a tool call assumes (`LONGHAUL_TOOL_ROLE`), trusted only by the functions that run
tools: agent turns and compensation lanes.

A tool call never acts with its function's role: the function assumes this role for the call's job through
STS (900 s, the least STS allows; session tags name the job, its tenant and step) with a session policy naming only
the job's objects and items (`longhaul.adapters.tool_credentials.session_policy`). The role's own policy is what any
tool may do on any job (the stack grants it: objects under `work/` and `uploads/`, items of job and memory partitions,
the sender's e-mail when a tool sends some); the session policy narrows it to one job, so a tool of one job cannot
reach another's even through a bug or a model's steering.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from longhaul.core.settings import Env

#: IAM's least `MaxSessionDuration` (a role's sessions may last at most this); each call asks 900 s.
MAX_SESSION_SECONDS = 3600


class ToolRole(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, functions: Sequence[lambda_.IFunction]) -> None:
        super().__init__(scope, construct_id)
        roles = [f.role for f in functions if f.role is not None]
        assert roles, "the agent steps' functions have roles"
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.CompositePrincipal(*roles),
            max_session_duration=Duration.seconds(MAX_SESSION_SECONDS),
            description="Longhaul: an agent's tool call, assumed per call with a session policy scoped to its job",
        )
        # Session tags (job, tenant, step) name the job in CloudTrail: the trust allows them from the same roles.
        assert self.role.assume_role_policy is not None
        self.role.assume_role_policy.add_statements(
            iam.PolicyStatement(actions=["sts:TagSession"], principals=list(roles))
        )
        for function in functions:
            assert isinstance(function, lambda_.Function)
            function.add_environment(Env.TOOL_ROLE, self.role.role_arn)
            function.add_to_role_policy(
                iam.PolicyStatement(actions=["sts:AssumeRole", "sts:TagSession"], resources=[self.role.role_arn])
            )
