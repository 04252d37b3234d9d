"""Grants on the approve page in real Chromium: "Approve, and allow the same for 10 minutes" by
tap and by voice ("yes, for ten minutes" through the fake microphone, heard by the real
recogniser), the grant in "Allowed again" with what stays fixed and what may change, a fitting
write run without a card, and "End now" ending it; axe finds nothing wrong on the way."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.kit import (
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
from tests.browser.test_accessibility import audit, axe_source
from tests.conftest import FIXTURES, require
from voicegate.domain import Risk
from voicegate.gate.core import ActionRequest
from voicegate.gate.grant_rules import GrantRules

pytestmark = pytest.mark.browser

__all__ = ["axe_source"]


@pytest.fixture
def free_text(server: Server) -> Iterator[None]:
    """The operator lets a note's text vary under a grant (``--grant-free write_note=text``)."""
    server.gate.policy = dataclasses.replace(
        server.gate.policy, grants=GrantRules(free=(("write_note", ("text",)),))
    )
    yield
    server.gate.policy = dataclasses.replace(server.gate.policy, grants=GrantRules())


def test_a_grant_made_by_tap_is_shown_used_and_ended(
    page: Any, server: Server, axe_source: str, free_text: None
) -> None:
    pair(page, server)
    proposed = server.propose(1)
    article = page.locator(f'[data-pending-id="{proposed.id}"]')
    choice = article.get_by_role("checkbox", name="Approve, and allow the same for 10 minutes")
    choice.wait_for()
    what = article.locator(".grant .muted")
    expect(what).to_contain_text("Stays exactly as on this card: name. May change: text.")
    expect(article.get_by_label("How many times, at most")).to_be_hidden()
    assert_targets_are_large(page)
    assert audit(page, axe_source, "grant-offered", "light") == []

    choice.check()
    expect(article.get_by_label("How long")).to_have_value("10")
    expect(article.get_by_label("How many times, at most")).to_have_value("5")
    assert audit(page, axe_source, "grant-ticked", "light") == []
    approve_button(page, proposed).click()
    expect_success(page, "write_note 'shopping'", proposed)
    expect(article.locator(".set-result")).to_contain_text(
        "Allowed the same for 10 minutes, at most 5 times."
    )
    grants = page.locator("#grants li")
    expect(grants).to_have_count(1)
    expect(grants.first).to_contain_text("may change: text")
    expect(grants.first).to_contain_text("5 of 5 left")
    (made,) = server.run(server.gate.grants("asha"))
    assert (made.fixed, made.free, made.uses_left) == ({"name": "shopping"}, ("text",), 5)
    assert audit(page, axe_source, "grant-made", "light") == []
    shot(page, "grant-made")

    # The agent writes the same note with new text: it runs at once, under the grant.
    same = ActionRequest("write_note", {"name": "shopping", "text": "bread"})
    ran = server.run(server.gate.use_grant("asha", same))
    assert ran is not None and ran[0].id == made.id
    assert server.executed.calls[-1] == ("write_note", {"name": "shopping", "text": "bread"})

    end = page.get_by_role("button", name=f"End now: write_note ({made.id})")
    end.click()
    expect(page.locator("#grant-status")).to_have_text("Ended: write_note is asked about again.")
    expect(grants).to_have_count(0)
    expect(page.locator("#grants-empty")).to_be_visible()
    assert server.run(server.gate.grants("asha")) == []
    assert server.run(server.gate.use_grant("asha", same)) is None
    assert audit(page, axe_source, "grant-ended", "light") == []


def test_the_words_to_say_for_a_grant_stay_within_the_operators_bound_and_name_the_count(
    page: Any, server: Server
) -> None:
    # "yes, for 10 minutes" past a 5-minute bound would refuse the whole answer.
    server.gate.policy = dataclasses.replace(
        server.gate.policy, grants=GrantRules(max_minutes=5, max_uses=3)
    )
    try:
        pair(page, server)
        proposed = server.propose(1)
        what = page.locator(f'[data-pending-id="{proposed.id}"] .grant .muted')
        expect(what).to_contain_text("or say “yes, for 5 minutes”")
        expect(what).to_contain_text("said, it allows the same at most 3 times")
    finally:
        server.gate.policy = dataclasses.replace(server.gate.policy, grants=GrantRules())


def test_a_grant_made_by_voice_is_shown_and_ended(
    playwright: Any, server: Server, axe_source: str, free_text: None, tmp_path: Path
) -> None:
    require(server.services.voice is not None, "the recogniser pipeline (voicegate.voice.pipeline)")
    clip = FIXTURES / "clips" / "piper_yes_for_ten_minutes.flac"
    launched = launch(playwright, fake_microphone(clip, tmp_path / "yes_for_ten_minutes.wav"))
    try:
        with open_page(launched, server) as page:
            pair(page, server, WHOLE_CLIP)
            proposed = server.propose(1)
            article = page.locator(f'[data-pending-id="{proposed.id}"]')
            what = article.locator(".grant .muted")
            expect(what).to_contain_text("or say “yes, for 10 minutes”")
            assert audit(page, axe_source, "grant-voice-offered", "light") == []
            article.locator("button.speak").click()
            result = result_box(page, proposed)
            result.locator(".heard").wait_for(timeout=60_000)
            expect(result).to_have_attribute("data-released", "true")
            expect(result).to_contain_text("Allowed the same for 10 minutes, at most 5 times.")
            grants = page.locator("#grants li")
            expect(grants).to_have_count(1)
            expect(grants.first).to_contain_text("5 of 5 left")
            (made,) = server.run(server.gate.grants("asha"))
            assert made.pending_id == proposed.id and made.free == ("text",)
            assert made.expires_at - made.created_at == 600.0
            (receipt,) = [r for r in server.run(server.gate.receipts("asha"))
                          if r.pending_id == proposed.id]  # fmt: skip
            assert receipt.granted is not None and receipt.granted.grant_id == made.id
            assert audit(page, axe_source, "grant-voice-made", "light") == []
            shot(page, "grant-voice-made")

            page.get_by_role("button", name=f"End now: write_note ({made.id})").click()
            expect(page.locator("#grant-status")).to_have_text(
                "Ended: write_note is asked about again."
            )
            expect(grants).to_have_count(0)
            assert server.run(server.gate.grants("asha")) == []
            assert audit(page, axe_source, "grant-voice-ended", "light") == []
    finally:
        launched.close()


def test_no_grant_is_offered_on_a_high_risk_card_or_a_choice(page: Any, server: Server) -> None:
    pair(page, server)
    high = server.propose(1, risk=Risk.HIGH)
    several = server.propose(2)
    approve_button(page, high).wait_for()
    approve_button(page, several).wait_for()
    expect(page.locator(".grant")).to_have_count(0)
    for pending in (high, several):
        server.run(server.gate.withdraw(pending.id))
