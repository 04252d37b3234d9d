"""Approve several on the approve page in real Chromium: three single cards waiting, each shown;
"Approve all 3" is ready once the cards have stood still; a fourth arriving just before a press
holds it back; "Approve all 4" then releases each once with its own receipt; a high-risk card is
left to be answered on its own; axe finds nothing wrong."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.kit import Server, approve_button, assert_targets_are_large, expect, pair
from tests.browser.test_accessibility import audit, axe_source
from voicegate.domain import Risk, Status
from voicegate.gate.core import ActionRequest

pytestmark = pytest.mark.browser

__all__ = ["axe_source"]


def note(name: str) -> ActionRequest:
    return ActionRequest("write_note", {"name": name, "text": "milk"})


def test_approve_all_releases_each_waiting_single_card_once(
    page: Any, server: Server, axe_source: str
) -> None:
    pair(page, server)
    before = len(server.executed.calls)
    sets = [server.run(server.gate.propose("asha", [note(n)], risk=Risk.LOW)) for n in "abc"]
    high = server.run(server.gate.propose("asha", [note("d")], risk=Risk.HIGH))
    for pending in [*sets, high]:
        approve_button(page, pending).wait_for()
    button = page.get_by_role("button", name="Approve all 3")
    expect(button).to_be_visible()
    assert_targets_are_large(page)
    assert audit(page, axe_source, "approve-all-offered", "light") == []

    # A card that arrives just before the press is not approved unread with the rest.
    expect(button).to_have_attribute("aria-disabled", "false")
    sets.append(server.run(server.gate.propose("asha", [note("e")], risk=Risk.LOW)))
    button = page.get_by_role("button", name="Approve all 4")
    expect(button).to_have_attribute("aria-disabled", "true")
    button.click(force=True)  # as a user's press lands on it: the page, not the browser, holds
    expect(page.locator("#all-status")).to_contain_text("The cards just changed")
    assert len(server.executed.calls) == before
    expect(button).to_have_attribute("aria-disabled", "false")
    button.click()
    for pending in sets:
        result = page.locator(f'[data-pending-id="{pending.id}"] .set-result')
        expect(result).to_have_attribute("data-released", "true")
    assert sorted(c[1]["name"] for c in server.executed.calls[before:]) == ["a", "b", "c", "e"]
    receipts = server.run(server.gate.receipts("asha"))
    assert {r.pending_id for r in receipts[-4:]} == {p.id for p in sets}
    assert len({r.id for r in receipts[-4:]}) == 4
    # The high-risk card still waits for its own answer, and the button is gone.
    assert server.run(server.gate.status(high.id)).status is Status.WAITING
    expect(page.locator("#all-box")).to_be_hidden()
    assert audit(page, axe_source, "approve-all-done", "light") == []
    server.run(server.gate.withdraw(high.id))
