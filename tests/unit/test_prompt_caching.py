"""Prompt caching and cost by lane: where the gateway marks a call's stable prefix, the Bedrock request it makes, the
usage each provider reports, the offline model's simulated cache, and how cache tokens are priced, reserved, settled
and shown (the job's `usage`, `cost.model.lanes`, `saved_usd`)."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from typing import Any

import pytest

from longhaul import services as wiring
from longhaul.adapters.models.bedrock import BedrockConverseModel
from longhaul.adapters.models.offline import OfflineExtractiveModel, PromptCache
from longhaul.adapters.models.openai_compat import OpenAICompatibleModel
from longhaul.api.jobs import step_usage
from longhaul.core.budgets import PRICES, CallSize, Price, TenantPolicy, cost_micro, list_cost_micro, price_of
from longhaul.core.llm import INSTRUCTIONS_HEADING, ModelRequest
from longhaul.core.pricing import LaneTally, model_cost
from longhaul.core.records import Job
from longhaul.core.routes import Route
from longhaul.core.settings import Settings
from longhaul.guardrails import caching
from longhaul.guardrails.gateway import ModelCalls
from longhaul.storage.budgets import BudgetStore, CallLabels
from longhaul.storage.jobs import JobStore
from longhaul.workflows.document_analysis.analysis import extract_prompt_head, render_extract_prompt
from longhaul.workflows.invoice_reconciliation.prompts import extraction_request
from tests.unit.step_support import running_job

OFFLINE = "longhaul-offline-extractive-1"
SONNET = "anthropic.claude-sonnet-4-20250514-v1:0"
BEDROCK = Route(provider="bedrock", model_id=SONNET)
STABLE = "Question:\nWhich clauses limit liability?\n\n" + "A shared rule of the step. " * 200  # ~1,350 tokens
STAND_IN = "tests.unit.test_prompt_caching:stand_in"


def stand_in(context: dict[str, Any], model_id: str) -> str:
    """The offline answer of the test's task: it names the group, whatever the cache did."""
    return json.dumps({"answer": f"group {context['group']}", "score": 0.5})


def _request(stable: str = STABLE, rest: str = "<passage>one</passage>", group: int = 0) -> ModelRequest:
    return ModelRequest(
        task="extract_evidence",
        system="You extract evidence.",
        prompt=stable + rest,
        context={"group": group},
        max_tokens=200,
        offline=STAND_IN,
        stable_prompt_chars=len(stable),
    )


# ---------------------------------------------------------------- where the prefix is marked


def test_a_prefix_at_the_models_minimum_is_marked_and_one_below_it_is_not() -> None:
    price = price_of(SONNET, PRICES)
    assert price.cache_min_tokens == 1024
    marked = caching.marked(_request(), BEDROCK, price)
    assert marked.cache_prefix_tokens == caching.prefix_tokens(_request()) >= 1024
    short = _request(stable="Question:\nWhich clauses?\n\n")
    assert caching.prefix_tokens(short) < 1024
    assert caching.marked(short, BEDROCK, price).cache_prefix_tokens is None
    # Claude 3.5 Haiku's minimum is 2,048: the same prefix is not enough there
    haiku = price_of("anthropic.claude-3-5-haiku-20241022-v1:0", PRICES)
    assert haiku.cache_min_tokens == 2048
    assert caching.marked(_request(), BEDROCK, haiku).cache_prefix_tokens is None


def test_the_route_the_model_and_the_builder_each_can_keep_a_prefix_unmarked() -> None:
    price = price_of(SONNET, PRICES)
    assert (
        caching.marked(_request(), BEDROCK.model_copy(update={"prompt_caching": False}), price).cache_prefix_tokens
        is None
    )
    openai = Route(provider="openai", model_id="gpt-4o", base_url="http://127.0.0.1:1/v1")
    assert caching.marked(_request(), openai, price).cache_prefix_tokens is None  # it caches by itself
    unknown = price_of("someone.unknown-model-v1", PRICES)
    assert caching.marked(_request(), BEDROCK, unknown).cache_prefix_tokens is None
    once = _request().model_copy(update={"stable_prompt_chars": None})  # a call made once: nothing worth caching
    assert caching.marked(once, BEDROCK, price).cache_prefix_tokens is None
    # a marked request sent to a route that does not cache (a failover) goes unmarked
    marked = caching.marked(_request(), BEDROCK, price)
    assert caching.marked(marked, openai, price).cache_prefix_tokens is None


