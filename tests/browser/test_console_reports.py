"""The operators' usage report in the console: the spend chart (an SVG the page draws under its CSP) and the tables,
for a job the export function has exported."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from local.platform import LocalPlatform
from tests.browser.conftest import Api, Tabs


def test_an_operator_reads_the_usage_report_with_its_spend_chart(
    tabs: Tabs, platform: LocalPlatform, alpha: Api, keys: dict[str, str]
) -> None:
    # Given a completed job of tenant alpha, exported (the schedule would export it within its interval)
    job_id = alpha.submit()
    alpha.wait(job_id, lambda j: j["status"] == "completed", "to complete")
    (exporter,) = [name for lid, name in platform.deployment.functions.items() if "AnalyticsExporter" in lid]
    platform.client("lambda").invoke(FunctionName=exporter, Payload=json.dumps({"job_id": job_id}).encode())
    # When an operator opens the report for tenant alpha, spend by step
    page = tabs.sign_in(keys["ops"], "/console/ops/reports?since=1d&tenant=alpha&by=step")
    # Then the chart has a bar per step that called a model, named in its label, and the tables follow
    chart = page.get_by_role("img", name="Spend by step")
    expect(chart).to_be_visible()
    expect(chart.locator("rect.chart-bar").first).to_be_visible()
    expect(page.get_by_role("table", name="Step durations")).to_contain_text("parse_documents")
    expect(page.get_by_role("link", name="Reports")).to_have_attribute("aria-current", "page")
    tabs.shoot(page, "usage-report")
