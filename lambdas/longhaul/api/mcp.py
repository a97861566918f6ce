"""The MCP server's tools and resources over the API's use cases (`handlers/api_mcp.py` serves them over MCP).

A tool per deployed workflow (its name the workflow's, its input schema the workflow's job request without
`workflow`), the tools that follow a job (`get_job`, `wait_job`, `get_result`, `list_jobs`, `cancel_job`) and, for a
reviewer key and only for it, the review tools (`list_reviews`, `get_review`, `decide_review`). Each call runs the
same use case as its `/v1` route, for the same principal: a workflow tool submits through `JobService.submit` (the
admission path of `POST /v1/jobs`, idempotency included), another tenant's job or review is not found, and a refused
call answers the route's problem (its status, detail and `errors`) as a tool error the model can read.

A job's status is also given as the MCP task status it maps to (`task_state`): what a client that knows MCP's tasks
expects, `input_required` naming what is awaited (a review, a resume, a signal). Results are resources:
`longhaul://jobs/{job_id}/result`, its JSON and its Markdown rendering.

Nothing here knows the MCP SDK: answers are plain `ToolAnswer` records the handler turns into MCP results.
"""

import functools
import json
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longhaul.api.jobs import JobService
from longhaul.api.reviews import ReviewService
from longhaul.core import limits
from longhaul.core.auth import Principal
from longhaul.core.contracts import IDEMPOTENCY_KEY_PATTERN, TERMINAL_STATUSES, JobStatus, JobView
from longhaul.core.model import Model
from longhaul.core.problems import ApiProblem, InvalidRequest, NotFound
from longhaul.services import Services
from longhaul.storage.listing import BadCursor, JobFilter
from longhaul.workflows import JOB_REQUEST, REGISTRY, REQUEST_MODELS, DecisionBody, decision_request, result_models

RESULT_URI = "longhaul://jobs/{job_id}/result"
_RESULT_URI = re.compile(r"^longhaul://jobs/(?P<job_id>[^/]+)/result$")
MARKDOWN = "text/markdown"
#: The longest `wait_job` (and a workflow tool's own wait): inside API Gateway's 29 s integration timeout.
MAX_WAIT_SECONDS = 20.0
POLL_SECONDS = 0.2
FOLLOW_TOOLS = ("get_job", "wait_job", "get_result", "list_jobs", "cancel_job")
REVIEW_TOOLS = ("list_reviews", "get_review", "decide_review")
TaskState = Literal["working", "input_required", "completed", "failed", "cancelled"]


class ToolSpec(NamedTuple):
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool


class ToolAnswer(NamedTuple):
    """A tool's answer: its structured content, its text, and the resources it links to (result URIs)."""

    structured: dict[str, Any]
    text: str
    links: tuple[str, ...] = ()
    is_error: bool = False


class ResultContents(NamedTuple):
    uri: str
    json_text: str
    markdown: str | None


# ---------------------------------------------------------------------- the tools' arguments


class _Args(Model):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class JobArgs(_Args):
    job_id: str = Field(min_length=1, max_length=200, description="The job's id (`job_…`).")


class WaitArgs(JobArgs):
    seconds: float = Field(
        default=10, ge=0, le=MAX_WAIT_SECONDS, description="Wait at most this long for the job to finish or to stop."
    )


class ListJobsArgs(_Args):
    status: JobStatus | None = Field(default=None, description="Only jobs in this status.")
    workflow: str | None = Field(default=None, description="Only jobs of this workflow.")
    limit: int = Field(default=20, ge=1, le=limits.MAX_PAGE_SIZE)
    cursor: str | None = Field(default=None, description="`next_cursor` of the previous page.")


class ListReviewsArgs(_Args):
    status: Literal["pending", "decided", "expired"] = "pending"
    limit: int = Field(default=20, ge=1, le=limits.MAX_PAGE_SIZE)
    cursor: str | None = None


class ReviewArgs(_Args):
    review_id: str = Field(min_length=1, max_length=200, description="The review's id (`rev_…`).")


def _decide_schema() -> dict[str, Any]:
    schema = DecisionBody.model_json_schema()
    schema.setdefault("properties", {})
    schema["properties"] = {
        "review_id": ReviewArgs.model_json_schema()["properties"]["review_id"],
        **schema["properties"],
    }
    schema["required"] = ["review_id", *schema.get("required", [])]
    return schema


