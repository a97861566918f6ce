"""What a job costs on AWS: the orchestration price table (one region, dated, with its sources) and the arithmetic.

Model tokens are priced by the budget ledger's own table (`longhaul.core.budgets.PRICES`): a job's model cost is what
its ledger settled, never re-priced here. Everything is `Decimal` US dollars; a cost is rounded to the micro-dollar
once, at the end (half up), so per-job figures multiplied by a thousand stay honest.

Updating prices: change the figures, `AS_OF` and, if a page moved, `SOURCES`; the unit tests of the arithmetic
state the figures they expect, so they fail until they are updated with them.
"""

from collections.abc import Mapping
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from typing import NamedTuple

from pydantic import ConfigDict

from longhaul.core.budgets import LANES, Lane, usd
from longhaul.core.contracts import (
    JobCost,
    LaneCost,
    ModelCost,
    ModelLanes,
    OrchestrationCost,
    RequestUsage,
    TierCost,
)
from longhaul.core.metering import Metered
from longhaul.core.model import Model

MICRO = Decimal(1_000_000)
MS_PER_HOUR = Decimal(3_600_000)


class AwsPrices(Model):
    """On-demand list prices in US dollars per unit (per transition, per GB-second, per request...)."""

    model_config = ConfigDict(frozen=True)

    region: str
    as_of: date
    sources: tuple[str, ...]
    step_functions_transition: Decimal  # Standard workflows, per state transition
    lambda_gb_second_arm64: Decimal
    lambda_gb_second_x86_64: Decimal
    lambda_request: Decimal
    fargate_vcpu_hour_arm64: Decimal  # Linux/ARM
    fargate_gb_hour_arm64: Decimal
    dynamodb_read_unit: Decimal  # on-demand read request unit
    dynamodb_write_unit: Decimal  # on-demand write request unit
    s3_class_a: Decimal  # S3 Standard PUT, COPY, POST, LIST
    s3_class_b: Decimal  # S3 Standard GET, SELECT and all other requests
    sqs_request: Decimal  # standard queue, per 64 KB request chunk


# The published us-east-1 list prices (beyond free tiers, first pricing tier), as of the DynamoDB on-demand price
# cut of 2024-11-01, the latest change among them that this table knows of.
AWS_PRICES = AwsPrices(
    region="us-east-1",
    as_of=date(2024, 11, 1),
    sources=(
        "https://aws.amazon.com/step-functions/pricing/",
        "https://aws.amazon.com/lambda/pricing/",
        "https://aws.amazon.com/fargate/pricing/",
        "https://aws.amazon.com/dynamodb/pricing/on-demand/",
        "https://aws.amazon.com/s3/pricing/",
        "https://aws.amazon.com/sqs/pricing/",
    ),
    step_functions_transition=Decimal("0.000025"),  # $0.025 per 1,000
    lambda_gb_second_arm64=Decimal("0.0000133334"),
    lambda_gb_second_x86_64=Decimal("0.0000166667"),
    lambda_request=Decimal("0.0000002"),  # $0.20 per million
    fargate_vcpu_hour_arm64=Decimal("0.03238"),
    fargate_gb_hour_arm64=Decimal("0.00356"),
    dynamodb_read_unit=Decimal("0.000000125"),  # $0.125 per million
    dynamodb_write_unit=Decimal("0.000000625"),  # $0.625 per million
    s3_class_a=Decimal("0.000005"),  # $0.005 per 1,000
    s3_class_b=Decimal("0.0000004"),  # $0.0004 per 1,000
    sqs_request=Decimal("0.0000004"),  # $0.40 per million
)
# The platform's functions run on arm64 (`stacks/bundling.py`), its workers on ARM Fargate (`stacks/workers.py`).
LAMBDA_ARCHITECTURE = "arm64"


def lambda_usd(metered: Metered, prices: AwsPrices = AWS_PRICES) -> Decimal:
    gb_seconds = Decimal(metered.lambda_mb_ms) / 1024 / 1000
    per_gb_second = prices.lambda_gb_second_arm64 if LAMBDA_ARCHITECTURE == "arm64" else prices.lambda_gb_second_x86_64
    return gb_seconds * per_gb_second + metered.lambda_invocations * prices.lambda_request


def fargate_usd(metered: Metered, prices: AwsPrices = AWS_PRICES) -> Decimal:
    vcpu_hours = Decimal(metered.fargate_cpu_ms) / 1024 / MS_PER_HOUR
    gb_hours = Decimal(metered.fargate_mb_ms) / 1024 / MS_PER_HOUR
    return vcpu_hours * prices.fargate_vcpu_hour_arm64 + gb_hours * prices.fargate_gb_hour_arm64


