"""The whole served app in a thread for the browser tests: the agent's MCP endpoint, the
device API (answers and personal answers) and the approve page, gating the notes server, with
the real recogniser and the users' taught answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from tests.browser.kit import ShiftedClock, voice_pipeline
from tests.mcp.harness import TOKEN, agent_at, data
from voicegate.device.pairing import start_pairing
from voicegate.domain import DeviceKind
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.secrets import KeyRing, Secret
from voicegate.settings import ServerConfig
from voicegate.store import open_store

T = TypeVar("T")


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
        self.assembly = app.state.voicegate
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
