"""``choose_one`` end to end: an SDK agent offers three writes over the real MCP endpoint, the
user says "the second one" into the approve page's fake microphone, and exactly option 2 runs.

The whole served app (``build_app``), the notes server as its upstream, the real recogniser and
a real Chromium: nothing between the agent's call and the upstream's write is a stand-in.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from tests.browser.kit import ShiftedClock, expect_success, pair, voice_pipeline
from tests.conftest import require
from tests.mcp.harness import TOKEN, agent_at, data
from voicegate.device.pairing import start_pairing
from voicegate.gate.types import DeviceKind
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.secrets import KeyRing, Secret
from voicegate.settings import ServerConfig
from voicegate.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.whisper, pytest.mark.slow]

T = TypeVar("T")
OFFER = {
    "question": "Which day should I note the swim for?",
    "options": [
        {"tool": "write_note", "arguments": {"name": "monday", "text": "swim"}},
        {"tool": "write_note", "arguments": {"name": "tuesday", "text": "swim"}},
        {"tool": "write_note", "arguments": {"name": "wednesday", "text": "swim"}},
    ],
}


class Served:
    """The whole gate (agent endpoint, device API, approve page) on a free port, in a thread."""

    def __init__(self) -> None:
        import uvicorn

        from voicegate.web.app import build_app

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.clock = ShiftedClock()
        self.store = self.run(open_store("memory"))
        self.voice = voice_pipeline(self.store)
        with contextlib.closing(socket.socket()) as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.config = ServerConfig(port=self.port, token=Secret(TOKEN), keys=KeyRing.generate())
        app = build_app(
            self.config,
            upstream=UpstreamSpec.in_process(build_notes_server()),
            policy=Policy(high_risk=("delete_*",)),
            store=self.store,
            voice=self.voice,
            clock=self.clock,
        )
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.serving = asyncio.run_coroutine_threadsafe(self.server.serve(), self.loop)
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or self.serving.done():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)  # waiting for the server thread, not for the code under test

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=120)

    def code(self) -> str:
        keys, user = self.config.signing_keys(), self.config.user
        pairing = start_pairing(self.store, user, DeviceKind.VOICE, keys=keys, clock=self.clock)
        return self.run(pairing)

    def agent(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tool call from a fresh MCP SDK client over Streamable HTTP."""

        async def call() -> dict[str, Any]:
            async with agent_at(self.url) as client:
                return data(await client.call_tool(tool, arguments))

        return self.run(call())

    def stop(self) -> None:
        self.server.should_exit = True
        self.serving.result(timeout=30)
        self.run(self.store.close())
        self.run(_cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


async def _cancel_the_rest() -> None:
    """Stream watchers the server left behind end before their loop stops."""
    rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    running = Served()
    yield running
    running.stop()


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
        page.locator("#result .heard").wait_for(timeout=90_000)
        assert "second" in page.locator("#result").inner_text().lower()
        expect_success(page, "write_note 'tuesday'")

        status = served.agent("pending_status", {"pending_id": pending["pending_id"]})
        assert (status["status"], status["chosen"]) == ("confirmed", 2)
        assert served.agent("list_notes", {}) == {"notes": {"tuesday": "swim"}}
        calls = served.agent("stats", {})["calls"]
        assert calls.get("write_note") == 1 and "delete_note" not in calls
    finally:
        context.close()
