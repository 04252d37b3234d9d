"""The /approve page in real headless Chromium against a real uvicorn server.

Pair with a code, see the exact card text, approve by tap and by keyboard, get a polite warning
at least 20 seconds before the deadline and more time with one key, and speak "the second one"
through Chromium's fake microphone. A refused spoken answer shows what was heard and what to say
instead; the "I use a switch" setting is remembered and taps are recorded as switch presses; a
hold released before the microphone starts still stops the recording. Every test also checks
that each control is at least 44x44 CSS pixels and that the page asks nothing of any other
origin. Screenshots go to test-artifacts/browser/.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import re
import socket
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.conftest import FIXTURES, ROOT, require
from tests.device.kit import Executed
from voicegate.device.pairing import BUDGET_WINDOW, start_pairing
from voicegate.gate.core import ActionRequest, Gate
from voicegate.gate.types import DeviceKind, PendingSet, Risk, Status
from voicegate.secrets import KeyRing
from voicegate.services import Services
from voicegate.store import open_store

pytestmark = pytest.mark.browser

T = TypeVar("T")
CHROMIUM = Path("/usr/bin/chromium")
SPEECH = FIXTURES / "browser" / "the_second_one.wav"
# Refused on a choice card: a negation never picks anything.
REFUSED_SPEECH = FIXTURES / "clips" / "piper_not_two.flac"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
WAIT_MS = 20_000
# WCAG 2.5.5 (AAA) target size, which the page promises for every control.
MIN_TARGET = 44
# Everything a user can press, type in or open.
ACTIONABLE = (
    "button:visible, a[href]:visible, input:visible, summary:visible, [role=button]:visible"
)
# The page's hold-to-talk threshold (HOLD_MS in approve.js), plus room to spare.
HOLD_MS = 600 + 300
# Holds getUserMedia back until the test calls ``startMicrophone()``: a slow microphone.
SLOW_MICROPHONE = """
(() => {
  const devices = navigator.mediaDevices;
  const real = devices.getUserMedia.bind(devices);
  let ready;
  const started = new Promise((resolve) => { ready = resolve; });
  window.startMicrophone = () => ready();
  devices.getUserMedia = async (constraints) => { await started; return real(constraints); };
})();
"""
NOTES = [
    ActionRequest("write_note", {"name": "shopping", "text": "milk"}),
    ActionRequest("write_note", {"name": "shopping", "text": "eggs"}),
]


class ShiftedClock:
    """Real time plus an offset the test can move forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


class Server:
    """uvicorn on a free port in its own thread and event loop, with the gate reachable."""

    def __init__(self) -> None:
        import uvicorn
        from fastapi import FastAPI

        from voicegate.device.routes import device_router
        from voicegate.web.approve import approve_router

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.clock = ShiftedClock()
        self.executed = Executed()
        self.store = self.run(open_store("memory"))
        self.gate = Gate(
            self.store,
            executor=self.executed,
            is_write=lambda tool: True,
            receipt_keys=KeyRing.generate(),
            clock=self.clock,
        )
        self.services = Services(self.store, self.gate, voice_pipeline(self.store), self.clock)
        app = FastAPI()
        app.include_router(device_router(self.services))
        app.include_router(approve_router(self.services))
        with contextlib.closing(socket.socket()) as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=60)

    def start(self) -> None:
        self.serving = asyncio.run_coroutine_threadsafe(self.server.serve(), self.loop)
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or self.serving.done():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)  # waiting for the server thread, not for the code under test

    def stop(self) -> None:
        self.server.should_exit = True
        self.serving.result(timeout=20)
        self.run(self.store.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def code(self, user: str = "asha", kind: DeviceKind = DeviceKind.VOICE) -> str:
        keys = self.gate.receipt_keys
        return self.run(start_pairing(self.store, user, kind, keys=keys, clock=self.clock))

    def propose(self, n: int = 1, risk: Risk = Risk.LOW) -> PendingSet:
        return self.run(self.gate.propose("asha", NOTES[:n], risk=risk))


def voice_pipeline(store: Any) -> Any:
    """The real recogniser pipeline (tiny.en on the CPU, replay guard on ``store``), or None."""
    try:
        from voicegate.voice.fingerprint import ReplayGuard
        from voicegate.voice.pipeline import VoicePipeline
        from voicegate.voice.whisper import FasterWhisperTranscriber

        transcriber = FasterWhisperTranscriber("tiny.en", device="cpu")
    except (ImportError, OSError, ValueError, RuntimeError):
        return None
    return VoicePipeline(transcriber, ReplayGuard(store.fingerprints))


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    require(CHROMIUM.exists(), "Debian chromium at /usr/bin/chromium")
    require(importlib.util.find_spec("playwright") is not None, "the playwright package")
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        yield p


def launch(playwright: Any, microphone: Path) -> Any:
    """Headless Chromium whose fake microphone plays ``microphone`` (a WAV file) in a loop."""
    require(microphone.exists(), f"the fake microphone clip {microphone}")
    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={microphone}",
    ]
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=args)


