"""The /approve page in real headless Chromium against a real uvicorn server.

Pair with a code, see the exact card text, press its visible Approve by tap and by keyboard, get
a polite warning at least 20 seconds before the deadline and more time with one key, and speak
"the second one" through Chromium's fake microphone. A refused spoken answer shows what was heard
and what to say instead; the "I use a switch" setting is remembered and taps are recorded as
switch presses; a hold released before the microphone starts still stops the recording. Every
test also checks that each control is at least 44x44 CSS pixels and that the page asks nothing
of any other origin. Screenshots go to test-artifacts/browser/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.kit import (
    HOLD_MS,
    REFUSED_SPEECH,
    SLOW_MICROPHONE,
    WHOLE_CLIP,
    Server,
    approve_button,
    assert_targets_are_large,
    expect,
    expect_success,
    fake_microphone,
    launch,
    open_page,
    pair,
    result_box,
    shot,
)
from tests.conftest import require
from voicegate.domain import Risk, Status

pytestmark = pytest.mark.browser


def test_pair_see_the_card_and_tap_approve(page: Any, server: Server) -> None:
    pair(page, server)
    before = len(server.executed.calls)
    proposed = server.propose(1)
    card = page.locator(f'[data-pending-id="{proposed.id}"] li.card')
    card.wait_for()
    assert card.locator(".text").text_content() == proposed.actions[0].card_text
    assert card.locator(".text").inner_text() == proposed.actions[0].card_text
    approve = approve_button(page, proposed)
    expect(approve).to_have_text("Approve")
    expect(approve).to_have_accessible_name("Approve write_note 'shopping'")
    assert_targets_are_large(page)
    shot(page, "01-card-waiting")
    approve.click()
    expect_success(page, "write_note 'shopping'")
    assert server.executed.calls[before:] == [("write_note", {"name": "shopping", "text": "milk"})]
    shot(page, "02-approved-by-tap")


def test_high_risk_by_keyboard_alone_in_dark_mode(page: Any, server: Server) -> None:
    pair(page, server)
    before = len(server.executed.calls)
    proposed = server.propose(2, risk=Risk.HIGH)
    approve_button(page, proposed).wait_for()
    focused = ""
    for _ in range(30):  # Tab from the top until the second card has focus
        page.keyboard.press("Tab")
        focused = page.evaluate("document.activeElement.getAttribute('data-card') || ''")
        if focused == "2":
            break
    assert focused == "2"
    shot(page, "03-dark-keyboard-focus")
    page.keyboard.press("Enter")
    page.locator(".set.final").wait_for()
    assert "eggs" in page.locator(".set.final").inner_text()
    assert len(server.executed.calls) == before
    assert_targets_are_large(page)
    final = page.locator(".set.final button.approve")
    expect(final).to_have_text("Approve")
    expect(final).to_be_focused()
    page.keyboard.press("Enter")
    expect_success(page, "write_note 'eggs'")
    assert server.executed.calls[before:] == [("write_note", {"name": "shopping", "text": "eggs"})]
    receipt = server.run(server.gate.receipts("asha"))[-1]
    assert receipt.input is not None and receipt.input.value == "key"
    shot(page, "04-dark-confirmed-by-keyboard")


def test_warning_before_the_deadline_and_more_time_with_one_key(page: Any, server: Server) -> None:
    pair(page, server)
    proposed = server.propose(1)
    article = page.locator(f'[data-pending-id="{proposed.id}"]')
    article.wait_for()
    # Jump the server clock to 29 s before the deadline; the page re-syncs from its next answer
    # (it polls every 1.5 s). A page that warned later than 20 s before the deadline would stay
    # silent past the short wait below, or announce fewer than 20 seconds.
    server.clock.offset += proposed.deadline - server.clock() - 29
    page.locator(".set.warning").wait_for(timeout=8_000)
    assert proposed.deadline - server.clock() >= 20
    announce = page.locator("#announce")
    expect(announce).to_contain_text("seconds left", timeout=2_000)
    announced = re.search(r"About (\d+) seconds left", announce.inner_text())
    assert announced is not None and int(announced.group(1)) >= 20, announce.inner_text()
    assert announce.get_attribute("aria-live") == "polite"
    shot(page, "05-warning-before-deadline")
    old_deadline = float(article.get_attribute("data-deadline"))
    page.locator("body").press("m")
    expect(article).not_to_have_class(re.compile(r"\bwarning\b"))
    expect(result_box(page)).to_contain_text("More time for write_note 'shopping'")
    new_deadline = float(article.get_attribute("data-deadline"))
    assert new_deadline == old_deadline + proposed.ttl
    extended = server.run(server.gate.status(proposed.id))
    assert extended.deadline == new_deadline and extended.extensions == 1
    shot(page, "06-more-time-given")
    server.run(server.gate.cancel(proposed.id, user="asha"))


def test_speak_the_second_one_and_the_second_action_runs(page: Any, server: Server) -> None:
    require(server.services.voice is not None, "the recogniser pipeline (voicegate.voice.pipeline)")
    pair(page, server, "?max_record_ms=2500")
    before = len(server.executed.calls)
    proposed = server.propose(2)
    speak = page.locator(f'[data-pending-id="{proposed.id}"] button.speak')
    speak.click()
    result_box(page).locator(".heard").wait_for(timeout=60_000)
    shot(page, "07-voice-answer")
    text = result_box(page).inner_text()
    assert "second" in text.lower()
    # Exactly this answer ran the second action: not an earlier test's write, not a refusal.
    expect_success(page, "write_note 'eggs'")
    assert server.executed.calls[before:] == [("write_note", {"name": "shopping", "text": "eggs"})]
    assert server.run(server.gate.status(proposed.id)).chosen == 2


def test_switch_setting_is_remembered_and_taps_are_recorded_as_switch(
    page: Any, server: Server
) -> None:
    pair(page, server)
    # The setting is under "How to answer", folded until opened; the page remembers it open.
    how = page.locator("#how")
    expect(how).not_to_have_attribute("open", "")
    page.get_by_text("How to answer").click()
    setting = page.get_by_role("button", name="I use a switch")
    expect(setting).to_have_attribute("aria-pressed", "false")
    assert setting.get_attribute("aria-describedby") == "switch-help"
    setting.click()
    expect(setting).to_have_attribute("aria-pressed", "true")
    page.reload()
    page.locator("#cards-section").wait_for(state="visible")
    expect(how).to_have_attribute("open", "")
    expect(setting).to_have_attribute("aria-pressed", "true")
    assert_targets_are_large(page)
    proposed = server.propose(1)
    approve_button(page, proposed).click()
    expect_success(page, "write_note 'shopping'")
    receipt = server.run(server.gate.receipts("asha"))[-1]
    assert receipt.pending_id == proposed.id
    assert receipt.input is not None and receipt.input.value == "switch"
    shot(page, "08-switch-setting-on")


def test_hold_released_before_the_microphone_starts_stops_at_once(
    page: Any, server: Server
) -> None:
    page.add_init_script(SLOW_MICROPHONE)
    # Far longer than the wait below: only the remembered release can stop this recording.
    pair(page, server, "?max_record_ms=15000")
    before = len(server.executed.calls)
    proposed = server.propose(2, risk=Risk.HIGH)
    speak = page.locator(f'[data-pending-id="{proposed.id}"] button.speak')
    speak.scroll_into_view_if_needed()
    box = speak.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.wait_for_timeout(HOLD_MS)  # the hold itself: a press this long is hold-to-talk
    page.mouse.up()
    expect(speak).to_have_attribute("aria-pressed", "true")
    page.evaluate("window.startMicrophone()")
    expect(speak).to_have_attribute("aria-pressed", "false", timeout=5_000)
    # Stopped as it started: too short to hold an answer, so nothing went to the server.
    expect(result_box(page)).to_contain_text("Too short to hear. Nothing was sent.")
    assert server.executed.calls[before:] == []
    assert server.run(server.gate.status(proposed.id)).status.value == "waiting"
    server.run(server.gate.cancel(proposed.id, user="asha"))


def test_a_refused_voice_answer_shows_what_was_heard_and_what_to_say(
    playwright: Any, server: Server, tmp_path: Path
) -> None:
    require(server.services.voice is not None, "the recogniser pipeline (voicegate.voice.pipeline)")
    microphone = fake_microphone(REFUSED_SPEECH, tmp_path / "not_two.wav")
    launched = launch(playwright, microphone)
    try:
        with open_page(launched, server) as page:
            pair(page, server, WHOLE_CLIP)
            before = len(server.executed.calls)
            proposed = server.propose(2)
            page.locator(f'[data-pending-id="{proposed.id}"] button.speak').click()
            result = result_box(page)
            result.locator(".heard").wait_for(timeout=60_000)
            shot(page, "09-voice-refused")
            expect(result).to_have_attribute("data-released", "false")
            expect(result).not_to_have_attribute("data-reason", "")
            expect(result.locator(".no")).to_have_text("Nothing ran.")
            assert result.locator(".heard").inner_text().strip()
            assert result.locator(".next-step").inner_text().strip()
            assert result.locator(".ok").count() == 0
            assert server.executed.calls[before:] == []
            waiting = server.run(server.gate.status(proposed.id))
            assert waiting.status is Status.WAITING and waiting.chosen is None
            server.run(server.gate.cancel(proposed.id, user="asha"))
    finally:
        launched.close()


def test_opened_from_a_notifications_answer_by_voice_speak_is_ready(
    page: Any, server: Server
) -> None:
    pair(page, server)
    proposed = server.propose(1)
    approve_button(page, proposed).wait_for()
    page.goto(f"/approve?set={proposed.id}&voice=1")
    speak = page.locator(f'[data-pending-id="{proposed.id}"] button.speak')
    if server.services.voice is None:
        expect(approve_button(page, proposed)).to_be_focused()
    else:
        expect(speak).to_be_focused()
        expect(result_box(page, proposed)).to_have_text("Press Speak, then say your answer.")
    server.run(server.gate.cancel(proposed.id, user="asha"))
