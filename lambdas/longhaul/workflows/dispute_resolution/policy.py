"""The offline model's stand-in for the dispute agents (`AgentPolicy.offline`): a scripted policy per agent that
decides each turn from the conversation so far, deterministically (the same conversation, the same decision).

Drafting: list the disputes → per vendor its findings, earlier disputes and known facts → its invoice lines and
the agreed prices it relies on → a draft citing every disputed line, the earlier disputes and the facts → done.
Sending: every approved notice → a memory of each dispute sent and of the agreed prices it relied on → done.
"""

import json
from collections.abc import Iterator
from typing import Any

from longhaul.core.model import Model


class _Context(Model):
    step: str
    turn: int
    brief: dict[str, Any]
    messages: list[dict[str, Any]]


def _results(context: _Context, tool: str) -> Iterator[dict[str, Any]]:
    """The answers of `tool`'s calls so far, oldest first: `{"ok", "output"|"error", "input"}`."""
    calls: dict[tuple[int, int], dict[str, Any]] = {}
    for message in context.messages:
        content = message["content"]
        if message["role"] == "assistant":
            for index, call in enumerate(content.get("tool_calls", [])):
                calls[(message["turn"], index)] = call
        elif message["role"] == "tool" and content["tool"] == tool:
            called = calls.get((message["turn"], content["call"]), {})
            yield {**content, "input": called.get("input", {})}


def _answer(thought: str, calls: list[tuple[str, dict[str, Any]]] | None = None, final: Any = None) -> str:
    decision: dict[str, Any] = {"thought": thought}
    if final is not None:
        decision["final"] = final
    else:
        decision["tool_calls"] = [{"tool": tool, "input": arguments} for tool, arguments in calls or []]
    return json.dumps(decision, sort_keys=True)


def drafting(context: dict[str, Any], model_id: str) -> str:
    ctx = _Context.model_validate(context)
    listed = next((r["output"] for r in _results(ctx, "list_disputes") if r["ok"]), None)
    if listed is None:
        return _answer("First, which vendors have discrepancies.", [("list_disputes", {})])
    vendors = [v["vendor"] for v in listed["vendors"]]
    if not vendors:
        return _answer("No vendor has a discrepancy: nothing to dispute.", final={"drafts": []})
    findings = {r["output"]["vendor"]: r["output"]["lines"] for r in _results(ctx, "get_findings") if r["ok"]}
    if any(v not in findings for v in vendors):
        calls: list[tuple[str, dict[str, Any]]] = []
        for vendor in vendors:
            calls += [
                ("get_findings", {"vendor": vendor}),
                ("recall_episodes", {"subject": vendor, "kind": "dispute"}),
                ("recall_facts", {"subject": vendor}),
            ]
        return _answer("Gather each vendor's findings and what memory knows of it.", calls)
    lines = {r["output"]["vendor"] for r in _results(ctx, "get_invoice_lines") if r["ok"]}
    codes = sorted(
        {f["product_code"] for found in findings.values() for f in found if f["product_code"] and f["rule"] in (
            "contract-price", "line-total")}
    )  # fmt: skip
    if any(v not in lines for v in vendors):
        calls = [("get_invoice_lines", {"vendor": vendor}) for vendor in vendors]
        calls += [("get_price_list", {"codes": codes})] if codes else []
        return _answer("Check the invoice lines and the agreed prices the findings rely on.", calls)
    drafted = {r["output"]["vendor"]: r["output"]["draft_key"] for r in _results(ctx, "draft_notice") if r["ok"]}
    tried = {r["input"].get("vendor") for r in _results(ctx, "draft_notice")}
    if any(v not in drafted and v not in tried for v in vendors):
        episodes = {r["input"]["subject"]: r["output"]["episodes"] for r in _results(ctx, "recall_episodes") if r["ok"]}
        facts = {r["input"]["subject"]: r["output"]["facts"] for r in _results(ctx, "recall_facts") if r["ok"]}
        calls = [
            (
                "draft_notice",
                {
                    "vendor": vendor,
                    "line_ids": [f["line_id"] for f in findings[vendor]],
                    "past_dispute_ids": [e["memory_id"] for e in episodes.get(vendor, [])],
                    "fact_ids": [f["memory_id"] for f in facts.get(vendor, [])],
                },
            )
            for vendor in vendors
            if vendor not in drafted
        ]
        return _answer("Draft each vendor's notice, citing every disputed line.", calls)
    return _answer(
        "Every vendor with discrepancies has a draft for review.",
        final={"drafts": [{"vendor": v, "draft_key": drafted[v]} for v in vendors if v in drafted]},
    )


def sending(context: dict[str, Any], model_id: str) -> str:
    ctx = _Context.model_validate(context)
    approved = [n["vendor"] for n in ctx.brief["context"]["approved"]]
    codes = {n["vendor"]: n["price_codes"] for n in ctx.brief["context"]["approved"]}
    sends = {r["input"].get("vendor"): r for r in _results(ctx, "send_notice")}
    waiting = [v for v in approved if v not in sends]
    if waiting:
        return _answer("Send each approved notice.", [("send_notice", {"vendor": v}) for v in waiting])
    sent = [v for v in approved if sends[v]["ok"]]
    recorded = {r["input"].get("vendor") for r in _results(ctx, "record_dispute")}
    if any(v not in recorded for v in sent):
        calls: list[tuple[str, dict[str, Any]]] = []
        for vendor in sent:
            calls.append(("record_dispute", {"vendor": vendor}))
            calls += [("confirm_contract_price", {"vendor": vendor, "code": code}) for code in codes.get(vendor, [])]
        return _answer("Remember each dispute and the agreed prices it relied on.", calls)
    notices = [
        {
            "vendor": v,
            "operation_id": sends[v].get("operation_id"),
            "status": "sent" if sends[v]["ok"] else "unknown" if sends[v].get("status") == "unknown" else "not_sent",
        }
        for v in approved
    ]
    return _answer("Every approved notice is sent and remembered.", final={"notices": notices})
