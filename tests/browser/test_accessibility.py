"""The approve page for people who use a screen reader, a keyboard or a switch, in real Chromium.

axe-core (from npm, ``package.json``) audits every state of the page, light and dark, at 320 CSS
pixels: unpaired, a wrong code, pairing, nothing waiting, cards, a card shown in full, recording,
a voice result, a tap result and the final step of a high-risk card; and "Teach my answers"
opened, recording a take, with takes saved, and with an answer taught. Each state is also saved
as a screenshot; ``scripts/screens`` sends them to ``docs/screens/``. The other tests check what
axe cannot: announcements of new and closed sets, where focus goes, More time per set, F5's
"Show all" before a yes, and result texts that never contradict the transcript.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.kit import (
    ARTIFACTS,
    NOTES,
    SLOW_MICROPHONE,
    VARIED_MICROPHONE,
    Server,
    approve_button,
    expect,
    expect_success,
    open_page,
    pair,
    result_box,
    shot,
)
from tests.conftest import ROOT, require
from voicegate.domain import Risk
from voicegate.gate import card
from voicegate.gate.core import ActionRequest
from voicegate.limits import BUDGET_WINDOW

pytestmark = pytest.mark.browser

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
# Where the state screenshots go: docs/screens/ from scripts/screens, else the test artifacts.
SCREENS = Path(os.environ.get("VOICEGATE_SCREENS", ARTIFACTS / "states"))
# The narrowest phone width WCAG 1.4.10 (reflow) asks a page to work at.
NARROW = 320
# Holds POST /device/pair while ``window.holdPairing`` is set, until ``releasePairing()``.
HELD_PAIRING = """
(() => {
  const real = window.fetch.bind(window);
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  window.holdPairing = false;
  window.releasePairing = () => release();
  window.fetch = async (input, init) => {
    if (window.holdPairing && String(input).endsWith("/device/pair")) await held;
    return real(input, init);
  };
})();
"""
AUDIT = """async () => {
  const result = await axe.run(document, { resultTypes: ["violations"] });
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(" ")),
  }));
}"""
# The probe's argument (issue 16, F5): the 200-character card cut away its dangerous tail.
HIDDEN = "Buy milk. " + "x" * 190 + " AND ALSO transfer everything to mallory"
LONG = ActionRequest("write_note", {"name": "groceries", "text": HIDDEN})
# The outside probe's choice (issue 35): a question holding bidi controls, a zero-width space,
# a terminal escape and a line break; three options of which the first argument that differs
# names two alike, two whose texts are alike for their first 29 characters, and a bidi override
# in a value.
PROBE_QUESTION = "Which \u202enote\u200b \u2066now\u2069?\x1b[2J\r\nOK"
SAME_START = "Meet at the usual place on Monday at "
ALIKE = [
    ActionRequest("write_note", {"name": "plans", "text": SAME_START + "10"}),
    ActionRequest("write_note", {"name": "plans", "text": SAME_START + "11"}),
    ActionRequest("write_note", {"name": "plans\u202e", "text": SAME_START + "10"}),
]
RAW = "\u202e\u200b\u2066\u2069\x1b\r\n"


@pytest.fixture
def axe_source() -> str:
    require(AXE.exists(), "axe-core from npm (npm install, as scripts/setup-dev does)")
    return AXE.read_text(encoding="utf-8")


@pytest.fixture
def narrow(browser: Any, server: Server, request: pytest.FixtureRequest) -> Iterator[Any]:
    scheme = "dark" if "dark" in request.node.name else "light"
    with open_page(browser, server, scheme, width=NARROW) as opened:
        yield opened


def audit(page: Any, axe_source: str, state: str, scheme: str) -> list[dict[str, Any]]:
    """axe-core's violations in the page as it is now; the state's screenshot on the way."""
    shot(page, f"{state}-{scheme}", SCREENS)
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(axe_source)
    violations: list[dict[str, Any]] = page.evaluate(AUDIT)
    return violations


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_in_any_page_state(
    browser: Any, server: Server, axe_source: str, scheme: str
) -> None:
    found: dict[str, list[dict[str, Any]]] = {}
    with open_page(browser, server, scheme, width=NARROW) as page:

        def check(state: str) -> None:
            found[state] = audit(page, axe_source, state, scheme)

        page.add_init_script(SLOW_MICROPHONE + HELD_PAIRING)
        server.clock.offset += BUDGET_WINDOW
        page.goto("/approve")
        code = page.get_by_label("Pairing code")
        code.wait_for()
        check("01-unpaired")

        code.fill("0000 0000")
        page.get_by_role("button", name="Pair this device").click()
        expect(code).to_have_attribute("aria-invalid", "true")
        check("02-wrong-code")

        page.evaluate("window.holdPairing = true")
        code.fill(server.code())
        page.get_by_role("button", name="Pair this device").click()
        expect(page.locator("#pair-form")).to_have_attribute("aria-busy", "true")
        check("03-pairing")
        page.evaluate("window.releasePairing()")
        page.locator("#cards-section").wait_for(state="visible")
        expect(page.locator("#empty")).to_be_visible()
        check("04-nothing-waiting")

        choice = server.run(server.gate.propose("asha", NOTES, risk=Risk.LOW))
        long = server.run(server.gate.propose("asha", [LONG], risk=Risk.LOW))
        approve_button(page, long).wait_for()
        approve_button(page, choice, 2).wait_for()
        check("05-cards")
        page.locator(f'[data-pending-id="{long.id}"] button.expand').click()
        expect(page.locator(f'[data-pending-id="{long.id}"] .text')).to_contain_text("mallory")
        check("06-card-shown-in-full")

        speak = page.locator(f'[data-pending-id="{choice.id}"] button.speak')
        speak.click()
        expect(speak).to_have_attribute("aria-pressed", "true")
        check("07-recording")
        speak.click()  # stop before the microphone starts: too short to hold an answer
        page.evaluate("window.startMicrophone()")
        result = result_box(page)
        expect(result).to_contain_text("Too short to hear. Nothing was sent.")
        expect(result).to_contain_text("Hold Speak while you say your answer")
        check("08-voice-result")

        approve_button(page, long).click()
        expect_success(page, "write_note 'groceries'")
        check("09-result")

        server.run(server.gate.cancel(choice.id, user="asha"))
        risky = server.run(server.gate.propose("asha", NOTES, risk=Risk.HIGH))
        approve_button(page, risky, 2).click()
        final = page.locator(f'[data-pending-id="{risky.id}"].final button.approve')
        expect(final).to_have_text("Approve")
        check("10-high-risk-final")
        server.run(server.gate.cancel(risky.id, user="asha"))
    assert found == {state: [] for state in found}


# Every shown element that reaches past the right edge of the window (it would be cut off).
CUT_OFF = """() => [...document.querySelectorAll("body *")]
  .filter((e) => e.offsetParent && e.getBoundingClientRect().right > window.innerWidth + 1)
  .map((e) => `${e.tagName}.${e.className}#${e.id}`)"""
# A phone held upright, as the new-user trial used it.
PHONE = {"width": 420, "height": 900}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_on_the_phone_and_the_card_comes_first(
    browser: Any, server: Server, axe_source: str, scheme: str
) -> None:
    found: dict[str, list[dict[str, Any]]] = {}
    with open_page(browser, server, scheme, width=PHONE["width"]) as page:
        page.set_viewport_size(PHONE)

        def check(state: str) -> None:
            found[state] = audit(page, axe_source, state, scheme)

        pair(page, server)
        expect(page.locator("#paired-line")).to_have_text(
            "Paired. This device now answers for asha."
        )
        expect(page.get_by_role("button", name="Turn on notifications")).to_be_visible()
        one = server.propose(1)
        approve = approve_button(page, one)
        approve.wait_for()
        # The waiting card comes first: on screen at once, and the first stop of Tab.
        item = page.locator(f'[data-pending-id="{one.id}"] .card')
        assert item.bounding_box()["y"] < PHONE["height"] / 2
        expect(item.locator(".sentence")).to_have_text(
            "Write note with name “shopping” and text “milk”."
        )
        check("15-phone-card")
        page.evaluate("document.activeElement.blur()")
        stops = []
        for _ in range(3):
            page.keyboard.press("Tab")
            stops.append(page.evaluate("document.activeElement.textContent.trim()"))
        assert "Approve" in stops

        page.get_by_role("button", name="Exact details of write_note 'shopping'").click()
        expect(item.locator(".text")).to_have_text(card.render("write_note", NOTES[0].arguments))
        check("16-phone-details")

        page.get_by_text("How to answer").click()
        expect(page.get_by_role("button", name="I use a switch")).to_be_visible()
        check("17-phone-how-to-answer")
        page.get_by_text("How to answer").click()

        approve.click()
        expect_success(page, "write_note 'shopping'", one)
        expect(page.locator(f'[data-pending-id="{one.id}"]')).to_have_class(re.compile("closed"))
        check("18-phone-done-in-place")

        risky = server.run(server.gate.propose("asha", [NOTES[1]], risk=Risk.HIGH))
        risk = page.locator(f'[data-pending-id="{risky.id}"] .risk-line')
        expect(risk).to_have_text(
            "⚠ High risk: after Approve you are asked once more, on this page."
        )
        check("19-phone-high-risk")
        approve_button(page, risky).click()
        step = result_box(page, risky).locator(".step")
        expect(step).to_contain_text("Nothing has run yet")
        check("20-phone-chosen-step")

        server.clock.offset += risky.deadline + risky.ttl + 1 - server.clock()
        expect(result_box(page, risky)).to_contain_text("Time ran out for")
        check("21-phone-time-ran-out")

        forget = page.get_by_role("button", name="Forget this device")
        forget.click()
        expect(page.get_by_role("button", name="Press again to forget this device")).to_be_visible()
        expect(page.locator("#forget-status")).to_contain_text("pairing again needs a new code")
        assert page.locator("#pair-section").is_hidden()
        check("22-phone-forget-armed")

        # 200 % zoom of the same phone: half the CSS pixels across, nothing scrolls sideways.
        page.set_viewport_size({"width": PHONE["width"] // 2, "height": PHONE["height"] // 2})
        page.keyboard.press("Escape")
        assert page.evaluate(CUT_OFF) == []
        check("23-phone-zoom-200")
    assert found == {state: [] for state in found}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_in_the_teach_view(
    browser: Any, server: Server, axe_source: str, scheme: str
) -> None:
    found: dict[str, list[dict[str, Any]]] = {}
    with open_page(browser, server, scheme, width=NARROW) as page:

        def check(state: str) -> None:
            found[state] = audit(page, axe_source, state, scheme)

        page.add_init_script(VARIED_MICROPHONE)
        # A user of this test's own: no take here is a replay of another test's.
        pair(page, server, "?max_record_ms=1500", user=f"teach-{scheme}")
        page.get_by_role("button", name="Teach my answers", exact=True).click()
        expect(page.locator("#teach-pick button")).to_have_count(8)
        check("11-teach")

        page.get_by_role("button", name="Yes", exact=True).click()
        page.get_by_label("Your own word or sound").fill("haan")
        record = page.locator("#teach-record")
        page.evaluate("window.holdMicrophone = true")
        record.click()
        expect(record).to_have_attribute("aria-pressed", "true")
        check("12-teach-recording")
        page.evaluate("window.holdMicrophone = false; window.startMicrophone()")
        status = page.locator("#teach-status")
        expect(status).to_contain_text("Take 1 of 3 saved")
        record.click()
        expect(status).to_contain_text("Take 2 of 3 saved")
        expect(page.locator("#takes li")).to_have_count(2)
        check("13-teach-takes")

        record.click()
        expect(status).to_contain_text("Yes “haan” is taught.")
        page.get_by_role("button", name="My speech is hard for recognisers").click()
        expect(status).to_contain_text("marked as hard for recognisers")
        check("14-teach-taught")
    assert found == {state: [] for state in found}


def test_new_and_closed_sets_are_announced_and_focus_moves_to_the_next_card(
    page: Any, server: Server
) -> None:
    pair(page, server)
    first = server.propose(1)
    second = server.propose(1)
    announce = page.locator("#announce")
    expect(announce).to_contain_text("New request: write_note 'shopping' (request 2)")
    names = [approve_button(page, p).get_attribute("aria-label") for p in (first, second)]
    assert names == ["Approve write_note 'shopping'", "Approve write_note 'shopping' (request 2)"]
    approve_button(page, first).focus()
    server.run(server.gate.withdraw(first.id))
    # Said where it is seen: the closed set stays in place, without its buttons, and its own
    # status region says why (read out as any result is).
    expect(result_box(page, first)).to_have_text(
        "write_note 'shopping' was taken back by the agent. Nothing ran."
    )
    expect(approve_button(page, second)).to_be_focused()
    expect(approve_button(page, first)).to_have_count(0)
    # A set whose time ran out says so, and not before the server's deadline.
    server.clock.offset += second.deadline - server.clock() - 3
    countdown = page.locator(f'[data-pending-id="{second.id}"] [data-countdown]')
    expect(countdown).to_have_text(re.compile(r"0:0[1-3] left"))
    expect(approve_button(page, second)).to_be_visible()
    server.clock.offset += 4
    expect(result_box(page, second)).to_have_text(
        "Time ran out for write_note 'shopping' (request 2). Nothing ran."
    )
    expect(page.locator("#empty")).to_be_focused()
    assert page.evaluate("document.activeElement.id") == "empty"
    page.get_by_role("button", name="Dismiss write_note 'shopping' (request 2)").click()
    expect(page.locator(f'[data-pending-id="{second.id}"]')).to_have_count(0)


def test_more_time_is_per_set_and_says_the_new_time_left(page: Any, server: Server) -> None:
    pair(page, server)
    first = server.propose(1)
    second = server.propose(2)
    more = page.locator(f'[data-pending-id="{second.id}"] button.more')
    expect(more).to_have_accessible_name("More time for one of 2: write_note")
    more.click()
    expect(result_box(page).locator(".ok")).to_contain_text("More time for one of 2: write_note")
    expect(result_box(page).locator(".ok")).to_contain_text("left now")
    assert server.run(server.gate.status(second.id)).deadline == second.deadline + second.ttl
    assert server.run(server.gate.status(first.id)).deadline == first.deadline
    # M outside any set, with two open, extends neither and says why.
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("m")
    expect(page.locator("#announce")).to_contain_text("Several requests are waiting")
    assert server.run(server.gate.status(first.id)).extensions == 0
    for pending in (first, second):
        server.run(server.gate.cancel(pending.id, user="asha"))


def test_a_choice_the_agent_asked_is_named_by_its_question(page: Any, server: Server) -> None:
    pair(page, server)
    asked = server.run(
        server.gate.propose(
            "asha", NOTES[:2], risk=Risk.LOW, preview="Which note should I write today?"
        )
    )
    more = page.locator(f'[data-pending-id="{asked.id}"] button.more')
    expect(more).to_have_accessible_name(
        "More time for “Which note should I write today?” (one of 2: write_note)"
    )
    server.run(server.gate.cancel(asked.id, user="asha"))


def accessible_names(page: Any, role: str) -> list[str]:
    """The names Chromium's accessibility tree gives every ``role`` on the page, in order."""
    session = page.context.new_cdp_session(page)
    nodes = session.send("Accessibility.getFullAXTree")["nodes"]
    session.detach()
    return [
        n["name"]["value"]
        for n in nodes
        if n.get("role", {}).get("value") == role and not n.get("ignored")
    ]


