"""``choose_one`` end to end: an SDK agent offers three writes over the real MCP endpoint, the
user says "the second one" into the approve page's fake microphone, and exactly option 2 runs.

The whole served app (``build_app``), the notes server as its upstream, the real recogniser and
a real Chromium: nothing between the agent's call and the upstream's write is a stand-in.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.kit import expect_success, pair, result_box
from tests.browser.served import Served
from tests.conftest import require

pytestmark = [pytest.mark.browser, pytest.mark.whisper, pytest.mark.slow]

OFFER = {
    "question": "Which day should I note the swim for?",
    "options": [
        {"tool": "write_note", "arguments": {"name": "monday", "text": "swim"}},
        {"tool": "write_note", "arguments": {"name": "tuesday", "text": "swim"}},
        {"tool": "write_note", "arguments": {"name": "wednesday", "text": "swim"}},
    ],
}


def test_choose_one_said_the_second_one_runs_exactly_option_two(
    browser: Any, served: Served
) -> None:
    require(served.voice is not None, "the recogniser pipeline (voicegate.voice.pipeline)")
    context = browser.new_context(base_url=served.url, viewport={"width": 420, "height": 860})
    context.grant_permissions(["microphone"], origin=served.url)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        pair(page, served, "?max_record_ms=2500")
        pending = served.agent("choose_one", OFFER)
        assert pending["status"] == "pending_user_confirmation"
        card_set = page.locator(f'[data-pending-id="{pending["pending_id"]}"]')
        card_set.wait_for()
        assert "Which day should I note the swim for?" in card_set.inner_text()
        assert served.agent("list_notes", {}) == {"notes": {}}

        card_set.locator("button.speak").click()
        result_box(page).locator(".heard").wait_for(timeout=90_000)
        assert "second" in result_box(page).inner_text().lower()
        expect_success(page, "write_note 'tuesday'")

        status = served.agent("pending_status", {"pending_id": pending["pending_id"]})
        assert (status["status"], status["chosen"]) == ("confirmed", 2)
        assert served.agent("list_notes", {}) == {"notes": {"tuesday": "swim"}}
        calls = served.agent("stats", {})["calls"]
        assert calls.get("write_note") == 1 and "delete_note" not in calls
    finally:
        context.close()
