"""The model port: one request/response shape for every model provider."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

# What a request asks for, named by the step's domain (e.g. "extract_evidence", "extract_invoice").
Task = str


class Usage(BaseModel):
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)


class ModelRequest(BaseModel):
    """A rendered prompt plus the structured inputs it was rendered from.

    Remote models only see `system` and `prompt`; the offline model reads `context`.
    """

    task: Task
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


class ModelResponse(BaseModel):
    text: str
    usage: Usage
    model_id: str
    stop_reason: str


class ModelGateway(Protocol):
    model_id: str

    def generate(self, request: ModelRequest) -> ModelResponse: ...
