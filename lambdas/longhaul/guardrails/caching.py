"""Prompt caching: whether a call's stable prefix is marked for the provider's cache, and how big that prefix is.

Each step's prompt builder says where the stable part of its prompt ends (`ModelRequest.stable_prompt_chars`): the
system prompt, the answer's schema and that much of the prompt are the same in the step's other calls (instructions,
the question, shared passages come first; what changes per call comes after). The gateway marks that prefix
(`ModelRequest.cache_prefix_tokens`, which the Bedrock adapter sends as a Converse `cachePoint` block) when

- the route allows it (`Route.prompt_caching`, on by default) and its provider takes a cache point (`bedrock`, and
  the `offline` model, which simulates a provider's cache); OpenAI-compatible providers cache by themselves and
  report `cached_tokens`, which are metered the same way;
- the model caches at all (its price-table row has a `cache_min_tokens`) and the prefix reaches that minimum: below
  it a provider caches nothing, and a write would be reserved for nothing.

The prefix is counted as the route's adapter counts tokens, or at four characters a token (an estimate: a marker a
little below the minimum costs nothing, the provider ignores it).
"""

from __future__ import annotations

import json

from aws_lambda_powertools.metrics import MetricUnit

from longhaul.core.budgets import Lane, Price, estimate_tokens
from longhaul.core.llm import ModelRequest, TokenCounter, Usage
from longhaul.core.observability import (
    MODEL_CACHE_READ_METRIC,
    MODEL_LANE_COST_METRIC,
    MODEL_LANE_TOKENS_METRIC,
    MODEL_PROMPT_TOKENS_METRIC,
    emit,
)
from longhaul.core.routes import Route

# Providers whose requests carry a cache point the platform places.
MARKED_PROVIDERS = frozenset({"bedrock", "offline"})


def prefix_tokens(request: ModelRequest, counter: object | None = None) -> int:
    """The stable prefix's tokens: the adapter's count of a request that is only that prefix, else an estimate of
    the system prompt, the schema and the stable part of the prompt."""
    stable, _ = request.stable_prefix()
    if isinstance(counter, TokenCounter):
        counted = counter.count_tokens(request.model_copy(update={"prompt": stable}))
        if counted is not None:
            return counted
    schema = json.dumps(request.response_schema, separators=(",", ":")) if request.response_schema else ""
    return estimate_tokens(request.system, schema, stable)


def marked(request: ModelRequest, route: Route, price: Price, counter: object | None = None) -> ModelRequest:
    """`request` with its stable prefix marked for the provider's cache, when the route, the model and the prefix's
    size allow it; else `request` unmarked."""
    unmarked = (
        request if request.cache_prefix_tokens is None else request.model_copy(update={"cache_prefix_tokens": None})
    )
    if request.stable_prompt_chars is None or price.cache_min_tokens is None:
        return unmarked
    if not route.prompt_caching or route.provider not in MARKED_PROVIDERS:
        return unmarked
    tokens = prefix_tokens(request, counter)
    if tokens < price.cache_min_tokens:
        return unmarked
    return request.model_copy(update={"cache_prefix_tokens": tokens})


def emit_lane_metrics(lane: Lane, usage: Usage, cost_micro: int) -> None:
    """A settled call's tokens and dollars in its lane, and its prompt tokens with those read from the cache (the
    dashboard's cache-read share is the ratio of their sums)."""
    cache_read, cache_write = usage.cache_read_tokens or 0, usage.cache_write_tokens or 0
    prompt = usage.input_tokens + cache_read + cache_write
    emit(MODEL_LANE_TOKENS_METRIC, prompt + usage.output_tokens, lane=lane)
    emit(MODEL_LANE_COST_METRIC, cost_micro / 1_000_000, MetricUnit.NoUnit, lane=lane)
    emit(MODEL_PROMPT_TOKENS_METRIC, prompt, lane=lane)
    emit(MODEL_CACHE_READ_METRIC, cache_read, lane=lane)