@pytest.fixture(scope="module")
def browser(playwright: Any) -> Iterator[Any]:
    launched = launch(playwright, SPEECH)
    yield launched
    launched.close()


@pytest.fixture
def page(browser: Any, server: Server, request: pytest.FixtureRequest) -> Iterator[Any]:
    scheme = "dark" if "dark" in request.node.name else "light"
    with open_page(browser, server, scheme) as opened:
        yield opened


@contextlib.contextmanager
def open_page(browser: Any, server: Server, scheme: str = "light") -> Iterator[Any]:
    """A fresh page (its own storage) on ``server``; on leaving, no errors and no other origin."""
    context = browser.new_context(
        base_url=server.url, color_scheme=scheme, viewport={"width": 420, "height": 860}
    )
    context.grant_permissions(["microphone"], origin=server.url)
    requested: list[str] = []
    context.on("request", lambda r: requested.append(r.url))
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()
    assert errors == []
    # No CDN, no fonts, no beacons: the page works with no internet at all.
    assert requested and all(_same_origin(url, server.url) for url in requested), requested


def _same_origin(url: str, origin: str) -> bool:
    # blob: and data: URLs are made in the page (recordings), and never leave the machine.
    return url.startswith((origin + "/", "blob:", "data:"))


def assert_targets_are_large(page: Any) -> None:
    """Every visible control is at least 44x44 CSS pixels."""
    targets = page.locator(ACTIONABLE).all()
    assert targets
    small = []
    for target in targets:
        box = target.bounding_box()
        if box is not None and (box["width"] < MIN_TARGET or box["height"] < MIN_TARGET):
            small.append((target.evaluate("e => e.outerHTML.slice(0, 80)"), box))
    assert small == []


def pair(page: Any, server: Server, query: str = "") -> None:
    # Every test pairs a fresh browser from 127.0.0.1: each starts a new pairing-budget window,
    # so the per-address budget (tests/device/test_pairing.py) does not cap how many tests run.
    server.clock.offset += BUDGET_WINDOW
    page.goto("/approve" + query)
    page.get_by_label("Pairing code").wait_for()
    assert_targets_are_large(page)
    page.get_by_label("Pairing code").fill(server.code())
    page.get_by_role("button", name="Pair this device").click()
    page.locator("#cards-section").wait_for(state="visible")


