"""Write `records_policy_long.txt`, the long document of the document-analysis eval: 40 pages (form feeds) of a
records policy, each about a different kind of record, with one fact the eval asks for on page 33 and distractors
(other logs, other periods) elsewhere. Deterministic: `python evals/documents/make_long_policy.py`."""

from __future__ import annotations

from pathlib import Path

PAGES = 40
FACT_PAGE = 33
TOPICS = [
    "purchase orders", "supplier contracts", "payroll records", "expense claims", "customer correspondence",
    "board minutes", "insurance policies", "health and safety reports", "training records", "access requests",
    "visitor logs", "marketing consents", "quality inspections", "maintenance schedules", "vehicle logbooks",
    "tax returns", "bank statements", "pension records", "recruitment files", "disciplinary records",
    "product designs", "test reports", "warranty claims", "returns notes", "delivery notes",
    "stock counts", "fixed asset registers", "software licences", "backup tapes", "firewall rules",
    "change requests", "incident tickets", "audit logs", "network diagrams", "encryption keys",
    "travel bookings", "meeting recordings", "press releases", "legal holds", "archived mailboxes",
]  # fmt: skip


def page(number: int, topic: str) -> str:
    retention = "seven years from the date of the event" if number == FACT_PAGE else f"{2 + number % 5} years"
    lines = [
        f"RECORDS MANAGEMENT POLICY - SECTION {number}: {topic.upper()}",
        "",
        f"{number}.1 Scope. This section applies to {topic} held by Contoso Retail plc in any form, including paper "
        "files, shared drives, line-of-business systems and archived copies held by service providers.",
        f"{number}.2 Owner. The department that creates {topic} is their owner and keeps an index of where they are "
        "stored, who may read them and when they were last reviewed.",
        f"{number}.3 Retention. {topic.capitalize()} are retained for {retention}, after which they are destroyed "
        "securely unless a legal hold applies.",
        f"{number}.4 Review. The owner reviews this section every year and records any exception approved by the "
        "Data Protection Officer.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    text = "\f".join(page(n, topic) for n, topic in enumerate(TOPICS[:PAGES], start=1))
    (Path(__file__).resolve().parent / "records_policy_long.txt").write_text(text)


if __name__ == "__main__":
    main()
