""" "Teach my answers" on the approve page, in real Chromium against a real server.

The whole flow with Chromium's fake microphone: pair, teach three takes of "two" through the
page, then say "the second one" on a card and see it released. Chromium restarts the fake
microphone's file on every start, so each take is a browser start on the same profile (the
device key stays in it) with another recording of "two"; the same file twice is a replay, and
the page says so. The rest of the view (keyboard alone, play back, redo, delete a take and an
answer, the "hard for recognisers" setting) runs on a microphone that says a new sound each
time (``VARIED_MICROPHONE``). Each test teaches as its own user, so no take of one test is a
replay in another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.kit import (
    SPEECH,
    VARIED_MICROPHONE,
    WHOLE_CLIP,
    Server,
    assert_targets_are_large,
    expect,
    expect_success,
    fake_microphone,
    open_profile,
    pair,
    result_box,
)
from tests.browser.served import Served
from tests.conftest import FIXTURES, require

pytestmark = pytest.mark.browser

# Each take stops by itself after 1.5 s (2.5 s for the fake microphone's padded clips).
QUICK = "?max_record_ms=1500"
CLIP = "?max_record_ms=2500"
# Three recordings of "two" by three voices: what one user's takes are to the replay guard.
TAKES = ("piper_two", "espeak_two", "fsdd_2_theo_0")
OFFER = {
    "question": "Which list should the milk go on?",
    "options": [
        {"tool": "write_note", "arguments": {"name": "home", "text": "milk"}},
        {"tool": "write_note", "arguments": {"name": "work", "text": "milk"}},
    ],
}


def focused(page: Any) -> str:
    """The focused element's id, else its accessible label, else its text."""
    name: str = page.evaluate(
        "(() => { const a = document.activeElement;"
        " return a.id || a.getAttribute('aria-label') || a.textContent.trim(); })()"
    )
    return name