def expect(locator: Any) -> Any:
    """Playwright's retrying assertions (they poll without evaluating strings under the CSP)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def expect_success(page: Any, card_text: str) -> None:
    """The page shows the released state for ``card_text``, and no refusal."""
    result = page.locator("#result")
    expect(result.locator(".ok")).to_have_text(f"Done: {card_text}")
    expect(result).to_have_attribute("data-released", "true")
    expect(result).to_have_attribute("data-reason", "")
    expect(result.locator(".no")).to_have_count(0)


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_pair_see_the_card_and_tap_approve(page: Any, server: Server) -> None:
    pair(page, server)
    before = len(server.executed.calls)
    proposed = server.propose(1)
    card = page.locator(f'[data-pending-id="{proposed.id}"] button.card')
    card.wait_for()
    assert card.locator(".text").text_content() == proposed.actions[0].card_text
    assert card.locator(".text").inner_text() == proposed.actions[0].card_text
    assert_targets_are_large(page)
    shot(page, "01-card-waiting")
    card.click()
    expect_success(page, proposed.actions[0].card_text)
    assert server.executed.calls[before:] == [("write_note", {"name": "shopping", "text": "milk"})]
    shot(page, "02-approved-by-tap")


def test_high_risk_by_keyboard_alone_in_dark_mode(page: Any, server: Server) -> None:
    pair(page, server)
    before = len(server.executed.calls)
    proposed = server.propose(2, risk=Risk.HIGH)
    page.locator(f'[data-pending-id="{proposed.id}"] button.card').first.wait_for()
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
    page.locator(".set.final button.confirm").focus()
    page.keyboard.press("Enter")
    expect_success(page, proposed.actions[1].card_text)
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
    expect(page.locator("#result")).to_contain_text("More time given")
    new_deadline = float(article.get_attribute("data-deadline"))
    assert new_deadline > old_deadline + 60
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
    page.locator("#result .heard").wait_for(timeout=60_000)
    shot(page, "07-voice-answer")
    text = page.locator("#result").inner_text()
    assert "second" in text.lower()
    # Exactly this answer ran the second action: not an earlier test's write, not a refusal.
    expect_success(page, proposed.actions[1].card_text)
    assert server.executed.calls[before:] == [("write_note", {"name": "shopping", "text": "eggs"})]
    assert server.run(server.gate.status(proposed.id)).chosen == 2


def test_switch_setting_is_remembered_and_taps_are_recorded_as_switch(
    page: Any, server: Server
) -> None:
    pair(page, server)
    setting = page.get_by_role("button", name="I use a switch")
    expect(setting).to_have_attribute("aria-pressed", "false")
    assert setting.get_attribute("aria-describedby") == "switch-help"
    setting.click()
    expect(setting).to_have_attribute("aria-pressed", "true")
    page.reload()
    page.locator("#cards-section").wait_for(state="visible")
    expect(setting).to_have_attribute("aria-pressed", "true")
    assert_targets_are_large(page)
    proposed = server.propose(1)
    card = page.locator(f'[data-pending-id="{proposed.id}"] button.card')
    card.click()
    expect_success(page, proposed.actions[0].card_text)
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
    # What little was recorded went to the server, which answered; nothing ran.
    expect(page.locator("#result")).to_have_attribute("data-released", "false", timeout=60_000)
    assert server.executed.calls[before:] == []
    server.run(server.gate.cancel(proposed.id, user="asha"))


def test_a_refused_voice_answer_shows_what_was_heard_and_what_to_say(
    playwright: Any, server: Server, tmp_path: Path
) -> None:
    require(server.services.voice is not None, "the recogniser pipeline (voicegate.voice.pipeline)")
    microphone = fake_microphone(REFUSED_SPEECH, tmp_path / "not_two.wav")
    launched = launch(playwright, microphone)
    try:
        with open_page(launched, server) as page:
            pair(page, server, "?max_record_ms=2500")
            before = len(server.executed.calls)
            proposed = server.propose(2)
            page.locator(f'[data-pending-id="{proposed.id}"] button.speak').click()
            result = page.locator("#result")
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


def fake_microphone(clip: Path, wav: Path) -> Path:
    """``clip`` as 16-bit WAV with silence around it, as Chromium's fake microphone plays it."""
    import numpy as np
    import soundfile

    samples, rate = soundfile.read(clip, dtype="int16")
    before = np.zeros(int(0.35 * rate), dtype=np.int16)
    after = np.zeros(max(0, int(2.5 * rate) - len(before) - len(samples)), dtype=np.int16)
    soundfile.write(wav, np.concatenate([before, samples, after]), rate, subtype="PCM_16")
    return wav