def test_the_prefix_is_counted_by_the_adapters_counter_when_it_has_one() -> None:
    counted = caching.prefix_tokens(_request(), OfflineExtractiveModel(OFFLINE))
    assert counted == OfflineExtractiveModel(OFFLINE).count_tokens(_request(rest=""))


# ---------------------------------------------------------------- the Bedrock request and the usage providers report


class _Converse:
    def __init__(self, usage: dict[str, int]) -> None:
        self.usage = usage
        self.sent: list[dict[str, Any]] = []

    def converse(self, **arguments: Any) -> dict[str, Any]:
        self.sent.append(arguments)
        answer = {"message": {"content": [{"text": "ok"}]}}
        return {"stopReason": "end_turn", "output": answer, "usage": self.usage}


def test_bedrock_sends_one_cache_point_after_the_stable_part_and_reads_the_cache_usage() -> None:
    client = _Converse({"inputTokens": 12, "outputTokens": 3, "cacheReadInputTokens": 1400, "cacheWriteInputTokens": 0})
    model = BedrockConverseModel(SONNET, client=client)
    marked = caching.marked(_request(), BEDROCK, price_of(SONNET, PRICES))
    response = model.generate(marked)
    sent = client.sent[0]
    assert sent["system"] == [{"text": "You extract evidence."}]
    assert sent["messages"][0]["content"] == [
        {"text": STABLE},
        {"cachePoint": {"type": "default"}},
        {"text": "<passage>one</passage>"},
    ]
    assert (response.usage.input_tokens, response.usage.cache_read_tokens, response.usage.cache_write_tokens) == (
        12,
        1400,
        0,
    )
    # A builder whose stable part is the system prompt alone: the cache point closes the system blocks
    model.generate(marked.model_copy(update={"stable_prompt_chars": 0}))
    assert client.sent[1]["system"] == [{"text": "You extract evidence."}, {"cachePoint": {"type": "default"}}]
    assert client.sent[1]["messages"][0]["content"] == [{"text": marked.prompt}]
    # Unmarked: the request as before, no cache point anywhere
    model.generate(_request())
    assert "cachePoint" not in json.dumps(client.sent[2])


def test_openai_cached_tokens_are_read_apart_from_the_uncached_input() -> None:
    model = OpenAICompatibleModel("gpt-4o", "http://127.0.0.1:1/v1", api_key=lambda: None)
    payload = {
        "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 2000, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 1536}},
    }
    usage = model._response(payload).usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (464, 1536, 9)
    plain = model._response({**payload, "usage": {"prompt_tokens": 20, "completion_tokens": 1}}).usage
    assert (plain.input_tokens, plain.cache_read_tokens) == (20, None)


def test_the_offline_model_reads_a_prefix_it_saw_within_the_ttl_and_answers_the_same() -> None:
    now = [0.0]
    model = OfflineExtractiveModel(OFFLINE, cache=PromptCache(now=lambda: now[0]))
    marked = caching.marked(_request(), BEDROCK, price_of(OFFLINE, PRICES), model)
    prefix = marked.cache_prefix_tokens
    assert prefix is not None
    first = model.generate(marked)
    second = model.generate(marked.model_copy(update={"prompt": STABLE + "<passage>two</passage>"}))
    now[0] += 301  # past the 5-minute TTL of its last use
    third = model.generate(marked)
    assert (first.usage.cache_write_tokens, first.usage.cache_read_tokens) == (prefix, 0)
    assert (second.usage.cache_read_tokens, second.usage.cache_write_tokens) == (prefix, 0)
    assert third.usage.cache_write_tokens == prefix
    total = model.count_tokens(marked)
    assert first.usage.input_tokens + prefix == total  # the prompt's tokens, split: none added, none lost
    unmarked = model.generate(_request())
    assert unmarked.text == first.text and unmarked.usage.cache_read_tokens is None


