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

from pydantic import ConfigDict

from longhaul.core.budgets import usd
from longhaul.core.contracts import JobCost, ModelCost, OrchestrationCost, RequestUsage, TierCost
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
) -> JobCost:
    """A job's cost view; `estimate_reason`: why a figure is not final yet (None: the job has finished and every
    execution's history was counted)."""
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
        model=ModelCost(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usd=usd(model_cost_micro),
            tiers={  # (input tokens, output tokens, micro-dollars) by service tier
                tier: TierCost(input_tokens=i, output_tokens=o, usd=usd(c)) for tier, (i, o, c) in (tiers or {}).items()
            },
        ),
        region=prices.region,
        prices_as_of=prices.as_of,
        estimated=estimate_reason is not None,
        estimate_reason=estimate_reason,
    )