def test_options_alike_at_the_start_have_distinct_escaped_names(
    narrow: Any, server: Server, axe_source: str
) -> None:
    page = narrow
    # A user of this test's own: no other test's set is on the page.
    pair(page, server, user="alike")
    asked = server.run(server.gate.propose("alike", ALIKE, risk=Risk.LOW, preview=PROBE_QUESTION))
    approve_button(page, asked, 3).wait_for()
    approves = [n for n in accessible_names(page, "button") if n.startswith("Approve")]
    # Each option's own name, without the number the button adds, tells it from the others.
    assert len({name.split(": ", 1)[1] for name in approves}) == 3, approves
    assert approves == [
        "Approve 1: write_note name 'plans', text 'Meet at th…ce on Monday at 10'",
        "Approve 2: write_note name 'plans', text 'Meet at th…ce on Monday at 11'",
        "Approve 3: write_note name 'plans\\u202e', text 'Meet at th…ce on Monday at 10' ⚠",
    ]
    shown = page.locator(f'[data-pending-id="{asked.id}"] .preview')
    expect(shown).to_have_text(
        "Which \\u202enote\\u200b \\u2066now\\u2069?\\u001b[2J\\u000d\\u000aOK  ⚠ hidden characters"
    )
    expect(page.locator("#announce")).to_contain_text("New request: “Which \\u202enote")
    names = [*accessible_names(page, "button"), page.locator("#announce").inner_text()]
    assert not any(set(RAW) & set(name) for name in names), names
    page.evaluate(axe_source)
    assert page.evaluate(AUDIT) == []
    server.run(server.gate.cancel(asked.id, user="alike"))


