"""The named confirm checks, recorded pass or fail, in the order the gate runs them."""

from __future__ import annotations

from voicegate.gate.types import Check
from voicegate.reasons import Reason

CHECK_NAMES: tuple[str, ...] = (
    "for_this_set",  # the set exists and the evidence carries its current nonce
    "paired_device_of_user",  # a paired, live device of the set's user
    "set_open",  # still waiting and before its deadline
    "evidence_fresh",  # made after the set opened and not older than the freshness window
    "words_choose_one_card",  # the answer names exactly one card valid at this stage
    "action_unchanged",  # the action still hashes and renders as shown
    "shown_in_full",  # a card shortened for display had its full text on the device's screen
    "registered_write",  # the tool is a write the operator gates
    "evidence_consumed_once",  # this evidence was never used before
    "nonce_consumed_once",  # this set's nonce was never spent before
    "approval_consumed_once",  # a token or other approval outside the card flow, spent once
)


class Checklist:
    """Collects check results in order; ``fail`` returns the reason for a one-line refusal."""

    def __init__(self) -> None:
        self._checks: list[Check] = []

    def ok(self, name: str) -> None:
        """Record that ``name`` passed."""
        assert name in CHECK_NAMES, name
        self._checks.append(Check(name, True))

    def fail(self, name: str, reason: Reason) -> Reason:
        """Record that ``name`` failed with ``reason`` and return the reason."""
        assert name in CHECK_NAMES, name
        self._checks.append(Check(name, False, reason))
        return reason

    def done(self) -> tuple[Check, ...]:
        """Every check recorded so far."""
        return tuple(self._checks)
