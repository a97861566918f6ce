#!/usr/bin/env python3
"""CDK entry point. Synthesizes offline: no AWS call, no Docker.

Context (cdk.json or `-c key=value`):
  longhaul:stage           deployment stage, part of the stack name (default: dev)
  longhaul:bundle          bundle third-party dependencies into the Lambda asset (cdk.json: true)
  longhaul:model_provider  offline | bedrock (default: bedrock when bundling for AWS, else offline)
  longhaul:model_id        model identifier for the provider
  longhaul:alarm_email     an address subscribed to the alarm topic (optional; confirm the e-mail AWS sends)
  longhaul:model_routes    model routes by name (JSON object; see docs/how-to/add-a-model-route.md)
  longhaul:step_routes     the route of each model step (JSON object {"step": "route"})
  longhaul:class_routes    the route of a model step by the job's SLA class (JSON object {"interactive": "route"})
  longhaul:container_insights  true to enable CloudWatch Container Insights on the workers' ECS cluster
  longhaul:oidc_issuer     an external OIDC issuer (https) whose JWTs the API accepts beside API keys; without it
                           the stack makes a Cognito user pool and trusts its ID tokens
  longhaul:oidc_audience   the `aud` the external issuer's tokens name (required with longhaul:oidc_issuer)
  longhaul:oidc_jwks_url   where the external issuer's keys are (default: <issuer>/.well-known/jwks.json)
  longhaul:oidc_tenant_claim  the JWT claim naming the tenant (default: a Cognito ID token's custom:tenant)
  longhaul:oidc_role_claim    the JWT claim naming the role (default: custom:role)
  longhaul:oidc_groups_claim  the JWT claim naming a reviewer's groups (default: cognito:groups)
  longhaul:email_sender    the SES identity (an address or a domain) agents' e-mail tools send from
  longhaul:callback_allowlist  origins (comma-separated) whose callbacks skip the address checks and may use http
  longhaul:max_jobs_in_flight  the platform's jobs in flight at most, all tenants together (default: 1000)
  longhaul:manual_url      where the web console links to the manual (the published `make docs-site`; default: no links)
  longhaul:stuck_after_minutes  minutes without a state change before the sweep reports a job stuck (default: 15)
  longhaul:review_wait_alarm_minutes  median review wait (minutes) above which a workflow's alarm fires (default: 240)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "lambdas"))

import aws_cdk as cdk  # noqa: E402
import cdk_nag  # noqa: E402

from longhaul.core.settings import Settings  # noqa: E402
from stacks.email import DEFAULT_SENDER as DEFAULT_EMAIL_SENDER  # noqa: E402
from stacks.longhaul_stack import LonghaulStack  # noqa: E402

#: Where `cdk synth` writes the cloud assembly (default: `cdk.out`).
OUTDIR_ENV = "CDK_OUTDIR"
DEFAULT_BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
DEFAULT_OFFLINE_MODEL = "longhaul-offline-extractive-1"
# The functions' own defaults (`Settings`) of the two alarm limits.
STUCK_AFTER = int(Settings.model_fields["stuck_after_minutes"].default)
REVIEW_WAIT_ALARM = int(Settings.model_fields["review_wait_alarm_minutes"].default)


def _flag(value: object) -> bool:
    return str(value).lower() in ("1", "true", "yes")


def _json_context(app: cdk.App, key: str) -> Any:
    """A context value given as JSON text (`-c key='{…}'`) or as an object (cdk.json)."""
    value = app.node.try_get_context(key)
    return json.loads(value) if isinstance(value, str) else value


def build_app(context: dict[str, object] | None = None) -> cdk.App:
    app = cdk.App(context=context, outdir=os.environ.get(OUTDIR_ENV) or str(ROOT / "cdk.out"))
    stage = str(app.node.try_get_context("longhaul:stage") or "dev")
    bundle = _flag(app.node.try_get_context("longhaul:bundle"))
    provider = str(app.node.try_get_context("longhaul:model_provider") or ("bedrock" if bundle else "offline"))
    default_model = DEFAULT_BEDROCK_MODEL if provider == "bedrock" else DEFAULT_OFFLINE_MODEL
    model_id = str(app.node.try_get_context("longhaul:model_id") or default_model)
    LonghaulStack(
        app,
        f"Longhaul-{stage}",
        stage=stage,
        bundle=bundle,
        model_provider=provider,
        model_id=model_id,
        alarm_email=str(app.node.try_get_context("longhaul:alarm_email") or "") or None,
        model_routes=_json_context(app, "longhaul:model_routes"),
        step_routes=_json_context(app, "longhaul:step_routes"),
        class_routes=_json_context(app, "longhaul:class_routes"),
        callback_allowlist=str(app.node.try_get_context("longhaul:callback_allowlist") or ""),
        container_insights=_flag(app.node.try_get_context("longhaul:container_insights")),
        max_jobs_in_flight=int(str(app.node.try_get_context("longhaul:max_jobs_in_flight") or 1000)),
        oidc_issuer=str(app.node.try_get_context("longhaul:oidc_issuer") or "").strip() or None,
        oidc_audience=str(app.node.try_get_context("longhaul:oidc_audience") or "").strip() or None,
        oidc_jwks_url=str(app.node.try_get_context("longhaul:oidc_jwks_url") or "").strip() or None,
        oidc_claims={  # empty: the settings' defaults (a Cognito ID token's claims)
            "tenant": str(app.node.try_get_context("longhaul:oidc_tenant_claim") or "").strip(),
            "role": str(app.node.try_get_context("longhaul:oidc_role_claim") or "").strip(),
            "groups": str(app.node.try_get_context("longhaul:oidc_groups_claim") or "").strip(),
        },
        email_sender=str(app.node.try_get_context("longhaul:email_sender") or DEFAULT_EMAIL_SENDER),
        manual_url=str(app.node.try_get_context("longhaul:manual_url") or ""),
        stuck_after_minutes=int(str(app.node.try_get_context("longhaul:stuck_after_minutes") or STUCK_AFTER)),
        review_wait_alarm_minutes=int(
            str(app.node.try_get_context("longhaul:review_wait_alarm_minutes") or REVIEW_WAIT_ALARM)
        ),
        synthesizer=cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False),
        description="Longhaul: durable, observable, budget-aware LLM jobs",
    )
    cdk.Validations.of(app).add_plugins(cdk_nag.AwsSolutionsChecks(app))
    return app


if __name__ == "__main__":
    build_app().synth()
