"""The model gateway of a step: route → breaker → budget reservation → call → settlement → validation ladder.

Every model call of a step goes through `ModelCalls` (`StepContext.model()`):
- the route is the job's choice, else the step's configured route, else its SLA class's route, else `default`
  (`longhaul.core.routes`); the route may name a Bedrock service tier for the job's class, which the call is sent
  at, reserved and priced at (`Price.at_tier`) and recorded with (`service_tier` of the call and the job's cost);
- the provider's circuit breaker is asked first: while it is open the call fails fast as `upstream-unavailable`
  (the state machine retries later) or goes to the route's fallback when one is configured;
- the job must still be running (a job that failed, was cancelled or expired meanwhile makes no call: the step
  stops), checked before the reservation and again, atomically, by it;
- what the call can use is reserved against the job's budget and the tenant's day: its prompt's counted tokens (the
  adapter's count, or every byte as a token) plus its output cap, at the route's price; while calls in flight hold
  the room it needs it waits for a release (bounded, then `RateLimitedError`: the state machine retries the step);
  when its whole output cap can no longer fit, the call is made with the cap lowered to what is left (an answer cut
  off there fails the step `budget-exceeded`); when not even that fits, the step fails `budget-exceeded` and no call
  is made; after the call the reservation settles to the actual usage;
- a call already made and settled by an earlier delivery of the same step (same charge id, same prompt) is answered
  from its ledger entry: a retried step never pays twice for one call;
- a route with shared limits (`requests_per_minute`, `tokens_per_minute`) admits the call through its DynamoDB
  counters (`longhaul.storage.route_limits`: a bounded wait, then `RateLimitedError`, the reservation released); a
  provider's 429 on it lowers its allowance for a while;
- an adapter that streams (`StreamingGateway`) is streamed: its text goes, coalesced, into the job's short-lived
  stream records as it is written (`core.streams`), for people watching; the answer is still the whole response;
- the job's instructions (given by an update of the job: `longhaul.api.updates`), as they were when the step started,
  are added to the end of every prompt of the step (to the end of its stable part, when its builder declared one),
  and kept with it (`KeptPrompt.instructions`);
- the stable prefix of the prompt (system, schema, and the part of the prompt its builder says is the same in the
  step's other calls) is marked for the provider's cache when the route allows it and the prefix reaches the model's
  minimum (`longhaul.guardrails.caching`); the reservation holds that prefix at the cache-write price, the settlement
  prices what the provider reports read from and written to its cache at the table's multiples of the input price;
- the answer climbs the validation ladder (`longhaul.guardrails.ladder`); each rung is an event;
- personal data (the tenant's policy `redact`: `longhaul.core.redaction`) is replaced by typed placeholders in the
  kept request and response, and in the log lines and span content written during the call; the model is sent the
  request as the step made it, or, with `redact_before_model`, the redacted request, the placeholders of its answer
  put back before the ladder judges it. One `Redactor` per call holds the mapping, in memory only: a retried call
  redacts its prompt again to the same placeholders (numbered in order of appearance), so its hash, its ledger entry
  and its reuse are those of the first delivery.
Each call is recorded (route, provider, model, prompt version and hash, response hash, usage, cost, and the code and
workflow versions that made it) in `calls`, which the runner stores on the step's checkpoint, and as a `model_called`
event. The exact request sent and the raw response are kept in the job's artifacts under their hashes
(`storage.artifacts.prompt_key`/`response_key`: encrypted, expiring with the job's other intermediate artifacts), so
an operator can read what a step asked and was answered.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel

from longhaul.core import faults, genai, redaction
from longhaul.core.budgets import (
    DEFAULT_LANE,
    CallSize,
    Lane,
    Reservation,
    Scope,
    TenantPolicy,
    cost_micro,
    list_cost_micro,
    price_of,
    price_table,
    usd,
    worst_case_input_tokens,
)
from longhaul.core.contracts import JobStatus, KeptPrompt, KeptResponse
from longhaul.core.errors import (
    BudgetExceededError,
    CancelledError,
    LonghaulError,
    OutputInvalidError,
    PolicyRefusalError,
    RateLimitedError,
    UpstreamUnavailableError,
)
from longhaul.core.llm import TRUNCATED, ModelRequest, ModelResponse, StreamingGateway, TokenCounter, Usage
from longhaul.core.observability import (
    ALLOWANCE_REACHED_METRIC,
    MODEL_COST_METRIC,
    MODEL_LOG_KEYS,
    MODEL_TOKENS_METRIC,
    ROUTE_LIMITED_METRIC,
    ROUTE_WAIT_METRIC,
    emit,
    logger,
)
from longhaul.core.records import Job, Provenance
from longhaul.core.redaction import Redactor
from longhaul.core.routes import STANDARD_TIER
from longhaul.core.streams import Coalescer, NewRecord
from longhaul.guardrails import batch, caching
from longhaul.guardrails.batch import Captured
from longhaul.guardrails.ladder import (
    FEEDBACK_RETRIES,
    Outcome,
    Rung,
    check,
    count_escalation,
    count_failures,
    with_feedback,
)
from longhaul.services import Services
from longhaul.storage.artifacts import prompt_key, response_key
from longhaul.storage.breakers import Transition
from longhaul.storage.budgets import CallLabels, whose
from longhaul.storage.route_limits import RouteLimits

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class _Call:
    """A model call made and settled, as `ModelCalls._recorded` records it."""

    seq: int
    rung: str
    route_name: str
    request: ModelRequest
    prompt_hash: str
    response: ModelResponse
    response_hash: str
    cost: int
    provenance: Provenance


# The statuses in which a step may call a model (paused: an item under way when its job paused finishes).
LIVE = frozenset({JobStatus.RUNNING, JobStatus.RETRYING, JobStatus.PAUSED})
BREAKER_EVENTS = {"open": "breaker_opened", "half_open": "breaker_half_open", "closed": "breaker_closed"}


@dataclass
class ModelCalls:
    services: Services
    job: Job
    step: str
    item: int | None
    job_attempt: int
    provenance: Provenance | None = None
    attempt: int = 1  # the step's delivery (its Task's retries + 1): a call made again by a retry is attempt 2
    calls: list[dict[str, Any]] = field(default_factory=list)
    # The batch lane's submission runs a step's item up to its first call, which is captured (`batch.Captured`),
    # not made (`longhaul.guardrails.batch`).
    capturing: bool = False
    _seq: int = 0
    _policy: TenantPolicy | None = None

    # ------------------------------------------------------------------ the ladder

    def ask(
        self, request: ModelRequest, schema: type[T], *, defaults: Mapping[str, Any] | None = None
    ) -> tuple[T, ModelResponse]:
        """A validated answer of `schema`, or `OutputInvalidError` once every rung has failed."""
        response, outcome = self._climb(request, schema, defaults)
        assert outcome.value is not None
        return outcome.value, response

    def text(self, request: ModelRequest) -> ModelResponse:
        """A free-text answer (only truncation makes it invalid), through the same ladder."""
        return self._climb(request, None, None)[0]

    def _climb(
        self, request: ModelRequest, schema: type[T] | None, defaults: Mapping[str, Any] | None
    ) -> tuple[ModelResponse, Outcome[T]]:
        """The ladder: each rung a span (`ladder validate`, `ladder feedback`, `ladder stronger`, `ladder fail`) with
        its outcome, the rung's model call nested in it."""
        # The job's instructions as they were when this step started (`self.job`: read at its start), once.
        request = request.instructed(self.job.instructions)
        route = self.services.routing.route_for(self.step, self.job.route, self.job.sla_class)
        response, used, outcome = self._rung("validate", route, request, schema, defaults, request)
        if _passed(outcome, schema):
            count_escalation(route, escalated=False)
            return response, outcome
        for attempt in range(FEEDBACK_RETRIES):
            self._event("feedback_retry", rung="feedback", route=used, attempt=attempt + 1, errors=outcome.errors)
            asked = with_feedback(request, outcome)
            response, used, outcome = self._rung("feedback", route, asked, schema, defaults, request)
            if _passed(outcome, schema):
                count_escalation(route, escalated=False)
                return response, outcome
        stronger = self.services.routing[route].stronger
        count_escalation(route, escalated=stronger is not None and stronger != used)
        if stronger is not None and stronger != used:
            self._event("escalated_to_stronger_route", rung="stronger", route=stronger, errors=outcome.errors)
            asked = with_feedback(request, outcome)
            response, used, outcome = self._rung("stronger", stronger, asked, schema, defaults, request)
            if _passed(outcome, schema):
                return response, outcome
        self._event("output_invalid", rung="fail", route=used, errors=outcome.errors)
        fields = ", ".join(f"{e['field']} ({e['error']})" for e in outcome.errors[:5])
        with genai.ladder_rung("fail", route=used) as span:
            genai.judged(span, "failed", outcome.errors)
            raise OutputInvalidError(
                f"{self.step}: the model's output is still invalid after repair, feedback and escalation: {fields}",
                step=self.step,
                item=self.item,
            )

    def _rung(
        self,
        rung: Rung,
        route: str,
        asked: ModelRequest,
        schema: type[T] | None,
        defaults: Mapping[str, Any] | None,
        request: ModelRequest,
    ) -> tuple[ModelResponse, str, Outcome[T]]:
        """One rung that calls a model (`asked`) and judges its answer, in the rung's span."""
        with genai.ladder_rung(rung, route=route) as span:
            response, used = self._call(route, asked, rung=rung)
            outcome = self._judge(response, schema, defaults, used, request, rung)
            verdict = "repaired" if outcome.repaired else "valid" if _passed(outcome, schema) else "invalid"
            genai.judged(span, verdict, outcome.errors)
        return response, used, outcome

    def _judge(
        self,
        response: ModelResponse,
        schema: type[T] | None,
        defaults: Mapping[str, Any] | None,
        route: str,
        request: ModelRequest,
        rung: Rung,
    ) -> Outcome[T]:
        started = time.time_ns()
        outcome = check(response, schema, defaults=defaults)
        if schema is not None and not outcome.truncated and (outcome.repaired or outcome.errors):
            genai.repair_span(started, route=route, repaired=outcome.repaired)  # mechanical repair was tried
        if outcome.repaired:
            self._event("output_repaired", rung="repair", route=route)
        if not outcome.errors:
            return outcome
        self._event("output_validation_failed", rung=rung, route=route, errors=outcome.errors)
        count_failures(outcome, schema, model=response.model_id, route=route, prompt_version=request.prompt_version)
        return outcome

    # ------------------------------------------------------------------ one call

    def _call(
        self, route_name: str, request: ModelRequest, *, rung: str, tried: tuple[str, ...] = ()
    ) -> tuple[ModelResponse, str]:
        """One model call (or its reuse): every log line written meanwhile names its model, route and prompt
        version (`MODEL_LOG_KEYS`), which are removed after it."""
        route = self.services.routing[route_name]
        policy = self.policy()
        redactor = Redactor(policy.redact) if policy.redact else None
        sent = request
        if redactor is not None and policy.redact_before_model:
            sent = redacted_request(request, redactor)
        logger.append_keys(model=route.model_id, route=route_name, prompt_version=request.prompt_version)
        try:
            with redaction.bound(policy.redact):
                response, used = self._call_once(route_name, sent, rung=rung, tried=tried, redactor=redactor)
        finally:
            logger.remove_keys(list(MODEL_LOG_KEYS))
        if sent is not request:
            assert redactor is not None
            response = response.model_copy(update={"text": redactor.restore(response.text)})
        return response, used

    def _call_once(
        self, route_name: str, request: ModelRequest, *, rung: str, tried: tuple[str, ...], redactor: Redactor | None
    ) -> tuple[ModelResponse, str]:
        s, route = self.services, self.services.routing[route_name]
        seq, self._seq = self._seq, self._seq + 1
        charge_id = f"{self.job_attempt}/{self.step}/{'' if self.item is None else self.item}"
        charge_id += f"/{seq}" if seq else ""
        prompt_hash = request.prompt_hash()
        held = s.budgets.ledger_item(self.job.job_id, charge_id)
        if held is not None and held.prompt_hash != prompt_hash:  # another prompt under this number: its own charge
            charge_id += f"#{prompt_hash[:8]}"
            held = s.budgets.ledger_item(self.job.job_id, charge_id)
        if self.capturing:
            settled = held is not None and held.status == "settled"
            raise Captured(charge_id, route_name, request, settled=settled)
        if held is not None and held.status == "reserved" and held.lane == "batch":
            answered = self._batch_answered(route_name, request, charge_id, seq, prompt_hash, redactor)
            if answered is not None:
                return answered, route_name
            held = s.budgets.ledger_item(self.job.job_id, charge_id)  # released: reserved again, on demand
        if held is not None and held.status == "settled" and held.response is not None:
            self._event("model_call_reused", route=held.route or route_name, call=seq, charge=charge_id)
            usage = Usage(
                input_tokens=held.input_tokens,
                output_tokens=held.output_tokens,
                cache_read_tokens=held.cache_read_tokens or None,
                cache_write_tokens=held.cache_write_tokens or None,
            )
            model = held.model_id or route.model_id
            reused = ModelResponse(text=held.response, usage=usage, model_id=model, stop_reason=held.stop_reason or "")
            # (kept again: the delivery that made the call may have died before keeping it)
            self._keep(request, reused, redactor=redactor)
            return reused, held.route or route_name
        self._ensure_running()  # no call starts, nor is reserved, for a job that has left running
        admission, moved = s.breakers.admit(route.provider, route.model_id)
        self._breaker_event(moved, route_name)
        if admission == "open":
            reason = f"circuit open for {route.provider}:{route.model_id}"
            return self._fail_over(route_name, request, rung, tried, UpstreamUnavailableError(reason, step=self.step))
        tier = route.tier_for(self.job.sla_class)
        listed = price_of(route.model_id, price_table(s.settings.model_prices))
        price = listed.at_tier(tier)
        provenance = self.provenance or Provenance(code_version=s.settings.code_version)
        labels = CallLabels(
            self.step,
            self.item,
            route_name,
            route.provider,
            route.model_id,
            request.prompt_version,
            prompt_hash,
            code_version=provenance.code_version,
            workflow_version=provenance.workflow_version,
        )
        # The stable prefix marked for the provider's cache when the route, the model and its size allow it.
        request = caching.marked(request, route, price, s.adapter(route_name))
        if held is None or held.status != "reserved":
            size = CallSize(
                input_tokens=self._counted(route_name, request),
                max_output_tokens=request.max_tokens,
                price=price,
                cached_tokens=request.cache_prefix_tokens or 0,
            )
            try:
                self.job = s.budgets.with_limits(self.job, self.policy())
                granted = s.budgets.reserve(self.job, charge_id, size, self.policy(), labels)
            except BudgetExceededError as refused:
                self._refused(route_name, size.reservation(size.min_output_tokens).tokens, refused.message)
                raise
        else:  # a reservation left by a crashed delivery is taken over, with the output cap it held for
            granted = Reservation(
                tokens=held.reserved_tokens,
                cost_micro=held.reserved_cost_micro,
                output_tokens=held.reserved_output_tokens or request.max_tokens,
                capped_by=held.capped_by,
            )
        sent = request
        if granted.output_tokens < request.max_tokens:  # the whole cap no longer fits: what is left of it
            sent = request.model_copy(update={"max_tokens": granted.output_tokens})
            self._event(
                "output_capped_by_budget",
                route=route_name,
                max_tokens=request.max_tokens,
                capped_to=granted.output_tokens,
                by=granted.capped_by,
            )
        if tier != STANDARD_TIER:
            sent = sent.model_copy(update={"service_tier": tier})
        self._keep(request, sent_max_tokens=sent.max_tokens, redactor=redactor)
        self._admit(route_name, charge_id, granted.tokens)
        try:
            response = self._generate(route_name, sent, call_id=charge_id, rung=rung)
        except LonghaulError as error:
            s.budgets.release(self.job.job_id, charge_id)
            if isinstance(error, RateLimitedError) and route.limited:  # the provider's 429: lower the allowance
                self._throttled(route_name)
            if not error.retryable:  # a 4xx, a refusal: never an outage
                raise
            self._breaker_event(s.breakers.failed(route.provider, route.model_id), route_name)
            return self._fail_over(route_name, request, rung, tried, error)
        served = response.service_tier or tier  # the tier the provider says it served, else the one asked for
        used = response.usage
        cached = {"cache_read_tokens": used.cache_read_tokens or 0, "cache_write_tokens": used.cache_write_tokens or 0}
        cost = cost_micro(used.input_tokens, used.output_tokens, listed.at_tier(served), **cached)
        list_cost = list_cost_micro(used.input_tokens, used.output_tokens, listed, **cached)  # Standard, uncached
        response_hash = self._keep(request, response, redactor=redactor)
        s.budgets.settle(
            self.job.job_id,
            charge_id,
            input_tokens=used.input_tokens,
            output_tokens=used.output_tokens,
            cost_micro=cost,
            stop_reason=response.stop_reason,
            response=response.text,
            response_hash=response_hash,
            service_tier=served,
            list_cost_micro=list_cost,
            **cached,
        )
        if admission == "probe":
            self._breaker_event(s.breakers.succeeded(route.provider, route.model_id), route_name)
        self._recorded(
            _Call(seq, rung, route_name, request, prompt_hash, response, response_hash, cost, provenance),
            service_tier=served,
        )
        if sent is not request and response.stop_reason in TRUNCATED:
            self._cut_off(route_name, request, granted)
        return response, route_name

    def _recorded(self, made: _Call, *, lane: Lane = DEFAULT_LANE, service_tier: str | None = None) -> None:
        """A settled call kept in `calls` and as a `model_called` event (a batch's record names its lane, an on-demand
        call its service tier), and its tokens and dollars in the metrics (by workflow, tenant and lane)."""
        route, used = self.services.routing[made.route_name], made.response.usage
        cached = {"cache_read_tokens": used.cache_read_tokens or 0, "cache_write_tokens": used.cache_write_tokens or 0}
        call = {
            "call": made.seq,
            "rung": made.rung,
            "route": made.route_name,
            "provider": route.provider,
            "model_id": made.response.model_id,
            "prompt_version": made.request.prompt_version,
            "prompt_hash": made.prompt_hash,
            "response_hash": made.response_hash,
            "input_tokens": used.input_tokens,
            "output_tokens": used.output_tokens,
            **{name: count for name, count in cached.items() if count},
            "cost_usd": usd(made.cost),
            **({"service_tier": service_tier} if lane == DEFAULT_LANE else {}),
            "stop_reason": made.response.stop_reason,
            "code_version": made.provenance.code_version,
            "workflow_version": made.provenance.workflow_version,
            **({} if lane == DEFAULT_LANE else {"lane": lane}),
        }
        self.calls.append(call)
        self._event("model_called", **call)
        tokens = used.input_tokens + used.output_tokens + sum(cached.values())
        emit(MODEL_TOKENS_METRIC, tokens, workflow=self.job.workflow)
        emit(MODEL_TOKENS_METRIC, tokens, tenant=self.job.tenant_id)
        emit(MODEL_COST_METRIC, made.cost / 1_000_000, MetricUnit.NoUnit, workflow=self.job.workflow)
        emit(MODEL_COST_METRIC, made.cost / 1_000_000, MetricUnit.NoUnit, tenant=self.job.tenant_id)
        caching.emit_lane_metrics(lane, used, made.cost)

    def _admit(self, route_name: str, charge_id: str, tokens: int) -> None:
        """Count the call against its route's shared limits (if it has any), waiting for room (bounded); when none
        came, the reservation is released and the step fails `rate-limited` (its Task retries it with backoff)."""
        route = self.services.routing[route_name]
        if not route.limited:
            return
        limits = RouteLimits(route.requests_per_minute, route.tokens_per_minute)
        try:
            admitted = self.services.route_limits.acquire(route_name, limits, tokens)
        except RateLimitedError as error:
            self.services.budgets.release(self.job.job_id, charge_id)
            emit(ROUTE_LIMITED_METRIC, route=route_name)
            self._event("route_rate_limited", route=route_name, message=error.message)
            error.step, error.item = self.step, self.item
            raise
        if admitted.waited_seconds > 0:
            emit(ROUTE_WAIT_METRIC, admitted.waited_seconds, MetricUnit.Seconds, route=route_name)

    def _throttled(self, route_name: str) -> None:
        lowered = self.services.route_limits.throttled(route_name)
        if lowered is not None:
            logger.warning("route allowance lowered after a 429", extra={"route": route_name, "share": lowered.share})

    def _batch_answered(
        self,
        route_name: str,
        request: ModelRequest,
        charge_id: str,
        seq: int,
        prompt_hash: str,
        redactor: Redactor | None,
    ) -> ModelResponse | None:
        """The batch's answer to this call, settled at the batch price (the reservation its submission made); None
        when the batch did not answer it (or answered another prompt): its reservation is released and the call is
        made on demand."""
        s, route = self.services, self.services.routing[route_name]
        answer = None
        if seq == 0 and self.item is not None:
            answer = batch.batch_answer(s, self.job.job_id, self.step, self.job_attempt, self.item)
        if answer is None or not answer.ok or answer.prompt_hash != prompt_hash:
            s.budgets.release(self.job.job_id, charge_id)
            return None
        response = ModelResponse(
            text=answer.text,
            usage=answer.usage,
            model_id=answer.model_id or route.model_id,
            stop_reason=answer.stop_reason,
        )
        listed = price_of(route.model_id, price_table(s.settings.model_prices))
        cost = cost_micro(response.usage.input_tokens, response.usage.output_tokens, listed.in_lane("batch"))
        self._keep(request, redactor=redactor)
        response_hash = self._keep(request, response, redactor=redactor)
        s.budgets.settle(
            self.job.job_id,
            charge_id,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            cost_micro=cost,
            stop_reason=response.stop_reason,
            response=response.text,
            response_hash=response_hash,
            list_cost_micro=list_cost_micro(response.usage.input_tokens, response.usage.output_tokens, listed),
        )
        provenance = self.provenance or Provenance(code_version=s.settings.code_version)
        self._recorded(
            _Call(seq, "validate", route_name, request, prompt_hash, response, response_hash, cost, provenance),
            lane="batch",
        )
        return response

    def _counted(self, route_name: str, request: ModelRequest) -> int:
        """The prompt's tokens as the route's adapter counts them, else every byte (and the schema's) as a token."""
        adapter = self.services.adapter(route_name)
        counted = adapter.count_tokens(request) if isinstance(adapter, TokenCounter) else None
        if counted is None:
            return worst_case_input_tokens(request.system, request.prompt, schema=request.response_schema)
        return counted

    def _cut_off(self, route_name: str, request: ModelRequest, granted: Reservation) -> None:
        """An answer cut off at an output cap the budget lowered: the budget, not the model, ends the step."""
        scope: Scope = granted.capped_by or "job"
        self.services.budgets.exhaust(self.job.job_id, scope)
        message = (
            f"{self.step}: the answer was cut off at the {granted.output_tokens} output tokens left of "
            f"{whose(scope)} (the call asks for up to {request.max_tokens})"
        )
        self._refused(route_name, granted.tokens, message)
        raise BudgetExceededError(message, step=self.step, item=self.item)

    def _refused(self, route_name: str, needed_tokens: int, message: str) -> None:
        self._event("budget_exceeded", route=route_name, needed_tokens=needed_tokens, message=message)
        emit("BudgetExceeded", workflow=self.job.workflow, step=self.step)
        if "daily allowance" in message:  # the tenant's day, not the job's budget
            emit(ALLOWANCE_REACHED_METRIC)
            emit(ALLOWANCE_REACHED_METRIC, tenant=self.job.tenant_id)

    def _fail_over(
        self, route_name: str, request: ModelRequest, rung: str, tried: tuple[str, ...], error: LonghaulError
    ) -> tuple[ModelResponse, str]:
        fallback = self.services.routing[route_name].fallback
        if fallback is None or fallback in tried or fallback == route_name:
            error.step, error.item = self.step, self.item
            raise error
        self._event("model_failover", route=route_name, to_route=fallback, reason=error.message[:300])
        emit("ModelFailovers", route=route_name)
        return self._call(fallback, request, rung=rung, tried=(*tried, route_name))

    def _generate(self, route_name: str, request: ModelRequest, *, call_id: str, rung: str) -> ModelResponse:
        """The adapter's answer, with the local runtime's model-output faults applied, in the call's span
        (`genai.model_call`: its usage is the response's, which the ledger settles)."""
        injector = faults.active()
        route = self.services.routing[route_name]
        with genai.model_call(
            provider=route.provider,
            model=route.model_id,
            route=route_name,
            prompt_version=request.prompt_version,
            max_tokens=request.max_tokens,
            attempt=self.attempt,
            call_id=call_id,
            rung=rung,
            system=request.system,
            prompt=request.prompt,
        ) as span:
            if injector.take(self.step, self.item, (faults.REFUSAL,), job_id=self.job.job_id):
                raise PolicyRefusalError(f"injected refusal of {self.step}", step=self.step, item=self.item)
            if injector.take(self.step, self.item, (faults.UNAVAILABLE,), job_id=self.job.job_id):
                message = f"{route.provider} {route.model_id}: injected outage at {self.step}"
                raise UpstreamUnavailableError(message, step=self.step, item=self.item)
            adapter = self.services.adapter(route_name)
            if isinstance(adapter, StreamingGateway):
                response = self._stream(adapter, request)
            else:
                response = adapter.generate(request)
            kind = injector.take(self.step, self.item, faults.OUTPUT_KINDS, job_id=self.job.job_id)
            if kind:
                response = faults.corrupt(response, kind, request.max_tokens)
            span.answered(
                model=response.model_id,
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
                finish_reason=response.stop_reason,
                text=response.text,
                cache_read_tokens=response.usage.cache_read_tokens,
                cache_write_tokens=response.usage.cache_write_tokens,
            )
        return response

    def _stream(self, adapter: StreamingGateway, request: ModelRequest) -> ModelResponse:
        """The call streamed: its text, coalesced, into the job's stream records as it is written (a view for
        people watching; the answer returned is the whole response, which the ladder judges as before)."""
        job_id = self.job.job_id
        coalescer = Coalescer(
            lambda record: self.services.streams.append(job_id, _scrubbed(record)),
            step=self.step,
            item=self.item,
            call_id=f"call_{uuid.uuid4().hex[:16]}",
            on_error=lambda error: logger.warning("a stream record was not written", extra={"error": str(error)}),
        )
        response = adapter.stream(request, coalescer.feed)
        coalescer.finish(response.usage.output_tokens)
        return response

    # ------------------------------------------------------------------ bookkeeping

    def _keep(
        self,
        request: ModelRequest,
        response: ModelResponse | None = None,
        *,
        sent_max_tokens: int | None = None,
        redactor: Redactor | None = None,
    ) -> str:
        """Keep the exact request (or, with `response`, the raw response) in the job's artifacts under its hash;
        returns that hash. Content-addressed: writing one again changes nothing. A request sent with its output cap
        lowered by the budget (`sent_max_tokens`) is kept under the hash of the call as the step asked it (the
        ledger's), with the cap it was sent with. With `redactor` (the tenant's policy `redact`), the kept copy's
        text has placeholders for the personal data (its hash is still the call's)."""
        artifacts, job_id = self.services.artifacts, self.job.job_id
        keep = redactor.redact if redactor is not None else _same
        kinds = sorted(redactor.kinds) if redactor is not None else None
        if response is None:
            prompt_hash = request.prompt_hash()
            sent = KeptPrompt(
                prompt_hash=prompt_hash,
                prompt_version=request.prompt_version,
                task=request.task,
                system=keep(request.system),
                prompt=keep(request.prompt),
                response_schema=request.response_schema,
                max_tokens=sent_max_tokens or request.max_tokens,
                instructions=keep(request.instructions) if request.instructions else request.instructions,
                redacted=kinds,
                redacted_before_model=self.policy().redact_before_model if kinds else None,
            )
            artifacts.put_json(prompt_key(job_id, prompt_hash), sent)
            return prompt_hash
        response_hash = response.text_hash()
        raw = KeptResponse(
            response_hash=response_hash,
            prompt_hash=request.prompt_hash(),
            text=keep(response.text),
            model_id=response.model_id,
            stop_reason=response.stop_reason,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            cache_read_tokens=response.usage.cache_read_tokens,
            cache_write_tokens=response.usage.cache_write_tokens,
            redacted=kinds,
        )
        artifacts.put_json(response_key(job_id, response_hash), raw)
        return response_hash

    def _ensure_running(self) -> None:
        """`CancelledError` when the job is no longer running (failed, cancelled, expired meanwhile: another item's
        failure path, a cancellation, the sweep): the step stops before its call. The reservation checks it again,
        atomically, so a job that leaves `running` between this read and the call's reservation is refused there."""
        current = self.services.jobs.get_job(self.job.job_id)
        if current is None or current.status not in LIVE:
            status = current.status.value if current else "gone"
            raise CancelledError(
                f"job {self.job.job_id} is {status}: no model call is made", step=self.step, item=self.item
            )

    def policy(self) -> TenantPolicy:
        if self._policy is None:
            self._policy = self.services.budgets.policy(self.job.tenant_id)
        return self._policy

    def _breaker_event(self, moved: Transition | None, route: str) -> None:
        if moved is None:
            return
        detail = {
            "provider": moved.provider,
            "model_id": moved.model_id,
            "from": moved.before,
            "failures": moved.failures,
        }
        self._event(BREAKER_EVENTS[moved.after], route=route, **detail)
        emit("BreakerTransitions", provider=moved.provider, state=moved.after)

    def _event(self, kind: str, **detail: Any) -> None:
        self.services.jobs.append_event(self.job.job_id, kind, step=self.step, item=self.item, detail=detail)


