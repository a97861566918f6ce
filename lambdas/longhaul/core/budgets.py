"""Token and cost budgets: tenant policies, a job's budget, the price table and the reservation arithmetic.

Money is `Decimal` here and whole micro-dollars (`int`) in the table, so DynamoDB's conditional updates compare
integers and nothing is ever rounded in a float. A reservation is what a call can use (`CallSize`): its prompt's
counted tokens (the adapter's own count, or every byte as a token for a provider without a counter: no byte-level
tokenizer makes more tokens than bytes) plus its output cap, priced from the model's row of the price table and
rounded *up* to the micro-dollar; settling replaces it by the actual usage. `decide` says, from what is settled and
what is held by calls in flight, whether a call's reservation is taken now, waits for a release, or can never fit;
when the call's whole output cap can no longer fit, the cap is lowered to what is left.
"""

import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import ROUND_CEILING, Decimal
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema

from longhaul.core import limits
from longhaul.core.model import Model
from longhaul.core.redaction import KINDS, Kind
from longhaul.core.routes import ROUTE_NAME_PATTERN

MICRO = Decimal(1_000_000)
# Framing a provider adds around the messages (roles, tool definitions), counted into every byte-bound prompt.
FRAMING_TOKENS = 64
# The smallest output cap a call is made with: below it the budget is exceeded and no call is made.
MIN_OUTPUT_TOKENS = 16

# Dollars as the API takes them: a decimal string above zero with at most 8 digits before the point and 6 after
# (DynamoDB and the micro-dollar ledger hold every such amount exactly); `(?![\s\S])` ends it in every regex dialect.
USD_PATTERN = r"^(?!0(?:\.0{1,6})?(?![\s\S]))(?:0|[1-9][0-9]{0,7})(?:\.[0-9]{1,6})?(?![\s\S])"
_USD = re.compile(USD_PATTERN)


def _usd_text(value: object) -> object:
    """A JSON amount must be a string of `USD_PATTERN` (a JSON number would be a binary float); a `Decimal` is one
    the platform made itself (a default, a stored policy)."""
    if isinstance(value, Decimal):
        return value
    if not isinstance(value, str) or not _USD.match(value):
        raise ValueError(
            'must be a decimal string above 0 with at most 8 digits before the point and 6 after, e.g. "2.50"'
        )
    return Decimal(value)


UsdAmount = Annotated[
    Decimal,
    BeforeValidator(_usd_text),
    Field(gt=0, max_digits=14, decimal_places=6, description='US dollars as a decimal string, e.g. "2.50".'),
    WithJsonSchema({"type": "string", "pattern": USD_PATTERN, "examples": ["2.50"]}),  # and so it is written
]
# Token counts: bounded so that every accepted figure fits the ledger's arithmetic and a DynamoDB number.
Tokens = Annotated[int, Field(gt=0, le=limits.MAX_TOKENS)]


def _known_kind(value: object) -> object:
    """A kind of personal data the platform detects (`longhaul.core.redaction.KINDS`); another is named in the 422."""
    if isinstance(value, str) and value not in KINDS:
        raise ValueError(f"unknown kind of personal data {value!r}: the kinds are {', '.join(sorted(KINDS))}")
    return value


# A kind of personal data to redact from what is kept (`TenantPolicy.redact`).
RedactKind = Annotated[Kind, BeforeValidator(_known_kind)]
REDACT_DESCRIPTION = (
    "Kinds of personal data replaced by typed placeholders (`<EMAIL_1>`) in the job's kept prompts and responses, "
    "its log lines and its spans' content (docs/how-to/redact-personal-data.md). Empty: nothing is redacted."
)
REDACT_BEFORE_MODEL_DESCRIPTION = (
    "Whether the model is sent the redacted prompt too (the placeholders in its answer are put back in the result). "
    "False: the model receives the prompt unchanged and only what is kept is redacted."
)


class JobBudget(Model):
    """What one job may spend: tokens (input + output) and US dollars. Omitted fields take the tenant's ceiling."""

    model_config = ConfigDict(extra="forbid", strict=True)

    max_tokens: Annotated[Tokens | None, Field(default=None, description="Input plus output tokens.")]
    max_cost_usd: Annotated[UsdAmount | None, Field(default=None)]