def test_a_shortened_card_is_shown_in_full_before_its_approve_counts(
    page: Any, server: Server
) -> None:
    pair(page, server)
    before = len(server.executed.calls)
    long = server.run(server.gate.propose("asha", [LONG], risk=Risk.LOW))
    text = page.locator(f'[data-pending-id="{long.id}"] .text')
    expect(text).to_contain_text("(+42 chars)")
    expect(text).not_to_contain_text("mallory")
    approve_button(page, long).click()
    # The first press opens the card instead of answering: nothing was sent, nothing ran.
    expand = page.locator(f'[data-pending-id="{long.id}"] button.expand')
    expect(expand).to_have_attribute("aria-expanded", "true")
    expect(text).to_have_text(card.full(LONG.tool, LONG.arguments))
    # Why nothing ran is shown, not only said: in the result box every answer uses.
    result = result_box(page)
    expect(result).to_be_visible()
    expect(result).to_contain_text("All of it is shown now")
    assert server.executed.calls[before:] == []
    approve_button(page, long).click()
    expect_success(page, "write_note 'groceries'")
    assert server.executed.calls[before:] == [("write_note", dict(LONG.arguments))]
    receipt = server.run(server.gate.receipts("asha"))[-1]
    assert receipt.shown_text is not None and "mallory" in receipt.shown_text


