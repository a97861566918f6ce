"""The workflow types and their steps, as the state machines name them (light: the API imports it)."""

from __future__ import annotations

DOCUMENT_ANALYSIS = "document-analysis"
STEPS: dict[str, tuple[str, ...]] = {
    DOCUMENT_ANALYSIS: (
        "parse_documents",
        "chunk_documents",
        "build_index",
        "retrieve_passages",
        "extract_evidence",
        "draft_answer",
        "verify_citations",
        "publish_result",
    ),
}
# Steps that fan out over items (a Map): replaying from one reruns only its failed items.
FAN_OUT_STEPS: dict[str, frozenset[str]] = {DOCUMENT_ANALYSIS: frozenset({"extract_evidence"})}
DEFAULT_DEADLINE_SECONDS = 2 * 3600
MAX_DEADLINE_SECONDS = 24 * 3600
MIN_DEADLINE_SECONDS = 60


def execution_arn(state_machine_arn: str, execution_name: str) -> str:
    return state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution_name}"