SlaClass = Literal["interactive", "standard", "batch"]
# How a model call is paid: one on-demand call, or a record of a Bedrock batch inference job (the ledger's `lane`).
Lane = Literal["on_demand", "batch"]
# What a job asks of its model calls (`model_lane`): `auto` is the batch lane for a `batch`-class job.
ModelLane = Literal["auto", "on_demand", "batch"]
SLA_CLASSES: tuple[SlaClass, ...] = ("interactive", "standard", "batch")
#: How long a job of each class may wait for an admission slot (p90 over 15 minutes) before its alarm fires.
QUEUE_WAIT_TARGET_SECONDS: dict[SlaClass, int] = {"interactive": 60, "standard": 600, "batch": 3600}


class TenantPolicy(Model):
    """A tenant's ceilings per job, its daily allowance (UTC days) and its admission quotas. Defaults apply to
    tenants without one."""

    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")

    max_job_tokens: Tokens = 2_000_000
    max_job_cost_usd: UsdAmount = Decimal("50")
    daily_tokens: Tokens = 50_000_000
    daily_cost_usd: UsdAmount = Decimal("1000")
    routes: list[Annotated[str, Field(pattern=ROUTE_NAME_PATTERN)]] | None = Field(
        default=None, description="Model routes the tenant's jobs may choose; null: every configured route."
    )
    submissions_per_minute: int = Field(
        default=600,
        gt=0,
        le=limits.MAX_RATE,
        description="Job submissions accepted in any 60 seconds (a sliding window); 429 above.",
    )
    jobs_in_flight: int = Field(
        default=50,
        gt=0,
        le=limits.MAX_RATE,
        description="Jobs running at once; more are accepted `queued` and start as slots free.",
    )
    weight: int = Field(
        default=1, ge=1, le=100, description="The tenant's share of free slots against other tenants' backlogs."
    )
    sla_classes: list[SlaClass] = Field(
        default_factory=lambda: list(SLA_CLASSES), min_length=1, description="SLA classes the tenant's jobs may use."
    )
    agent_max_turns: int = Field(
        default=50,
        gt=0,
        le=limits.MAX_AGENT_TURNS,
        description="Ceiling of a job's `agent.max_turns` (turns of one agent step).",
    )
    agent_max_tool_calls: int = Field(
        default=2000,
        gt=0,
        le=limits.MAX_AGENT_TOOL_CALLS,
        description="Ceiling of a job's `agent.max_tool_calls` (tool calls of one agent step).",
    )
    pause_stops_deadline: bool = Field(
        default=False,
        description="Whether a paused job's deadline stops while it is paused: its resume moves the deadline by the "
        "time it was paused. False: the deadline keeps running (a paused job may expire).",
    )
    webhook_escalations: bool = Field(
        default=False,
        description="Whether the tenant's callback hears of an operator's escalation of its jobs (webhook "
        "`job.escalated`). False: escalations stay between operators and engineering.",
    )
    redact: list[RedactKind] = Field(default_factory=list, max_length=len(KINDS), description=REDACT_DESCRIPTION)
    redact_before_model: bool = Field(default=False, description=REDACT_BEFORE_MODEL_DESCRIPTION)
    retention_days: int = Field(
        default=limits.RETENTION_DAYS_DEFAULT,
        ge=limits.RETENTION_DAYS_MIN,
        le=limits.RETENTION_DAYS_MAX,
        description="Days a job's documents, artifacts, kept prompts and responses, results, events and records are "
        "kept after it was submitted; then they are erased (a usage tombstone stays) and the job answers 410. "
        "Pinned on each job at submission.",
    )
    download_ttl_seconds: int = Field(
        default=limits.DOWNLOAD_URL_SECONDS,
        gt=0,
        le=limits.MAX_DOWNLOAD_TTL_SECONDS,
        description="The longest a result's download URL lives (`GET /v1/jobs/{job_id}/result/download`, whose "
        "default is 900 s or this, the shorter).",
    )
    max_schedules: int = Field(
        default=20, ge=0, le=1000, description="Schedules the tenant may keep (`POST /v1/schedules`); 0: none."
    )
    min_schedule_interval_seconds: int = Field(
        default=60,
        ge=60,
        le=86_400,
        description="The shortest interval between two fires of one of the tenant's schedules (seconds).",
    )
    max_triggers: int = Field(
        default=20, ge=0, le=1000, description="S3 and EventBridge triggers the tenant may keep (`POST /v1/triggers`)."
    )


@cache
def default_policy() -> TenantPolicy:
    """The policy of a tenant without one (built on first use: instantiating a model builds its validator)."""
    return TenantPolicy()