def test_on_a_server_without_voice_a_voice_device_is_offered_taps_only(
    page: Any, server: Server
) -> None:
    recogniser = server.services.voice
    server.services.voice = None  # as `voicegate serve --no-voice` runs
    try:
        pair(page, server)
        pending = server.run(server.gate.propose("asha", [NOTES[0]], risk=Risk.LOW))
        expect(approve_button(page, pending)).to_be_visible()
        expect(page.locator("#device-line")).to_contain_text("tap only")
        expect(page.locator("#device-line")).not_to_contain_text("voice)")
        expect(page.locator(f'[data-pending-id="{pending.id}"] button.speak')).to_have_count(0)
        expect(page.locator("#speak-help")).to_be_hidden()
        expect(page.locator("#teach-entry")).to_be_hidden()
    finally:
        server.services.voice = recogniser
    server.run(server.gate.cancel(pending.id, user="asha"))


def test_result_texts_never_contradict_the_transcript_shown(page: Any, server: Server) -> None:
    page.goto("/approve")
    lines = page.evaluate(
        """async () => {
          const { answerLines } = await import("/approve/texts.js");
          const said = (heard, reason, next_step) => answerLines(
            { heard, reason, next_step, released: false, decision: "refuse" }, "the request");
          const again = "Nothing clear was heard; say your answer again or tap.";
          return {
            no: said(["No"], "no_speech", again),
            dot: said(["."], "unclear", "Not heard clearly enough to act on; say it again or tap."),
            unsure: said(["Two."], "unclear", "Not heard clearly enough to act on; say it again."),
            silent: said(["."], "no_speech", again),
          };
        }"""
    )
    texts = {
        case: [line["text"] + line.get("heard", "") for line in got] for case, got in lines.items()
    }
    assert not any("No speech" in t or "Nothing was heard" in t for t in texts["no"]), texts
    assert not any(t.startswith("Heard:") for t in texts["dot"] + texts["silent"]), texts
    assert "No words were made out." in texts["dot"]
    # Too unsure to act on: shown as a guess, never as "Heard: Two." beside "Nothing ran."
    assert not any(t.startswith("Heard:") for t in texts["unsure"]), texts
    assert "Best guess: Two." in texts["unsure"], texts


def test_the_page_loads_without_a_console_error(page: Any) -> None:
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto("/approve")
    page.wait_for_load_state("networkidle")
    assert errors == [], errors  # the favicon, for one, is not asked for and missed
