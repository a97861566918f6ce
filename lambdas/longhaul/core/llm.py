"""The model port: one request/response shape for every model provider."""

import hashlib
import json
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import Field

from longhaul.core.model import Model

# What introduces a job's instructions (an update's) at the end of a prompt.
INSTRUCTIONS_HEADING = "Instructions from the requester (they apply to this answer):"
# How long a provider keeps a cached prompt prefix after its last use: Bedrock's default cache TTL (5 minutes).
CACHE_TTL_SECONDS = 300
# What a request asks for, named by the step's domain (e.g. "extract_evidence", "extract_invoice").
Task = str


class Usage(Model):
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    # Prompt caching, when the provider reports it (tokens read from / written to its cache); None: not reported.
    cache_read_tokens: int | None = Field(default=None, ge=0)
    cache_write_tokens: int | None = Field(default=None, ge=0)


class ModelRequest(Model):
    """A rendered prompt plus the structured inputs it was rendered from.

    Remote models only see `system` and `prompt`; the offline model reads `context`.
    """

    task: Task
    prompt_version: str = Field(
        default="1", description="Version of the prompt template: recorded with every call, keys recorded fixtures."
    )
    system: str
    prompt: str
    context: dict[str, Any]
    max_tokens: int = Field(default=2048, gt=0)
    response_schema: dict[str, Any] | None = Field(
        default=None, description="JSON schema of the answer: providers with structured output enforce it."
    )
    offline: str | None = Field(
        default=None,
        description="`module:function` answering this task deterministically from `context`, for the offline "
        "model: a workflow brings the stand-in of its own tasks.",
    )
    instructions: str | None = Field(
        default=None, description="The job's instructions (an update's), already added to `prompt` by `instructed`."
    )
    service_tier: str | None = Field(
        default=None,
        description="The Bedrock service tier the call is sent at (`priority`, `flex`; None: Standard), chosen by the "
        "gateway from the route and the job's SLA class. Not part of `sent()`: the same prompt at another tier is the "
        "same call (its ledger entry and kept prompt).",
    )
    stable_prompt_chars: int | None = Field(
        default=None,
        ge=0,
        description="How many leading characters of `prompt` are the same in the step's other calls (instructions, "
        "shared passages): with `system` and the schema, the prefix a provider may cache. Set by the prompt builder "
        "of a step that calls the model many times with it; None: nothing is worth caching (a call made once).",
    )
    cache_prefix_tokens: int | None = Field(
        default=None,
        ge=0,
        description="The stable prefix's tokens when the gateway marked it for the provider's cache (a Converse "
        "`cachePoint`); None: not marked. Not part of what the call is (`sent`, `prompt_hash`).",
    )

    def stable_prefix(self) -> tuple[str, str]:
        """(the stable part of `prompt`, the rest): the stable part is what the step's other calls start with."""
        cut = min(self.stable_prompt_chars or 0, len(self.prompt))
        return self.prompt[:cut], self.prompt[cut:]

    def sent(self) -> dict[str, Any]:
        """What the model is sent: system, prompt, schema, limit (and the task naming them; and the job's
        instructions, which the prompt carries, when it has some)."""
        sent = {
            "task": self.task,
            "system": self.system,
            "prompt": self.prompt,
            "schema": self.response_schema,
            "max_tokens": self.max_tokens,
        }
        return sent | ({"instructions": self.instructions} if self.instructions else {})

    def instructed(self, instructions: str | None) -> "ModelRequest":
        """This request with the job's instructions (itself without any, or with these): at the end of its prompt,
        or, when its builder declared a stable part, at the end of that part (the same in every call of the step,
        they belong to the prefix a provider caches)."""
        if not instructions or self.instructions == instructions:
            return self
        if self.stable_prompt_chars is not None:
            stable, rest = self.stable_prefix()
            added = f"{INSTRUCTIONS_HEADING}\n{instructions}\n\n"
            if stable and not stable.endswith("\n\n"):
                added = "\n\n" + added
            prompt = f"{stable}{added}{rest}"
            update = {"prompt": prompt, "instructions": instructions, "stable_prompt_chars": len(stable) + len(added)}
            return self.model_copy(update=update)
        prompt = f"{self.prompt}\n\n{INSTRUCTIONS_HEADING}\n{instructions}"
        return self.model_copy(update={"prompt": prompt, "instructions": instructions})

    def prompt_hash(self) -> str:
        """The hash of what the model is sent: equal hashes, equal calls."""
        return hashlib.sha256(json.dumps(self.sent(), sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# Stop reasons that mean the output was cut off at the token limit (Bedrock, OpenAI-compatible, normalised).
TRUNCATED = frozenset({"max_tokens", "length"})


class ModelResponse(Model):
    text: str
    usage: Usage
    model_id: str
    stop_reason: str
    # The service tier the provider says it served the call at (Bedrock's `serviceTier`); None: not reported.
    service_tier: str | None = None

    def text_hash(self) -> str:
        """The hash of the raw text the model answered (what the kept response is stored under)."""
        return hashlib.sha256(self.text.encode()).hexdigest()


class ModelGateway(Protocol):
    model_id: str

    def generate(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class TokenCounter(Protocol):
    """An adapter that counts a request's input tokens as its provider will bill them (never fewer): the gateway
    reserves a call's prompt at this count. Without a count (an adapter without a counter, or None) every prompt byte
    is reserved as a token."""

    def count_tokens(self, request: ModelRequest) -> int | None: ...


# Called with each piece of a streamed answer's text, as the provider sends it.
TextSink = Callable[[str], None]


@runtime_checkable
class StreamingGateway(Protocol):
    """An adapter that streams: `stream` calls `on_text` with each piece of the answer as it is written and returns
    the same response `generate` would (the whole text, its usage and stop reason): a delta is never a result."""

    model_id: str

    def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse: ...
