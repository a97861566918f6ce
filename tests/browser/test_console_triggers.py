"""Schedules and triggers in the console: a tenant creates a schedule (a refused expression shows its reason at the
field), sees it listed, and pauses it."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.conftest import Tabs

INPUT = '{"question": "What does the notice say?", "documents": [{"name": "n.txt", "text": "Terminate on notice."}]}'


def test_a_tenant_creates_a_schedule_sees_a_refused_expression_and_pauses_it(tabs: Tabs, keys: dict[str, str]) -> None:
    # Given tenant alpha on the Schedules & triggers page
    page = tabs.sign_in(keys["alpha"], "/console/triggers")
    expect(page.get_by_role("heading", name="Schedules & triggers")).to_be_visible()
    page.get_by_text("New schedule").click()
    # When it asks for an expression EventBridge Scheduler refuses, the reason shows at the field
    page.get_by_label("cron(…) or rate(…)").fill("cron(0 2 * * * *)")
    page.get_by_label("The job's input (JSON)").fill(INPUT)
    page.get_by_role("button", name="Create schedule").click()
    expect(page.locator("#schedule-schedule-error")).to_contain_text("exactly one of day-of-month and day-of-week")
    # Then a valid one is created and listed, and pausing it says so
    page.get_by_label("cron(…) or rate(…)").fill("cron(0 2 * * ? *)")
    page.get_by_role("button", name="Create schedule").click()
    table = page.get_by_role("table", name="Schedules")
    expect(table).to_contain_text("cron(0 2 * * ? *) (UTC)")
    expect(table).to_contain_text("enabled")
    table.get_by_role("button", name="Pause").first.click()
    expect(page.get_by_role("table", name="Schedules")).to_contain_text("paused")
    tabs.shoot(page, "schedules-and-triggers")
