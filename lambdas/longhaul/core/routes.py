"""Model routes: named (provider, model) pairs with a fallback and a stronger route, chosen per step and per job.

Configured as `LONGHAUL_MODEL_ROUTES` (JSON, by route name), `LONGHAUL_STEP_ROUTES` (`{"step": "route"}`) and
`LONGHAUL_CLASS_ROUTES` (`{"interactive": "route"}`: by the job's SLA class); a job may name one route for all its model
steps (`route` in the request) if its tenant's policy allows it. The route of a call: the job's, else the step's, else
its class's, else `default`. Without configuration there is one route, `default`, of
`LONGHAUL_MODEL_PROVIDER`/`LONGHAUL_MODEL_ID`.

A route may also name a Bedrock service tier per SLA class (`service_tier`: `{"interactive": "priority", "batch":
"flex"}`; a class it does not name is served at the standard tier, `default`), and shared limits
(`requests_per_minute`, `tokens_per_minute`) that every function's calls on the route count against
(`longhaul.storage.route_limits`), and the tools an agent calling it may use (`allowed_tools`: "allowed tools by
route"; a tool not listed is never offered to the model, a call of it is refused `not-allowed`).
"""

from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from longhaul.core.model import Model

DEFAULT_ROUTE = "default"
# What a job or a tenant's policy may name as a route (configured routes are named so to be choosable).
ROUTE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,31}(?![\s\S])"  # `(?![\s\S])`: the end, in Python's `re` and ECMA-262
Provider = Literal["offline", "bedrock", "openai", "replay"]
# Bedrock's service tiers (Converse `serviceTier.type`); `default` is the Standard tier. `reserved` needs a reservation
# made with AWS, so a route cannot choose it per class.
ServiceTier = Literal["priority", "default", "flex"]
STANDARD_TIER: ServiceTier = "default"
# The SLA classes (`longhaul.core.budgets.SlaClass`, which imports this module; a unit test keeps the two equal).
RouteClass = Literal["interactive", "standard", "batch"]


class Route(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider
    model_id: str = Field(min_length=1)
    base_url: str | None = Field(default=None, description="openai: the Chat Completions endpoint's base URL.")
    api_key_env: str | None = Field(default=None, description="openai: environment variable holding the key.")
    api_key_secret: str | None = Field(default=None, description="openai: Secrets Manager secret id of the key.")
    fixtures: str | None = Field(default=None, description="replay: the recorded calls to answer from.")
    record_to: str | None = Field(default=None, description="Record every call of this route to this file.")
    fallback: str | None = Field(default=None, description="Route used while this one's provider is unavailable.")
    stronger: str | None = Field(default=None, description="Route the validation ladder escalates to.")
    timeout_seconds: float = Field(default=60, gt=0)
    service_tier: dict[RouteClass, ServiceTier] = Field(
        default_factory=dict,
        description="bedrock: the service tier of this route's calls by the job's SLA class (priority, default, "
        "flex); a class not named: `default` (Standard).",
    )
    requests_per_minute: int | None = Field(
        default=None, gt=0, description="Calls per minute on this route, shared by every function (None: unbounded)."
    )
    tokens_per_minute: int | None = Field(
        default=None,
        gt=0,
        description="Tokens per minute (prompt plus output cap) on this route, shared by every function.",
    )

    allowed_tools: tuple[str, ...] | None = Field(
        default=None,
        description="The tools an agent step whose model calls this route may use (of the step's own); a tool not "
        "listed is never offered to the model and a call of it is refused (`not-allowed`). None: every tool of "
        "the step.",
    )

    def __hash__(self) -> int:  # routes key the adapters' cache; `service_tier` is a dict
        return hash(self.model_dump_json())

    def tier_for(self, sla_class: str | None) -> ServiceTier:
        """The service tier of a call of a job of `sla_class` on this route."""
        return self.service_tier.get(sla_class, STANDARD_TIER) if sla_class else STANDARD_TIER  # type: ignore[call-overload]

    @property
    def limited(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None

    prompt_caching: bool = Field(
        default=True,
        description="Mark each call's stable prefix for the provider's cache (a Converse `cachePoint`) when the "
        "model caches and the prefix reaches its minimum (bedrock, offline); false: never. OpenAI-compatible "
        "providers cache by themselves: their cached tokens are metered either way.",
    )

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.provider == "openai" and not self.base_url:
            raise ValueError("an openai route needs `base_url`")
        if self.provider == "replay" and not self.fixtures:
            raise ValueError("a replay route needs `fixtures`")
        tiered = {tier for tier in self.service_tier.values() if tier != STANDARD_TIER}
        if tiered and self.provider not in ("bedrock", "offline"):
            raise ValueError(f"`service_tier` {sorted(tiered)} is Bedrock's; this route's provider is {self.provider}")
        return self


class Routing(Model):
    """Every configured route and the route of each model step."""

    model_config = ConfigDict(frozen=True)

    routes: dict[str, Route]
    steps: dict[str, str] = Field(default_factory=dict)
    classes: dict[RouteClass, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names_resolve(self) -> Self:
        for name, route in self.routes.items():
            for link in (route.fallback, route.stronger):
                if link is not None and link not in self.routes:
                    raise ValueError(f"route {name!r} names unknown route {link!r}; routes: {sorted(self.routes)}")
        for step, name in self.steps.items():
            if name not in self.routes:
                raise ValueError(f"step {step!r} uses unknown route {name!r}; routes: {sorted(self.routes)}")
        for sla_class, name in self.classes.items():
            if name not in self.routes:
                raise ValueError(
                    f"class routes: class {sla_class!r} uses unknown route {name!r}; routes: {sorted(self.routes)}"
                )
        return self

    @classmethod
    def configured(
        cls,
        routes: Mapping[str, Mapping[str, Any]],
        steps: Mapping[str, str],
        *,
        provider: str,
        model_id: str,
        classes: Mapping[str, str] | None = None,
    ) -> "Routing":
        parsed = {name: Route.model_validate(route) for name, route in routes.items()}
        parsed.setdefault(DEFAULT_ROUTE, Route.model_validate({"provider": provider, "model_id": model_id}))
        return cls.model_validate({"routes": parsed, "steps": dict(steps), "classes": dict(classes or {})})

    def route_for(self, step: str, job_route: str | None = None, sla_class: str | None = None) -> str:
        """The route of `step` in a job: the job's own choice, else the step's configured route, else its SLA
        class's (`LONGHAUL_CLASS_ROUTES`), else `default`."""
        if job_route:
            return job_route
        if step in self.steps:
            return self.steps[step]
        return self.classes.get(sla_class, DEFAULT_ROUTE) if sla_class else DEFAULT_ROUTE  # type: ignore[call-overload]

    def __getitem__(self, name: str) -> Route:
        return self.routes[name]