class TenantPolicyPatch(Model):
    """A change to a tenant's policy (PATCH, merge semantics): a field given replaces the stored value, `null` puts
    it back to its default, an omitted field is kept. The same constraints as `TenantPolicy`."""

    model_config = ConfigDict(extra="forbid", regex_engine="python-re")

    max_job_tokens: Annotated[Tokens | None, Field(default=None)]
    max_job_cost_usd: Annotated[UsdAmount | None, Field(default=None)]
    daily_tokens: Annotated[Tokens | None, Field(default=None)]
    daily_cost_usd: Annotated[UsdAmount | None, Field(default=None)]
    routes: list[Annotated[str, Field(pattern=ROUTE_NAME_PATTERN)]] | None = Field(
        default=None, description="null: every configured route (the default)."
    )
    submissions_per_minute: Annotated[int | None, Field(default=None, gt=0, le=limits.MAX_RATE)]
    jobs_in_flight: Annotated[int | None, Field(default=None, gt=0, le=limits.MAX_RATE)]
    weight: Annotated[int | None, Field(default=None, ge=1, le=100)]
    sla_classes: Annotated[list[SlaClass] | None, Field(default=None, min_length=1)]
    agent_max_turns: Annotated[int | None, Field(default=None, gt=0, le=limits.MAX_AGENT_TURNS)]
    agent_max_tool_calls: Annotated[int | None, Field(default=None, gt=0, le=limits.MAX_AGENT_TOOL_CALLS)]
    pause_stops_deadline: Annotated[bool | None, Field(default=None, strict=True)]  # (a JSON boolean, not 0 or 1)
    webhook_escalations: Annotated[bool | None, Field(default=None, strict=True)]
    redact: Annotated[list[RedactKind] | None, Field(default=None, max_length=len(KINDS))]
    redact_before_model: Annotated[bool | None, Field(default=None, strict=True)]
    retention_days: Annotated[
        int | None, Field(default=None, ge=limits.RETENTION_DAYS_MIN, le=limits.RETENTION_DAYS_MAX, strict=True)
    ]
    download_ttl_seconds: Annotated[
        int | None, Field(default=None, gt=0, le=limits.MAX_DOWNLOAD_TTL_SECONDS, strict=True)
    ]
    max_schedules: Annotated[int | None, Field(default=None, ge=0, le=1000, strict=True)]
    min_schedule_interval_seconds: Annotated[int | None, Field(default=None, ge=60, le=86_400, strict=True)]
    max_triggers: Annotated[int | None, Field(default=None, ge=0, le=1000, strict=True)]

    def applied_to(self, policy: TenantPolicy) -> TenantPolicy:
        """`policy` with this change: given fields replaced, fields given as null back to their defaults."""
        data = policy.model_dump()
        for name in self.model_fields_set:
            value = getattr(self, name)
            if value is None:
                data.pop(name)
            else:
                data[name] = value
        return TenantPolicy.model_validate(data)

    def nulled(self) -> list[str]:
        """The fields this change puts back to their defaults."""
        return [
            name for name in TenantPolicy.model_fields if name in self.model_fields_set and getattr(self, name) is None
        ]


def reset_fields(before: TenantPolicy, after: TenantPolicy, candidates: list[str]) -> list[str]:
    """Of `candidates` (fields a change did not set to a value), those whose value it changed: back to the default."""
    return [name for name in candidates if getattr(before, name) != getattr(after, name)]


class Price(Model):
    """US dollars per million tokens, which is micro-dollars per token; with prompt caching, what a token read from
    or written to the provider's cache costs as a multiple of the input price, and the smallest prefix it caches."""

    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    # Service tiers: multipliers of this row's prices by tier (`{"priority": "1.75"}`), over `TIER_MULTIPLIERS`.
    tiers: dict[str, Decimal] = Field(default_factory=dict)
    # The share of these prices a call pays in Bedrock's batch lane (`longhaul.guardrails.batch`): Bedrock prices
    # batch inference at half of on-demand for the models it batches.
    batch: Decimal = Field(default=Decimal("0.5"), gt=0, le=1)
    # Prompt caching (`longhaul.guardrails.caching`): None, the model caches nothing the platform marks.
    cache_min_tokens: int | None = Field(default=None, gt=0, description="The smallest prefix the model caches.")
    cache_read: Decimal = Field(default=Decimal(1), ge=0, description="A cache read's price, times `input`.")
    cache_write: Decimal = Field(default=Decimal(1), ge=0, description="A cache write's price, times `input`.")

    def at_tier(self, tier: str | None) -> "Price":
        """This row at a Bedrock service tier (`default`, the Standard tier, or None: itself)."""
        if not tier or tier == "default":
            return self
        factor = self.tiers.get(tier, TIER_MULTIPLIERS.get(tier, Decimal(1)))
        return self.model_copy(update={"input": self.input * factor, "output": self.output * factor})

    def in_lane(self, lane: "Lane") -> "Price":
        """This price as a call in `lane` pays it (the batch lane's share of it, or itself)."""
        if lane == "on_demand":
            return self
        return self.model_copy(update={"input": self.input * self.batch, "output": self.output * self.batch})