def test_the_jobs_instructions_join_the_stable_part_when_the_builder_declared_one() -> None:
    instructed = _request().instructed("Cite page numbers.")
    stable, rest = instructed.stable_prefix()
    assert stable.startswith(STABLE) and stable.endswith(f"{INSTRUCTIONS_HEADING}\nCite page numbers.\n\n")
    assert rest == "<passage>one</passage>"
    once = _request().model_copy(update={"stable_prompt_chars": None}).instructed("Cite page numbers.")
    assert once.prompt.endswith(f"\n\n{INSTRUCTIONS_HEADING}\nCite page numbers.")  # at the end, as before


def test_the_step_builders_put_their_stable_part_first() -> None:
    extraction = render_extract_prompt("Who signed?", ())
    assert extraction.startswith(extract_prompt_head("Who signed?")) and "Passages" not in extract_prompt_head("x")
    invoice = extraction_request("inv.txt", [(1, "Invoice No: 1")])
    stable, rest = invoice.stable_prefix()
    assert stable.startswith("JSON schema: {") and rest.startswith("Document: inv.txt")
    assert extraction_request("other.txt", [(1, "x")]).stable_prefix()[0] == stable  # every invoice's


# ---------------------------------------------------------------- pricing, reservation and settlement

CLAUDE = Price(input=Decimal("3.00"), output=Decimal("15.00"), cache_read=Decimal("0.10"), cache_write=Decimal("1.25"))


def test_cache_reads_and_writes_are_priced_at_their_multiples_of_the_input_price() -> None:
    # 1,000 read at $0.30/M, 1,000 written at $3.75/M, 100 uncached at $3/M, 10 output at $15/M
    assert cost_micro(100, 10, CLAUDE, cache_read_tokens=1000, cache_write_tokens=1000) == 300 + 3750 + 300 + 150
    assert list_cost_micro(100, 10, CLAUDE, cache_read_tokens=1000, cache_write_tokens=1000) == 2100 * 3 + 150
    assert cost_micro(100, 10, CLAUDE) == cost_micro(100, 10, Price(input=Decimal(3), output=Decimal(15)))


def test_a_marked_prefix_is_reserved_at_the_cache_write_price() -> None:
    size = CallSize(input_tokens=1100, max_output_tokens=100, price=CLAUDE, cached_tokens=1000)
    held = size.reservation()
    assert (held.tokens, held.cost_micro) == (1200, 1000 * 3.75 + 100 * 3 + 100 * 15)
    # and the cap that fits a cost left is computed with that same prompt price
    assert size.output_within(10_000, int(1000 * 3.75 + 100 * 3) + 15 * 40) == 40


@pytest.fixture
def budgets(table: Any, clock: Any) -> BudgetStore:
    return BudgetStore(table, clock=clock)


def _job(store: JobStore, job_id: str = "job_cache_1") -> Job:
    return running_job(store, job_id)


