"""Model routes: named (provider, model) pairs with a fallback and a stronger route, chosen per step and per job.

Configured as `LONGHAUL_MODEL_ROUTES` (JSON, by route name) and `LONGHAUL_STEP_ROUTES` (`{"step": "route"}`); a job
may name one route for all its model steps (`route` in the request) if its tenant's policy allows it. Without
configuration there is one route, `default`, of `LONGHAUL_MODEL_PROVIDER`/`LONGHAUL_MODEL_ID`.
"""

from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from longhaul.core.model import Model

DEFAULT_ROUTE = "default"
# What a job or a tenant's policy may name as a route (configured routes are named so to be choosable).
ROUTE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,31}(?![\s\S])"  # `(?![\s\S])`: the end, in Python's `re` and ECMA-262
Provider = Literal["offline", "bedrock", "openai", "replay"]


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
        return self


class Routing(Model):
    """Every configured route and the route of each model step."""

    model_config = ConfigDict(frozen=True)

    routes: dict[str, Route]
    steps: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names_resolve(self) -> Self:
        for name, route in self.routes.items():
            for link in (route.fallback, route.stronger):
                if link is not None and link not in self.routes:
                    raise ValueError(f"route {name!r} names unknown route {link!r}; routes: {sorted(self.routes)}")
        for step, name in self.steps.items():
            if name not in self.routes:
                raise ValueError(f"step {step!r} uses unknown route {name!r}; routes: {sorted(self.routes)}")
        return self

    @classmethod
    def configured(
        cls,
        routes: Mapping[str, Mapping[str, Any]],
        steps: Mapping[str, str],
        *,
        provider: str,
        model_id: str,
    ) -> "Routing":
        parsed = {name: Route.model_validate(route) for name, route in routes.items()}
        parsed.setdefault(DEFAULT_ROUTE, Route.model_validate({"provider": provider, "model_id": model_id}))
        return cls(routes=parsed, steps=dict(steps))

    def route_for(self, step: str, job_route: str | None = None) -> str:
        """The route of `step` in a job: the job's own choice, else the step's configured route, else `default`."""
        return job_route or self.steps.get(step, DEFAULT_ROUTE)

    def __getitem__(self, name: str) -> Route:
        return self.routes[name]