# Bedrock's service tiers against the Standard (on-demand) price of the same model, from Bedrock's pricing page
# (aws.amazon.com/bedrock/pricing, "Priority" and "Flex" rows): Priority is Standard plus 75%, Flex half of it
# (e.g. gpt-oss-120b: $0.15/$0.60 per million input/output tokens at Standard, $0.2625/$1.05 at Priority,
# $0.075/$0.30 at Flex). A row's own `tiers` overrides these for its model.
TIER_MULTIPLIERS: dict[str, Decimal] = {"priority": Decimal("1.75"), "default": Decimal("1"), "flex": Decimal("0.5")}


# Lanes of a model call: how it was sent (and priced). `on_demand`: a call of its own; `batch`: a record of a batch
# inference job. A ledger entry records its lane (`Charge.lane`); the job's cost sums each lane.
LANES: tuple[Lane, ...] = ("on_demand", "batch")
DEFAULT_LANE: Lane = "on_demand"

# Claude on Bedrock reads a cached prefix at a tenth of the input price and writes one (5-minute TTL) at 1.25 times it
# (https://aws.amazon.com/bedrock/pricing/); the smallest prefix per checkpoint is per model
# (https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html): 1,024 tokens for Claude Sonnet 4, 3.7
# Sonnet and Opus 4, 2,048 for Claude 3.5 Haiku. OpenAI caches prompts of 1,024 tokens and more by itself and reads
# them at half the input price (gpt-4o, gpt-4o-mini), with no write premium. The offline model caches like Sonnet.
_CLAUDE_CACHE = {"cache_read": Decimal("0.10"), "cache_write": Decimal("1.25")}
_OPENAI_CACHE = {"cache_min_tokens": 1024, "cache_read": Decimal("0.50")}


# Published on-demand prices (USD per million tokens). The offline model's is notional: it costs nothing, but cost
# budgets should be exercisable locally. An unknown model is priced like the most expensive row, so a missing row
# can only make a budget stricter.
PRICES: dict[str, Price] = {
    "longhaul-offline-extractive-1": Price(
        input=Decimal("1.00"), output=Decimal("5.00"), cache_min_tokens=1024, **_CLAUDE_CACHE
    ),
    # The offline model's loose sibling (`longhaul.adapters.models.offline.LOOSE_MODEL_ID`), priced as a smaller model.
    "longhaul-offline-loose-1": Price(
        input=Decimal("0.25"), output=Decimal("1.25"), cache_min_tokens=1024, **_CLAUDE_CACHE
    ),
    "anthropic.claude-sonnet-4-20250514-v1:0": Price(
        input=Decimal("3.00"), output=Decimal("15.00"), cache_min_tokens=1024, **_CLAUDE_CACHE
    ),
    "anthropic.claude-3-5-haiku-20241022-v1:0": Price(
        input=Decimal("0.80"), output=Decimal("4.00"), cache_min_tokens=2048, **_CLAUDE_CACHE
    ),
    "anthropic.claude-opus-4-20250514-v1:0": Price(
        input=Decimal("15.00"), output=Decimal("75.00"), cache_min_tokens=1024, **_CLAUDE_CACHE
    ),
    "gpt-4o": Price(input=Decimal("2.50"), output=Decimal("10.00"), **_OPENAI_CACHE),
    "gpt-4o-mini": Price(input=Decimal("0.15"), output=Decimal("0.60"), **_OPENAI_CACHE),
}


def price_table(overrides: Mapping[str, Any] | None = None) -> dict[str, Price]:
    """The built-in table with `overrides` ({model id: {"input": "…", "output": "…"}}) on top."""
    table = dict(PRICES)
    for model, row in (overrides or {}).items():
        table[model] = Price.model_validate(row)
    return table


