"""What the browser tests share: a real uvicorn server with the gate, headless Chromium with a
fake microphone, a fresh page per test, and the checks every page gets (large targets, nothing
from another origin, no script errors).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tests.conftest import FIXTURES, ROOT, require
from tests.device.kit import Executed
from voicegate.device.pairing import start_pairing
from voicegate.domain import DeviceKind, HighRiskStep, PendingSet, Risk
from voicegate.errors import ModelError
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.limits import BUDGET_WINDOW
from voicegate.passkey import RelyingParty
from voicegate.secrets import KeyRing
from voicegate.services import Services
from voicegate.store import open_store

if TYPE_CHECKING:
    from voicegate.store.base import Store
    from voicegate.voice.pipeline import VoicePipeline

T = TypeVar("T")
CHROMIUM = Path("/usr/bin/chromium")
SPEECH = FIXTURES / "browser" / "the_second_one.wav"
# Refused on a choice card: a negation never picks anything.
REFUSED_SPEECH = FIXTURES / "clips" / "piper_not_two.flac"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
# Chromium's fake microphone plays its file from the start each time a recording opens it, and
# loops it. Each clip follows a second of quiet, so a recording that starts late by less than
# that (a slow, busy machine) still holds the whole clip once, and the loop's next start is quiet.
FAKE_LEAD_S = 1.0
FAKE_FILE_S = 3.5  # the lead, the longest clip (2.0 s) and a pause after it
# A recording as long as the fake microphone's file.
WHOLE_CLIP = f"?max_record_ms={int(FAKE_FILE_S * 1000)}"
WAIT_MS = 20_000
# WCAG 2.5.5 (AAA) target size, which the page promises for every control.
MIN_TARGET = 44
# Everything a user can press, type in or open.
ACTIONABLE = (
    "button:visible, a[href]:visible, input:visible, summary:visible, [role=button]:visible"
)
# The page's hold-to-talk threshold (HOLD_MS in recorder.js), plus room to spare.
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
# A microphone that says a new "word" each time it starts: a buzz gliding from a pitch 50 %
# above the last one's (far past the +-18 % rate change the replay guard still matches), up on
# the first six takes and down on the next six, so no take is a replay of another. Chromium's
# fake microphone restarts its file on every start instead.
# ``window.holdMicrophone = true`` holds the next start until ``startMicrophone()``.
VARIED_MICROPHONE = """
(() => {
  let count = 0;
  let release = null;
  window.holdMicrophone = false;
  window.startMicrophone = () => { if (release) release(); };
  navigator.mediaDevices.getUserMedia = async () => {
    if (window.holdMicrophone) await new Promise((resolve) => { release = resolve; });
    count += 1;
    const context = new AudioContext();
    const out = context.createMediaStreamDestination();
    const buzz = context.createOscillator();
    const level = context.createGain();
    const at = context.currentTime + 0.2;
    const pitch = 110 * Math.pow(1.5, count % 6);
    const glide = Math.floor(count / 6) % 2 === 0 ? 1.5 : 1 / 1.5;
    buzz.type = "sawtooth";
    buzz.frequency.setValueAtTime(pitch, at);
    buzz.frequency.linearRampToValueAtTime(pitch * glide, at + 0.5);
    level.gain.setValueAtTime(0, 0);
    level.gain.setValueAtTime(0, at);
    level.gain.linearRampToValueAtTime(0.3, at + 0.05);
    level.gain.setValueAtTime(0.3, at + 0.45);
    level.gain.linearRampToValueAtTime(0, at + 0.5);
    buzz.connect(level).connect(out);
    buzz.start();
    await context.resume();
    return out.stream;
  };
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

        from voicegate.device.enrol import enrol_router
        from voicegate.device.grants import grant_router
        from voicegate.device.passkeys import passkey_router
        from voicegate.device.push import push_router
        from voicegate.device.routes import device_router
        from voicegate.notify import vapid
        from voicegate.web.approve import approve_router

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.clock = ShiftedClock()
        self.executed = Executed()
        self.store = self.run(open_store("memory"))
        # Two listening sockets: the page's own port, and a second one whose pages are another
        # origin of the same RP id (localhost), as a look-alike copy of the page would be.
        self.sockets = [socket.socket(), socket.socket()]
        for s in self.sockets:
            s.bind(("127.0.0.1", 0))
        self.port, self.other_port = (s.getsockname()[1] for s in self.sockets)
        # The second step of every high-risk card; a test sets it as --high-risk-step would.
        self.step = HighRiskStep.YES
        self.gate = Gate(
            self.store,
            executor=self.executed,
            policy=GatePolicy(is_write=lambda tool: True, step_of=lambda tool: self.step),
            receipt_keys=KeyRing.generate(),
            clock=self.clock,
            relying_party=RelyingParty("localhost", (self.local_url,)),
        )
        # Push is offered (the page shows its toggle); nothing here sends a push.
        pipeline = voice_pipeline(self.store)
        self.services = Services(
            self.store,
            self.gate,
            pipeline,
            self.clock,
            push_key=vapid.public_key(vapid.generate()),
        )
        app = FastAPI()
        app.include_router(device_router(self.services))
        app.include_router(enrol_router(self.services))
        app.include_router(passkey_router(self.services))
        app.include_router(grant_router(self.services))
        app.include_router(push_router(self.services))
        app.include_router(approve_router(self.services))
        config = uvicorn.Config(app, log_level="warning")
        self.server = uvicorn.Server(config)

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=60)

    def start(self) -> None:
        self.serving = asyncio.run_coroutine_threadsafe(
            self.server.serve(sockets=self.sockets), self.loop
        )
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
        for s in self.sockets:
            s.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def local_url(self) -> str:
        """The page's address by name: passkeys (RP id ``localhost``) work only here."""
        return f"http://localhost:{self.port}"

    @property
    def other_url(self) -> str:
        """The same pages on another port: another origin with the same RP id."""
        return f"http://localhost:{self.other_port}"

    def code(self, user: str = "asha", kind: DeviceKind = DeviceKind.VOICE) -> str:
        keys = self.gate.receipt_keys
        return self.run(start_pairing(self.store, user, kind, keys=keys, clock=self.clock))

    def propose(self, n: int = 1, risk: Risk = Risk.LOW) -> PendingSet:
        return self.run(self.gate.propose("asha", NOTES[:n], risk=risk))


def voice_pipeline(store: Store) -> VoicePipeline | None:
    """The real recogniser pipeline (tiny.en on the CPU, replay guard and the users' taught
    answers on ``store``, as ``voicegate serve`` builds it), or None."""
    try:
        from voicegate.web.serve import default_pipeline

        return default_pipeline(
            store.fingerprints, model="tiny.en", device="cpu", templates=store.templates
        )
    except (ImportError, OSError, ValueError, RuntimeError, ModelError):
        return None


def launch(playwright: Any, microphone: Path) -> Any:
    """Headless Chromium whose fake microphone plays ``microphone`` (a WAV file) in a loop."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=chromium_args(microphone)
    )


def chromium_args(microphone: Path) -> list[str]:
    """Chromium's switches: headless, offline, and a fake microphone playing ``microphone``."""
    require(microphone.exists(), f"the fake microphone clip {microphone}")
    return [
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


@contextlib.contextmanager
def open_page(
    browser: Any, server: Server, scheme: str = "light", width: int = 420, url: str = ""
) -> Iterator[Any]:
    """A fresh page (its own storage) on ``server`` at ``url`` (its address by number when
    empty); on leaving, no errors and no other origin."""
    url = url or server.url
    context = browser.new_context(
        base_url=url, color_scheme=scheme, viewport={"width": width, "height": 860}
    )
    context.grant_permissions(["microphone"], origin=url)
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
    assert requested and all(_same_origin(r, url) for r in requested), requested


@contextlib.contextmanager
def open_profile(playwright: Any, profile: Path, microphone: Path, server: Any) -> Iterator[Any]:
    """A page of Chromium started on the lasting ``profile`` (its device key stays there across
    starts), its fake microphone playing ``microphone``; on leaving, no script errors."""
    context = playwright.chromium.launch_persistent_context(
        str(profile),
        executable_path=str(CHROMIUM),
        headless=True,
        args=chromium_args(microphone),
        base_url=server.url,
        viewport={"width": 420, "height": 860},
    )
    context.grant_permissions(["microphone"], origin=server.url)
    opened = context.pages[0] if context.pages else context.new_page()
    opened.set_default_timeout(30_000)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()
    assert errors == []


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


def pair(page: Any, server: Any, query: str = "", user: str | None = None) -> None:
    """Pair ``page`` with a fresh code, for ``user`` (the server's default one when None)."""
    # Every test pairs a fresh browser from 127.0.0.1: each starts a new pairing-budget window,
    # so the per-address budget (tests/device/test_pairing.py) does not cap how many tests run.
    server.clock.offset += BUDGET_WINDOW
    page.goto("/approve" + query)
    page.get_by_label("Pairing code").wait_for()
    assert_targets_are_large(page)
    page.get_by_label("Pairing code").fill(server.code() if user is None else server.code(user))
    page.get_by_role("button", name="Pair this device").click()
    page.locator("#cards-section").wait_for(state="visible")


def expect(locator: Any) -> Any:
    """Playwright's retrying assertions (they poll without evaluating strings under the CSP)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def result_box(page: Any, pending: PendingSet | None = None) -> Any:
    """The result region of ``pending``'s set (beside its buttons), else the last one that says
    anything."""
    if pending is not None:
        return page.locator(f'[data-pending-id="{pending.id}"] .set-result')
    return page.locator(".set-result:not(:empty)").last


def expect_success(page: Any, name: str, pending: PendingSet | None = None) -> None:
    """The page shows the released state for the card named ``name``, and no refusal."""
    result = result_box(page, pending)
    expect(result.locator(".ok")).to_have_text(f"Done: {name}.")
    expect(result).to_have_attribute("data-released", "true")
    expect(result).to_have_attribute("data-reason", "")
    expect(result.locator(".no")).to_have_count(0)


def approve_button(page: Any, pending: PendingSet, number: int = 1) -> Any:
    """The visible Approve button of card ``number`` of ``pending``."""
    return page.locator(f'[data-pending-id="{pending.id}"] button.approve[data-card="{number}"]')


def shot(page: Any, name: str, folder: Path = ARTIFACTS) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def fake_microphone(clip: Path, wav: Path) -> Path:
    """``clip`` as 16-bit WAV with silence around it, as Chromium's fake microphone plays it
    (``FAKE_LEAD_S``, ``FAKE_FILE_S``); record it with ``WHOLE_CLIP``."""
    import numpy as np
    import soundfile

    samples, rate = soundfile.read(clip, dtype="int16")
    before = np.zeros(int(FAKE_LEAD_S * rate), dtype=np.int16)
    assert len(before) + len(samples) < FAKE_FILE_S * rate, f"{clip.name} outlasts the file"
    after = np.zeros(max(0, int(FAKE_FILE_S * rate) - len(before) - len(samples)), dtype=np.int16)
    soundfile.write(wav, np.concatenate([before, samples, after]), rate, subtype="PCM_16")
    return wav