_FOLLOW: dict[str, tuple[str, str, type[_Args], bool]] = {
    "get_job": (
        "Get a job",
        "A job's status, progress, review and what it waits on (as `GET /v1/jobs/{id}`), "
        "with `task_state`: its MCP task status.",
        JobArgs,
        True,
    ),
    "wait_job": (
        "Wait for a job",
        f"Wait up to `seconds` (at most {MAX_WAIT_SECONDS:g}) for the job to finish or "
        "to need input (a review, a resume, a signal); answers as `get_job`, and the result once completed.",
        WaitArgs,
        True,
    ),
    "get_result": (
        "Get a job's result",
        "The completed job's result (as `GET /v1/jobs/{id}/result`) and a link to its resource (JSON and Markdown).",
        JobArgs,
        True,
    ),
    "list_jobs": ("List jobs", "Your jobs, newest first, paged.", ListJobsArgs, True),
    "cancel_job": ("Cancel a job", "Stop the job; its completed steps are kept.", JobArgs, False),
    "list_reviews": ("List reviews", "Your tenant's reviews in a status (pending by default).", ListReviewsArgs, True),
    "get_review": ("Get a review", "The draft to review, its evidence and why review was required.", ReviewArgs, True),
}


@functools.cache
def _workflow_schema(workflow: str) -> dict[str, Any]:
    """The workflow's job request as the tool's arguments: without `workflow` (the tool's name says it), with an
    optional `idempotency_key` (the `Idempotency-Key` of `POST /v1/jobs`) and `wait_seconds`."""
    request = next(model for model in REQUEST_MODELS if _literal(model) == workflow)
    schema = request.model_json_schema()
    properties = {k: v for k, v in schema.get("properties", {}).items() if k != "workflow"}
    properties["idempotency_key"] = {
        "type": "string",
        "pattern": IDEMPOTENCY_KEY_PATTERN,
        "description": "The same key with the same arguments answers the same job (24 h); with other arguments "
        "the call is refused.",
    }
    properties["wait_seconds"] = {
        "type": "number",
        "minimum": 0,
        "maximum": MAX_WAIT_SECONDS,
        "description": "Wait this long for the job to finish before answering its id (default: the deployment's "
        "`LONGHAUL_MCP_WAIT_SECONDS`); 0 answers the job id at once.",
    }
    schema["properties"] = properties
    schema["required"] = [name for name in schema.get("required", []) if name != "workflow"]
    schema["type"] = "object"
    schema.pop("title", None)
    return schema


def _literal(model: type[BaseModel]) -> str:
    annotation = model.model_fields["workflow"].annotation
    return str(getattr(annotation, "__args__", ("",))[0])


def tool_specs(principal: Principal, workflows: Iterable[str]) -> list[ToolSpec]:
    """The tools this key sees: a reviewer's are the review tools only; another key's, a tool per deployed workflow
    and the tools that follow a job."""
    return list(_tool_specs(principal.role == "reviewer", tuple(sorted(workflows))))


@functools.cache
def _tool_specs(reviewer: bool, workflows: tuple[str, ...]) -> tuple[ToolSpec, ...]:
    if reviewer:
        names: Iterable[str] = REVIEW_TOOLS
        specs = []
    else:
        names = FOLLOW_TOOLS
        specs = [
            ToolSpec(
                name,
                name.replace("-", " ").capitalize(),
                f"Start a `{name}` job: {REGISTRY[name].description} Answers the result if the job finishes within "
                "`wait_seconds`, else its id and status: follow it with `wait_job` or `get_job`.",
                _workflow_schema(name),
                False,
            )
            for name in workflows
            if name in REGISTRY
        ]
    for name in names:
        if name == "decide_review":
            specs.append(
                ToolSpec(
                    name,
                    "Decide a review",
                    "Approve, reject or edit the review's draft (as `POST "
                    "/v1/reviews/{id}/decision`); the job resumes.",
                    _decide_schema(),
                    False,
                )
            )
            continue
        title, description, args, read_only = _FOLLOW[name]
        schema = args.model_json_schema()
        schema.pop("title", None)
        specs.append(ToolSpec(name, title, description, schema, read_only))
    return tuple(specs)


# ---------------------------------------------------------------------- job status → task status


def task_state(view: JobView) -> tuple[TaskState, str | None]:
    """The MCP task status of a job (2025-11-25: working, input_required, completed, failed, cancelled) and, for
    `input_required`, what is awaited: a review decision, a resume, or a signal."""
    status = view.status
    if status == JobStatus.COMPLETED:
        return "completed", None
    if status in (JobStatus.FAILED, JobStatus.EXPIRED):
        return "failed", None
    if status == JobStatus.CANCELLED:
        return "cancelled", None
    if status == JobStatus.WAITING_FOR_REVIEW:
        review = view.review
        return "input_required", f"review {review.review_id} by {review.assignee_group}" if review else "a review"
    if status == JobStatus.PAUSED:
        return "input_required", "a resume (POST /v1/jobs/{job_id}/resume)".replace("{job_id}", view.job_id)
    if view.waiting is not None and view.waiting.reason == "signal":
        return "input_required", f"a signal: {view.waiting.detail}" if view.waiting.detail else "a signal"
    return "working", None


