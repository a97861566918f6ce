"""The fault spec of the local runtime: parsed strictly, fired as many times as asked."""

from __future__ import annotations

import pytest

from longhaul.core.errors import InvalidInputError, TransientError
from longhaul.core.faults import CrashFault, FaultInjector
from longhaul.workflows import REGISTRY


def test_a_counted_fault_fires_that_many_times_then_stops():
    faults = FaultInjector("draft_answer=transientx2")
    for _ in range(2):
        with pytest.raises(TransientError):
            faults.check("draft_answer", None)
    faults.check("draft_answer", None)
    faults.check("parse_documents", None)


def test_an_item_fault_fires_for_that_item_only_and_forever_without_a_count():
    faults = FaultInjector("extract_evidence#3=invalid-input")
    faults.check("extract_evidence", 2)
    for _ in range(3):
        with pytest.raises(InvalidInputError):
            faults.check("extract_evidence", 3)


def test_runtime_kinds_are_taken_by_the_runtime_not_raised_by_check():
    faults = FaultInjector("publish_result=duplicatex1,draft_answer=crash-after-side-effect")
    faults.check("publish_result", None)
    assert faults.take("publish_result", None, ("duplicate",)) == "duplicate"
    assert faults.take("publish_result", None, ("duplicate",)) is None
    with pytest.raises(CrashFault) as crash:
        faults.crash_point("draft_answer", None)
    assert crash.value.error_type == "Runtime.ExitError"


@pytest.mark.parametrize("spec", ["draft_answer", "draft_answer=explode", "Draft=transient", "x#y=transient"])
def test_a_bad_spec_is_rejected_with_the_expected_form(spec):
    with pytest.raises(ValueError, match=r"<step>\[#<item>\]=<kind>"):
        FaultInjector(spec)


def test_an_unknown_step_or_an_item_of_a_step_without_items_is_rejected():
    """Checked against the deployed steps (the registry), as the local runtime does with LONGHAUL_FAULTS."""
    with pytest.raises(ValueError, match=r"unknown step 'draft_answers'.*draft_answer"):
        FaultInjector("draft_answers=transient", REGISTRY)
    with pytest.raises(ValueError, match="only fan-out steps have items"):
        FaultInjector("draft_answer#2=transient", REGISTRY)