def test_settling_cache_tokens_counts_them_against_the_budget_and_by_lane(
    store: JobStore, budgets: BudgetStore
) -> None:
    job = _job(store)
    labels = CallLabels("extract_evidence", 0, "default", "bedrock", SONNET, "v1", "h")
    size = CallSize(input_tokens=1100, max_output_tokens=100, price=CLAUDE, cached_tokens=1000)
    budgets.reserve(job, "1/x/0", size, TenantPolicy(), labels)
    cost = cost_micro(100, 50, CLAUDE, cache_read_tokens=1000)
    listed = list_cost_micro(100, 50, CLAUDE, cache_read_tokens=1000)
    assert budgets.settle(
        job.job_id,
        "1/x/0",
        input_tokens=100,
        output_tokens=50,
        cost_micro=cost,
        cache_read_tokens=1000,
        list_cost_micro=listed,
    )
    # a batch record (its lane recorded on its ledger entry by the batch lane), settled at its own price
    budgets.reserve(
        job,
        "1/x/1",
        CallSize(input_tokens=200, max_output_tokens=100, price=CLAUDE),
        TenantPolicy(),
        labels._replace(lane="batch"),
    )
    assert budgets.settle(job.job_id, "1/x/1", input_tokens=200, output_tokens=20, cost_micro=600, list_cost_micro=900)
    charge = budgets.ledger_item(job.job_id, "1/x/0")
    assert charge is not None and (charge.lane, charge.cache_read_tokens, charge.list_cost_micro) == (
        "on_demand",
        1000,
        listed,
    )
    after = store.get_job(job.job_id)
    assert after is not None
    assert after.spent_tokens == 1150 + 220  # every token used counts against the budget, cached or not
    assert (after.usage_cache_read_tokens, after.usage_cache_write_tokens) == (1000, 0)
    view = after.view()
    assert (view.usage.input_tokens, view.usage.cache_read_tokens, view.usage.cost_usd) == (300, 1000, "0.001950")
    lanes = view.cost.model.lanes
    assert (lanes.on_demand.input_tokens, lanes.on_demand.cache_read_tokens, lanes.on_demand.usd) == (
        100,
        1000,
        "0.001350",  # 100 x $3 + 1,000 read x $0.30 + 50 x $15
    )
    assert (lanes.batch.input_tokens, lanes.batch.output_tokens, lanes.batch.usd) == (200, 20, "0.000600")
    # on demand uncached: 1,100 x $3 + 50 x $15 = 4,050; batch 900: 4,950 listed, 1,950 paid
    assert view.cost.model.saved_usd == "0.003000"


def test_saved_is_listed_less_paid_and_negative_when_writes_were_never_read() -> None:
    written = LaneTally(input_tokens=0, output_tokens=0, cache_write_tokens=1000, cost_micro=3750, list_cost_micro=3000)
    shown = model_cost({"on_demand": written})
    assert (shown.saved_usd, shown.usd, shown.lanes.batch.usd) == ("-0.000750", "0.003750", "0.000000")
    both = model_cost({"on_demand": LaneTally(10, 5, 0, 0, 100, 100), "batch": LaneTally(10, 5, 0, 0, 50, 100)})
    assert (both.input_tokens, both.output_tokens, both.usd, both.saved_usd) == (20, 10, "0.000150", "0.000050")


# ---------------------------------------------------------------- the gateway, end to end on moto


@pytest.fixture
def offline_services(services: wiring.Services, monkeypatch: pytest.MonkeyPatch) -> wiring.Services:
    model = OfflineExtractiveModel(OFFLINE, cache=PromptCache())
    monkeypatch.setattr(wiring.Services, "adapter", lambda self, route: model)
    routes = {"default": {"provider": "offline", "model_id": OFFLINE}}
    settings = Settings.model_validate(
        {**services.settings.model_dump(by_alias=True), "LONGHAUL_MODEL_ROUTES": json.dumps(routes)}
    )
    return dataclasses.replace(services, settings=settings)


def test_calls_sharing_a_prefix_read_it_from_the_cache_and_the_job_shows_it(offline_services: wiring.Services) -> None:
    s = offline_services
    job = _job(s.jobs, "job_cache_2")
    calls = ModelCalls(s, job, "extract_evidence", 0, 1)
    texts = [calls.text(_request(rest=f"<passage>{n}</passage>", group=n)).text for n in range(4)]
    assert texts == [stand_in({"group": n}, OFFLINE) for n in range(4)]  # the answers do not depend on the cache
    prefix = calls.calls[0]["cache_write_tokens"]
    assert [c.get("cache_read_tokens", 0) for c in calls.calls] == [0, prefix, prefix, prefix]
    view = s.jobs.get_job(job.job_id)
    assert view is not None
    shown = view.view()
    assert (shown.usage.cache_write_tokens, shown.usage.cache_read_tokens) == (prefix, 3 * prefix)
    assert shown.cost.model.lanes.on_demand.cache_read_tokens == 3 * prefix
    assert Decimal(shown.cost.model.saved_usd) > 0  # three reads at a tenth paid for the one write's premium
    # and each step's row of the budget view says the same
    (row,) = step_usage(s.budgets.ledger(job.job_id))
    assert (row.calls, row.cache_write_tokens, row.cache_read_tokens) == (4, prefix, 3 * prefix)