def price_of(model_id: str, table: Mapping[str, Price]) -> Price:
    """A model's row; a cross-region profile (`us.anthropic.…`) is priced as its base model. An unknown model is
    priced like the most expensive row and caches nothing (its cache reads, if a provider reports some, are charged
    as input): a missing row only makes a budget stricter."""
    if model_id in table:
        return table[model_id]
    _, _, base = model_id.partition(".")
    if base in table:
        return table[base]
    dearest = max(table.values(), key=lambda p: (p.output, p.input))
    return dearest.model_copy(update={"cache_min_tokens": None, "cache_read": Decimal(1), "cache_write": Decimal(1)})


def exact_cost(
    input_tokens: int, output_tokens: int, price: Price, *, cache_read_tokens: int = 0, cache_write_tokens: int = 0
) -> Decimal:
    """Micro-dollars for a call, exactly: uncached input at the input price, cache reads and writes at their
    multiples of it, output at the output price."""
    return (
        Decimal(input_tokens) * price.input
        + Decimal(cache_read_tokens) * price.input * price.cache_read
        + Decimal(cache_write_tokens) * price.input * price.cache_write
        + Decimal(output_tokens) * price.output
    )


def cost_micro(
    input_tokens: int, output_tokens: int, price: Price, *, cache_read_tokens: int = 0, cache_write_tokens: int = 0
) -> int:
    """Micro-dollars for a call, rounded up (a budget is never under-charged)."""
    exact = exact_cost(
        input_tokens, output_tokens, price, cache_read_tokens=cache_read_tokens, cache_write_tokens=cache_write_tokens
    )
    return int(exact.to_integral_value(rounding=ROUND_CEILING))


def list_cost_micro(
    input_tokens: int, output_tokens: int, price: Price, *, cache_read_tokens: int = 0, cache_write_tokens: int = 0
) -> int:
    """What the same tokens cost on demand, uncached: every prompt token at the input price (the figure a job's
    `saved_usd` is measured from)."""
    return cost_micro(input_tokens + cache_read_tokens + cache_write_tokens, output_tokens, price)


def usd(micro: int) -> str:
    """Micro-dollars as a dollar string with six decimals."""
    return str((Decimal(micro) / MICRO).quantize(Decimal("0.000001")))


def to_micro(amount: Decimal) -> int:
    return int((amount * MICRO).to_integral_value(rounding=ROUND_CEILING))


def worst_case_input_tokens(*texts: str, schema: Mapping[str, Any] | None = None) -> int:
    """An upper bound of a prompt's tokens: its UTF-8 bytes (and the schema's), plus framing. What a call's prompt
    counts for when its adapter has no token counter of its own."""
    size = sum(len(text.encode()) for text in texts)
    if schema is not None:
        size += len(json.dumps(schema, separators=(",", ":")).encode())
    return size + FRAMING_TOKENS


Scope = Literal["job", "tenant"]


class Reservation(Model):
    """What is held against the job and the tenant's day before a call is made: the call's tokens and cost, with
    the output cap it holds for (`capped_by`: the scope that lowered the cap below the call's own, if one did)."""

    tokens: int = Field(ge=0)
    cost_micro: int = Field(ge=0)
    output_tokens: int = Field(default=0, ge=0)
    capped_by: Scope | None = None

    @classmethod
    def of_call(cls, input_tokens: int, output_tokens: int, price: Price, *, cached_tokens: int = 0) -> "Reservation":
        """What a call holds; `cached_tokens` of its input marked for the provider's cache are held at the dearer
        of a cache write and an uncached read (the call does not know which it will be)."""
        cached = min(cached_tokens, input_tokens)
        return cls(
            tokens=input_tokens + output_tokens,
            cost_micro=cost_micro(input_tokens - cached, output_tokens, price, cache_write_tokens=cached)
            if price.cache_write >= 1
            else cost_micro(input_tokens, output_tokens, price),
            output_tokens=output_tokens,
        )