def tab_to(page: Any, name: str, limit: int = 40) -> None:
    """Press Tab until ``name`` (as ``focused`` says it) has focus."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if focused(page) == name:
            return
    raise AssertionError(f"Tab never reached {name!r}")


def templates(server: Server | Served, user: str) -> list[Any]:
    rows: list[Any] = server.run(server.store.templates.list(user))
    return rows


def open_teach(page: Any) -> None:
    page.get_by_role("button", name="Teach my answers", exact=True).click()
    expect(page.locator("#teach-section")).to_be_visible()
    expect(page.locator("#teach-pick button")).to_have_count(8)


@pytest.mark.whisper
@pytest.mark.slow
def test_three_takes_taught_on_the_page_then_the_spoken_answer_releases_its_card(
    playwright: Any, served: Served, tmp_path: Path
) -> None:
    require(served.voice is not None, "the recogniser pipeline (voicegate.voice.pipeline)")
    assert served.voice is not None  # require skipped the test otherwise
    assert served.voice.enrolments is not None  # the answer is decided with what was taught
    profile = tmp_path / "profile"
    for number, clip in enumerate(TAKES, start=1):
        microphone = fake_microphone(FIXTURES / "clips" / f"{clip}.flac", tmp_path / f"{clip}.wav")
        with open_profile(playwright, profile, microphone, served) as page:
            if number == 1:
                pair(page, served, WHOLE_CLIP)
            else:  # the same device, started again: its key is still in the profile
                page.goto("/approve" + WHOLE_CLIP)
                page.locator("#cards-section").wait_for(state="visible")
            open_teach(page)
            page.get_by_role("button", name="Two", exact=True).click()
            expect(page.locator("#take-title")).to_have_text(f"Two: take {number} of 3")
            page.locator("#teach-record").click()
            expect(page.locator("#teach-status")).to_contain_text(
                f"Take {number} of 3 saved for Two.", timeout=30_000
            )
    rows = templates(served, served.config.user)
    assert [(row.meaning, row.label) for row in rows] == [("choose:2", "")] * 3

    with open_profile(playwright, profile, SPEECH, served) as page:
        page.goto("/approve" + CLIP)
        open_teach(page)
        expect(page.locator("#taught")).to_contain_text("Two: 3 takes")
        pending = served.agent("choose_one", OFFER)
        card_set = page.locator(f'[data-pending-id="{pending["pending_id"]}"]')
        card_set.locator("button.speak").click()
        result_box(page).locator(".heard").wait_for(timeout=90_000)
        assert "second" in result_box(page).inner_text().lower()
        expect_success(page, "write_note 'work'")
    assert served.agent("list_notes", {}) == {"notes": {"work": "milk"}}


def test_teach_by_keyboard_alone_play_back_redo_and_delete_takes(page: Any, server: Server) -> None:
    page.add_init_script(VARIED_MICROPHONE)
    pair(page, server, QUICK, user="tara")
    entry = page.get_by_role("button", name="Teach my answers", exact=True)
    entry.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#teach-title")).to_be_focused()
    expect(entry).to_have_attribute("aria-expanded", "true")
    expect(page.locator("#teach-pick button")).to_have_count(8)
    order = []
    for _ in range(11):
        page.keyboard.press("Tab")
        order.append(focused(page))
    assert order == [
        "hard-mode",
        "Yes",
        "No",
        "Wait",
        "One",
        "Two",
        "Three",
        "Four",
        "Five",
        "teach-label",
        "teach-close",
    ]

    page.locator("#teach-title").focus()
    tab_to(page, "Two")
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Two", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    tab_to(page, "teach-label")
    page.keyboard.type("doosra")
    page.keyboard.press("Tab")
    record = page.locator("#teach-record")
    expect(record).to_be_focused()
    expect(record).to_have_accessible_name("Record take 1 of 3 for Two “doosra”")
    status = page.locator("#teach-status")
    for number in (1, 2, 3):
        page.keyboard.press("Enter")  # starts; the take stops by itself
        expect(status).to_contain_text(f"Take {number} of 3 saved for Two “doosra”.")
    expect(page.locator("#take-title")).to_have_text("Two “doosra”: taught, 3 takes")
    expect(page.locator("#take-title")).to_be_focused()
    expect(status).to_contain_text("Two “doosra” is taught.")
    first, second, third = (row.id for row in templates(server, "tara"))
    assert_targets_are_large(page)

    tab_to(page, "Play take 1 of Two “doosra”")
    page.keyboard.press("Enter")
    expect(status).to_have_text("Take 1 of Two “doosra” played.")
    assert page.locator("#teach-player").evaluate("a => a.currentSrc").startswith("blob:")

    tab_to(page, "Redo take 2 of Two “doosra”")
    page.keyboard.press("Enter")  # records at once; focus goes to the button that stops it
    expect(record).to_be_focused()
    expect(status).to_contain_text("Take 2 of Two “doosra” recorded again.")
    rows = templates(server, "tara")
    assert [row.id for row in rows][:2] == [first, third] and second not in {r.id for r in rows}
    items = page.locator("#takes li")
    expect(items).to_have_count(3)
    assert items.nth(1).get_attribute("data-take") == rows[2].id  # the new take 2 kept its place

    tab_to(page, "Delete take 3 of Two “doosra”")
    page.keyboard.press("Enter")
    expect(status).to_contain_text("Take 3 of Two “doosra” deleted. Two “doosra” now has 2 of 3")
    expect(record).to_be_focused()
    expect(record).to_have_accessible_name("Record take 3 of 3 for Two “doosra”")
    assert [row.id for row in templates(server, "tara")] == [first, rows[2].id]

    tab_to(page, "Delete Two “doosra”")
    page.keyboard.press("Enter")  # the first press only arms it: two takes of effort
    expect(status).to_have_text(
        "Press Delete again to forget Two “doosra”: 2 takes, which cannot be undone."
    )
    armed = page.locator("#taught .delete-answer")
    expect(armed).to_have_accessible_name("Press again to delete Two “doosra”, 2 takes")
    expect(armed).to_be_focused()
    assert len(templates(server, "tara")) == 2
    page.keyboard.press("Enter")
    expect(status).to_have_text("Two “doosra” deleted: 2 takes forgotten.")
    expect(page.locator("#taught-empty")).to_be_focused()
    assert templates(server, "tara") == []
    tab_to(page, "teach-close")
    page.keyboard.press("Enter")
    expect(page.locator("#teach-section")).to_be_hidden()
    expect(entry).to_be_focused()


def test_the_hard_speech_setting_and_a_chosen_word_are_stored_as_the_user_set_them(
    page: Any, server: Server
) -> None:
    page.add_init_script(VARIED_MICROPHONE)
    pair(page, server, QUICK, user="usha")
    open_teach(page)
    hard = page.get_by_role("button", name="My speech is hard for recognisers")
    hard.click()
    expect(hard).to_have_attribute("aria-pressed", "true")
    assert server.run(server.store.templates.hard("usha")) is True
    page.get_by_role("button", name="Yes", exact=True).click()
    page.get_by_label("Your own word or sound").fill("  theek   hai ")
    page.locator("#teach-record").click()
    expect(page.locator("#teach-status")).to_contain_text("Take 1 of 3 saved for Yes “theek hai”.")
    assert [(r.meaning, r.label) for r in templates(server, "usha")] == [("confirm", "theek hai")]
    expect(page.locator("#taught")).to_contain_text("Yes “theek hai”: 1 of 3 takes")
    expect(page.get_by_label("Your own word or sound")).to_have_value("theek hai")  # as kept
    hard.click()
    expect(hard).to_have_attribute("aria-pressed", "false")
    assert server.run(server.store.templates.hard("usha")) is False


def test_a_take_that_replays_an_earlier_one_is_refused_and_says_what_to_do(
    page: Any, server: Server
) -> None:
    # The fake microphone restarts its one file: the second take is the first one again.
    pair(page, server, CLIP, user="vera")
    open_teach(page)
    page.get_by_role("button", name="Yes", exact=True).click()
    status = page.locator("#teach-status")
    page.locator("#teach-record").click()
    expect(status).to_contain_text("Take 1 of 3 saved for Yes.", timeout=30_000)
    page.locator("#teach-record").click()
    expect(status).to_contain_text("Not saved: This recording was used before", timeout=30_000)
    expect(page.locator("#take-title")).to_have_text("Yes: take 2 of 3")
    assert len(templates(server, "vera")) == 1


def test_taught_takes_are_grouped_by_answer_and_word_in_the_servers_order(page: Any) -> None:
    page.goto("/approve")
    found = page.evaluate(
        """async () => {
          const { groups, progressTitle } = await import("/approve/answers.js");
          const take = (id, meaning, label, created_at) => ({ id, meaning, label, created_at });
          const data = {
            meanings: ["confirm", "cancel", "choose:2"],
            templates: [take("a", "choose:2", "", 1), take("b", "confirm", "haan", 2),
              take("c", "confirm", "", 3), take("d", "confirm", "haan", 4),
              take("e", "confirm", "haan", 5)],
          };
          // "e" was recorded again in place of a take made at time 1.5.
          const listed = groups(data, new Map([["e", 1.5]]));
          return {
            listed: listed.map((g) => [g.meaning, g.label, g.takes.map((t) => t.id).join("")]),
            titles: [progressTitle("Yes", 1, 3), progressTitle("Yes", 3, 3)],
          };
        }"""
    )
    assert found["listed"] == [
        ["confirm", "", "c"],
        ["confirm", "haan", "ebd"],
        ["choose:2", "", "a"],
    ]
    assert found["titles"] == ["Yes: take 2 of 3", "Yes: taught, 3 takes"]


def test_the_list_says_what_taught_answers_still_need_before_they_count(page: Any) -> None:
    page.goto("/approve")
    notes = page.evaluate(
        """async () => {
          const { countsNote } = await import("/approve/answers.js");
          const take = (meaning, current = true) => ({ meaning, label: "", current });
          const of = (...templates) => countsNote({ templates });
          return {
            none: of(),
            one: of(take("choose:2"), take("choose:2"), take("choose:2")),
            single: of(take("choose:2"), take("choose:2"), take("choose:1")),
            two: of(take("choose:2"), take("choose:2"), take("choose:1"), take("choose:1")),
            stale: of(take("choose:2"), take("choose:2"), take("choose:1", false)),
          };
        }"""
    )
    assert notes["none"] == "" and notes["two"] == ""
    assert notes["one"] == (
        "Taught answers count once two different answers are taught: teach one more."
    )
    assert notes["single"] == "One has one take; an answer counts from its second take."
    # A take of another recogniser counts for nothing, so "One" is not taught at all here.
    assert notes["stale"] == notes["one"]


def test_a_take_that_sounds_like_another_answer_is_kept_with_a_warning(page: Any) -> None:
    page.goto("/approve")
    said = page.evaluate(
        """async () => {
          const { soundsLike } = await import("/approve/answers.js");
          return {
            slip: soundsLike("choose:5", "Three.", "choose:3", "Five", 1),
            same: soundsLike("choose:5", "Five.", "choose:5", "Five", 2),
            unread: soundsLike("choose:4", "Oh.", null, "Four", 1),
            nothing: soundsLike("choose:4", null, null, "Four", 1),
            long: soundsLike("choose:1", "Two. ".repeat(20), "choose:2", "One", 3),
          };
        }"""
    )
    assert said["slip"] == (
        "This take sounded like “Three.”, which is Three; if you did not mean it as Five, press"
        " “Redo take 1 of Five”."
    )
    assert "“Two. Two. Two. Two. Two. Two. Two. Two.…”" in said["long"]  # cut at 40
    assert said["same"] == said["unread"] == said["nothing"] == ""


def test_a_recording_too_short_to_hold_an_answer_is_not_sent(page: Any, server: Server) -> None:
    page.add_init_script(VARIED_MICROPHONE)
    pair(page, server, QUICK, user="vic")
    open_teach(page)
    page.get_by_role("button", name="Two", exact=True).click()
    page.locator("#teach-record").focus()
    page.keyboard.press("Enter")  # starts, and at once stops: a double press, a bounced switch
    page.keyboard.press("Enter")
    expect(page.locator("#teach-status")).to_have_text(
        "Too short to keep: hold Record while you say the answer, or press it once to start"
        " and once to stop."
    )
    assert templates(server, "vic") == []