def redacted_request(request: ModelRequest, redactor: Redactor) -> ModelRequest:
    """The request with its personal data replaced by `redactor`'s placeholders: what the model is sent under
    `redact_before_model` (its `context` too, which the offline model answers from, so the local model sees what a
    provider would). The stable prefix's length follows the redaction of the prompt's stable part."""
    stable, rest = request.stable_prefix()
    stable, rest = redactor.redact(stable), redactor.redact(rest)
    update: dict[str, Any] = {
        "system": redactor.redact(request.system),
        "prompt": stable + rest,
        "context": redactor.redact_value(request.context),
    }
    if request.instructions:
        update["instructions"] = redactor.redact(request.instructions)
    if request.stable_prompt_chars is not None:
        update["stable_prompt_chars"] = len(stable)
    return request.model_copy(update=update)


def _scrubbed(record: NewRecord) -> NewRecord:
    """A stream record with the personal data the tenant's policy redacts replaced (each record on its own: a value
    split between two records is not recognized in either)."""
    if not record.text or not redaction.active():
        return record
    return record.model_copy(update={"text": redaction.scrub(record.text)})


def _same(text: str) -> str:
    return text


def _passed(outcome: Outcome[Any], schema: type[BaseModel] | None) -> bool:
    """The answer is taken: valid for its schema, or free text that was not cut off."""
    return outcome.ok or (schema is None and not outcome.errors)