class CallSize(Model):
    """What a call can use: its prompt's counted tokens and its output cap, at its route's price. `cached_tokens`:
    of the prompt, the prefix marked for the provider's cache (reserved at the cache-write price)."""

    input_tokens: int = Field(ge=0)
    max_output_tokens: int = Field(gt=0)
    price: Price
    cached_tokens: int = Field(default=0, ge=0)

    def _input_cost(self) -> Decimal:
        """The exact micro-dollars the prompt is held at."""
        cached = min(self.cached_tokens, self.input_tokens)
        if self.price.cache_write < 1:
            cached = 0
        return exact_cost(self.input_tokens - cached, 0, self.price, cache_write_tokens=cached)

    @property
    def min_output_tokens(self) -> int:
        return min(self.max_output_tokens, MIN_OUTPUT_TOKENS)

    def reservation(self, output_tokens: int | None = None, capped_by: Scope | None = None) -> Reservation:
        output = self.max_output_tokens if output_tokens is None else output_tokens
        held = Reservation.of_call(self.input_tokens, output, self.price, cached_tokens=self.cached_tokens)
        return held.model_copy(update={"capped_by": capped_by}) if capped_by else held

    def output_within(self, tokens: int, cost: int) -> int:
        """The largest output cap (at most the call's own) whose reservation fits `tokens` and `cost` micro-dollars;
        below zero when not even the prompt fits."""
        by_tokens = tokens - self.input_tokens
        left = Decimal(cost) - self._input_cost()  # a cost rounded up fits iff the exact one does
        if left < 0:
            return -1
        by_cost = math.floor(left / self.price.output) if self.price.output > 0 else self.max_output_tokens
        return min(self.max_output_tokens, by_tokens, by_cost)


class Room(Model):
    """One scope's limits (the job's budget, or the tenant's day) and what is spent against them: settled usage,
    and what calls in flight hold."""

    scope: Scope
    limit_tokens: int
    limit_cost_micro: int
    settled_tokens: int = 0
    settled_cost_micro: int = 0
    held_tokens: int = 0
    held_cost_micro: int = 0

    def output_now(self, size: CallSize) -> int:
        """The call's largest output cap that fits beside what is settled and held now."""
        return size.output_within(
            self.limit_tokens - self.settled_tokens - self.held_tokens,
            self.limit_cost_micro - self.settled_cost_micro - self.held_cost_micro,
        )

    def output_ever(self, size: CallSize) -> int:
        """The call's largest output cap that fits once every call in flight has released what it holds."""
        return size.output_within(
            self.limit_tokens - self.settled_tokens, self.limit_cost_micro - self.settled_cost_micro
        )


class Wait(Model):
    """The call fits once calls in flight release what they hold: wait for a release, then decide again."""


class Refused(Model):
    """The call can never fit `scope`: what is settled there plus the call's smallest reservation exceeds it."""

    scope: Scope


def decide(size: CallSize, rooms: Sequence[Room]) -> Reservation | Wait | Refused:
    """Reserve the call's whole output cap when it fits now; wait while it would fit once calls in flight release
    their holds; when the whole cap can never fit, lower it to what is left (waiting for calls in flight first, which
    may settle below what they hold); refuse when not even the prompt and `MIN_OUTPUT_TOKENS` fit what is settled."""
    ever = {room.scope: room.output_ever(size) for room in rooms}
    for room in rooms:
        if ever[room.scope] < size.min_output_tokens:
            return Refused(scope=room.scope)
    cap = min(ever.values(), default=size.max_output_tokens)
    if min((room.output_now(size) for room in rooms), default=cap) < cap:
        return Wait()
    binding = next((r.scope for r in rooms if ever[r.scope] == cap), None)
    return size.reservation(cap, capped_by=binding if cap < size.max_output_tokens else None)


def job_limits(requested: JobBudget | None, policy: TenantPolicy) -> tuple[int, int, list[dict[str, Any]]]:
    """(max tokens, max micro-dollars, problems): a requested budget within the tenant's ceilings, or the ceilings."""
    problems: list[dict[str, Any]] = []
    tokens = policy.max_job_tokens
    cost = to_micro(policy.max_job_cost_usd)
    if requested is not None and requested.max_tokens is not None:
        if requested.max_tokens > policy.max_job_tokens:
            problems.append(
                {
                    "loc": ["body", "budget", "max_tokens"],
                    "msg": f"exceeds the tenant's ceiling of {policy.max_job_tokens} tokens per job",
                }
            )
        tokens = requested.max_tokens
    if requested is not None and requested.max_cost_usd is not None:
        if requested.max_cost_usd > policy.max_job_cost_usd:
            problems.append(
                {
                    "loc": ["body", "budget", "max_cost_usd"],
                    "msg": f"exceeds the tenant's ceiling of {policy.max_job_cost_usd} USD per job",
                }
            )
        cost = to_micro(requested.max_cost_usd)
    return tokens, cost, problems


def estimate_tokens(*texts: str) -> int:
    """A usage estimate for a model that reports none (four characters a token)."""
    return math.ceil(sum(len(text) for text in texts) / 4)