def requests_usd(metered: Metered, prices: AwsPrices = AWS_PRICES) -> Decimal:
    return (
        Decimal(metered.dynamodb_read_half_units) / 2 * prices.dynamodb_read_unit
        + metered.dynamodb_write_units * prices.dynamodb_write_unit
        + metered.s3_class_a * prices.s3_class_a
        + metered.s3_class_b * prices.s3_class_b
        + metered.sqs_requests * prices.sqs_request
    )


def orchestration_usd(metered: Metered, transitions: int, prices: AwsPrices = AWS_PRICES) -> Decimal:
    """The exact dollars of the state transitions, compute and requests (not rounded)."""
    return (
        transitions * prices.step_functions_transition
        + lambda_usd(metered, prices)
        + fargate_usd(metered, prices)
        + requests_usd(metered, prices)
    )


def to_micro(amount: Decimal) -> int:
    """Dollars to whole micro-dollars, half up (a figure of cost, not a budget reservation)."""
    return int((amount * MICRO).to_integral_value(rounding=ROUND_HALF_UP))


class LaneTally(NamedTuple):
    """One lane's settled model usage: tokens, what they cost (micro-dollars) and what they would have cost on
    demand, uncached (`list_cost_micro`)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_micro: int = 0
    list_cost_micro: int = 0

    def minus(self, other: "LaneTally") -> "LaneTally":
        return LaneTally(*(max(mine - theirs, 0) for mine, theirs in zip(self, other, strict=True)))

    def view(self) -> LaneCost:
        return LaneCost(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
            usd=usd(self.cost_micro),
        )


def model_cost(lanes: Mapping[Lane, LaneTally]) -> ModelCost:
    """The model's cost view from its lanes: the totals, each lane, and what caching and batching saved (the same
    tokens on demand, uncached, less what they cost: negative when cache writes were never read back)."""
    every = [lanes.get(lane, LaneTally()) for lane in LANES]
    total = LaneTally(*(sum(column) for column in zip(*every, strict=True)))
    saved = total.list_cost_micro - total.cost_micro
    return ModelCost(
        input_tokens=total.input_tokens,
        output_tokens=total.output_tokens,
        cache_read_tokens=total.cache_read_tokens,
        cache_write_tokens=total.cache_write_tokens,
        usd=usd(total.cost_micro),
        lanes=ModelLanes(**{lane: tally.view() for lane, tally in zip(LANES, every, strict=True)}),
        saved_usd=usd(saved) if saved >= 0 else f"-{usd(-saved)}",
    )


def job_cost(
    metered: Metered,
    *,
    transitions: int | None,
    history_events: int | None,
    input_tokens: int,
    output_tokens: int,
    model_cost_micro: int,
    estimate_reason: str | None,
    prices: AwsPrices = AWS_PRICES,
    tiers: Mapping[str, tuple[int, int, int]] | None = None,
    lanes: Mapping[Lane, LaneTally] | None = None,
) -> JobCost:
    """A job's cost view; `estimate_reason`: why a figure is not final yet (None: the job has finished and every
    execution's history was counted). `lanes`: the model usage by lane (None: all on demand, uncached)."""
    if lanes is None:
        lanes = {"on_demand": LaneTally(input_tokens, output_tokens, 0, 0, model_cost_micro, model_cost_micro)}
    orchestration = to_micro(orchestration_usd(metered, transitions or 0, prices))
    return JobCost(
        total=usd(orchestration + model_cost_micro),
        orchestration=OrchestrationCost(
            transitions=transitions,
            history_events=history_events,
            lambda_invocations=metered.lambda_invocations,
            lambda_gb_seconds=round(metered.lambda_gb_seconds, 6),
            fargate_seconds=round(metered.fargate_seconds, 3),
            requests=RequestUsage(
                dynamodb=metered.dynamodb_requests,
                s3=metered.s3_requests,
                sqs=metered.sqs_requests,
                dynamodb_read_units=metered.dynamodb_read_units,
                dynamodb_write_units=metered.dynamodb_write_units,
                s3_class_a=metered.s3_class_a,
                s3_class_b=metered.s3_class_b,
            ),
            usd=usd(orchestration),
        ),
        model=model_cost(lanes).model_copy(
            update={
                "tiers": {  # (input tokens, output tokens, micro-dollars) by service tier
                    tier: TierCost(input_tokens=i, output_tokens=o, usd=usd(c))
                    for tier, (i, o, c) in (tiers or {}).items()
                }
            }
        ),
        region=prices.region,
        prices_as_of=prices.as_of,
        estimated=estimate_reason is not None,
        estimate_reason=estimate_reason,
    )