def _stopped(view: JobView) -> bool:
    return view.status in TERMINAL_STATUSES or task_state(view)[0] == "input_required"


# ---------------------------------------------------------------------- the calls


class McpTools:
    """The tools' calls for one principal; `sleep` and `clock` are injected so a wait can be tested."""

    def __init__(
        self,
        services: Services,
        principal: Principal,
        base_url: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.services = services
        self.principal = principal
        self.base_url = base_url
        self.jobs = JobService(services)
        self.sleep = sleep
        self.clock = clock

    def tools(self) -> list[ToolSpec]:
        return tool_specs(self.principal, self.services.settings.workflows)

    def _visible(self, name: str) -> bool:
        """Whether this key sees the tool (as `tools` lists them, without building their schemas)."""
        if self.principal.role == "reviewer":
            return name in REVIEW_TOOLS
        return name in FOLLOW_TOOLS or (name in REGISTRY and name in self.services.settings.workflows)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        """The tool's answer; a refusal (the route's problem) is an error answer naming it."""
        try:
            return self._call(name, arguments)
        except ValidationError as error:
            details = [{"loc": _location(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()]
            return _problem(InvalidRequest("see `errors` for what is not allowed", errors=details))
        except ApiProblem as problem:
            return _problem(problem)

    def _call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        if not self._visible(name):
            raise NotFound(f"no tool {name!r} for this key")
        if name in REGISTRY:
            return self._start(name, arguments)
        if name == "get_job":
            return self._follow(self.jobs.view(self.principal, JobArgs.model_validate(arguments).job_id))
        if name == "wait_job":
            args = WaitArgs.model_validate(arguments)
            return self._follow(self._wait(args.job_id, args.seconds))
        if name == "get_result":
            return self._result(JobArgs.model_validate(arguments).job_id)
        if name == "list_jobs":
            return self._list(ListJobsArgs.model_validate(arguments))
        if name == "cancel_job":
            outcome = self.jobs.cancel(self.principal, JobArgs.model_validate(arguments).job_id)
            return _answer(outcome.model_dump(mode="json"))
        reviews = ReviewService(self.services)
        if name == "list_reviews":
            listing = ListReviewsArgs.model_validate(arguments)
            return _answer(
                reviews.list(self.principal, listing.status, listing.limit, listing.cursor).model_dump(mode="json")
            )
        if name == "get_review":
            detail = reviews.detail(self.principal, ReviewArgs.model_validate(arguments).review_id)
            return _answer(detail.model_dump(mode="json"))
        review_id = ReviewArgs.model_validate({"review_id": arguments.get("review_id")}).review_id
        body = DecisionBody.model_validate({k: v for k, v in arguments.items() if k != "review_id"})
        return _answer(reviews.decide(self.principal, review_id, decision_request(body)).model_dump(mode="json"))

    def _start(self, workflow: str, arguments: dict[str, Any]) -> ToolAnswer:
        fields = dict(arguments)
        key = fields.pop("idempotency_key", None)
        wait = fields.pop("wait_seconds", None)
        if key is not None and not isinstance(key, str):
            raise InvalidRequest(
                "idempotency_key must be a string",
                errors=[{"loc": ["idempotency_key"], "msg": "Input should be a valid string", "type": "string_type"}],
            )
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int | float)):
            raise InvalidRequest(
                "wait_seconds must be a number",
                errors=[{"loc": ["wait_seconds"], "msg": "Input should be a valid number", "type": "float_type"}],
            )
        wait_seconds = self.services.settings.mcp_wait_seconds if wait is None else float(wait)
        if not 0 <= wait_seconds <= MAX_WAIT_SECONDS:
            raise InvalidRequest(
                f"wait_seconds must be 0-{MAX_WAIT_SECONDS:g}",
                errors=[{"loc": ["wait_seconds"], "msg": "out of range", "type": "less_than_equal"}],
            )
        request = JOB_REQUEST.validate_python({**fields, "workflow": workflow})
        accepted, _ = self.jobs.submit(self.principal, request, key, self.base_url)
        if wait_seconds == 0:  # the job id at once, as the 202 of `POST /v1/jobs` says it
            return _answer(
                {
                    "job_id": accepted.job_id,
                    "workflow": workflow,
                    "status": accepted.status.value,
                    "task_state": "working",
                    "awaiting": None,
                    "status_url": accepted.status_url,
                    "follow": _follow_hint(accepted.job_id),
                }
            )
        return self._follow(self._wait(accepted.job_id, wait_seconds))

    def _wait(self, job_id: str, seconds: float) -> JobView:
        deadline = self.clock() + seconds
        view = self.jobs.view(self.principal, job_id)
        while not _stopped(view) and self.clock() < deadline:
            self.sleep(min(POLL_SECONDS, max(0.0, deadline - self.clock())))
            view = self.jobs.view(self.principal, job_id)
        return view

    def _follow(self, view: JobView) -> ToolAnswer:
        """A job as `get_job` answers it; completed, with its result and its resource's link."""
        state, awaiting = task_state(view)
        answer: dict[str, Any] = {
            "job_id": view.job_id,
            "workflow": view.workflow,
            "status": view.status.value,
            "task_state": state,
            "awaiting": awaiting,
            "progress": view.progress.model_dump(mode="json", include={"completed", "total", "unit", "message"}),
            "status_url": f"{self.base_url}/v1/jobs/{view.job_id}",
        }
        if view.review is not None:
            answer["review"] = view.review.model_dump(mode="json")
        if view.error is not None:
            answer["error"] = view.error.model_dump(mode="json")
        if state == "completed":
            answer["result"] = self._result_body(view)
            answer["resource"] = RESULT_URI.format(job_id=view.job_id)
            return _answer(answer, links=(answer["resource"],))
        if state == "working":
            answer["follow"] = _follow_hint(view.job_id)
        return _answer(answer)

    def _result_body(self, view: JobView) -> dict[str, Any]:
        job = self.jobs.job(self.principal, view.job_id)
        result, as_of = self.jobs.result_of(job)
        marks = {"provisional": as_of is not None, "as_of_step": as_of, "superseded_by": view.superseded_by}
        body = result_models()[view.workflow].model_validate({**result.model_dump(), "budget": view.budget, **marks})
        dumped: dict[str, Any] = body.model_dump(mode="json")
        return dumped

    def _result(self, job_id: str) -> ToolAnswer:
        view = self.jobs.view(self.principal, job_id)
        body = self._result_body(view)  # a job without its result: the route's 409 problem
        uri = RESULT_URI.format(job_id=job_id)
        return _answer({"job_id": job_id, "result": body, "resource": uri}, links=(uri,))

    def _list(self, args: ListJobsArgs) -> ToolAnswer:
        narrow = JobFilter(workflow=args.workflow) if args.workflow else None
        try:
            page = self.jobs.list(self.principal, args.status, args.limit, args.cursor, narrow)
        except BadCursor as error:
            raise InvalidRequest(str(error)) from None
        return _answer(page.model_dump(mode="json"))

    # ------------------------------------------------------------------ resources

    def read_result(self, uri: str) -> ResultContents:
        """The resource `longhaul://jobs/{job_id}/result`: the result's JSON and its Markdown rendering (another
        tenant's job, or one without a result, is not found)."""
        match = _RESULT_URI.match(uri)
        if match is None:
            raise NotFound(f"no resource {uri}")
        job_id = match["job_id"]
        view = self.jobs.view(self.principal, job_id)
        if view.status != JobStatus.COMPLETED:
            raise NotFound(f"job {job_id} has no result: it is {view.status.value}")
        body = self._result_body(view)
        job = self.jobs.job(self.principal, job_id)
        result, _ = self.jobs.result_of(job)
        key = getattr(result, "markdown_key", None)
        markdown = self.services.artifacts.get_bytes(key).decode() if isinstance(key, str) else None
        return ResultContents(uri, json.dumps(body), markdown)

    def recent_results(self, limit: int = 20) -> list[tuple[str, str]]:
        """The tenant's latest completed jobs' result resources: (uri, name)."""
        page = self.jobs.list(self.principal, JobStatus.COMPLETED, limit)
        return [(RESULT_URI.format(job_id=job.job_id), f"{job.workflow} {job.job_id}") for job in page.jobs]


def _location(loc: tuple[int | str, ...]) -> list[int | str]:
    """A field's location as the caller wrote its arguments: without the request union's tag (the workflow)."""
    return list(loc[1:]) if loc and loc[0] in REGISTRY else list(loc)


def _follow_hint(job_id: str) -> str:
    return f"call wait_job with job_id {job_id} (or get_job) until task_state is not working"


def _answer(structured: dict[str, Any], *, links: tuple[str, ...] = ()) -> ToolAnswer:
    return ToolAnswer(structured, json.dumps(structured, indent=1), links)


def _problem(problem: ApiProblem) -> ToolAnswer:
    body = problem.body()
    return ToolAnswer(body, f"{problem.status} {problem.title}: {problem.detail or ''}".strip(), (), True)
