"""The real app in-process, around a memory store, a moved clock, the notes upstream and a
fake recogniser (by default one that never hears anything); a signed voice device paired through
the API."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import numpy as np
import numpy.typing as npt
from fastapi import FastAPI

from tests.device.kit import SigningDevice, paired_device
from voicegate.clock import ManualClock
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy, parse_modes
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.observe import Events
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing, Secret
from voicegate.services import Services
from voicegate.settings import ServerConfig
from voicegate.store import open_store
from voicegate.store.base import Store
from voicegate.voice.calibration import Calibration
from voicegate.voice.fingerprint import ReplayGuard
from voicegate.voice.pipeline import VoicePipeline
from voicegate.voice.transcribe import FakeTranscriber, Heard, Hearing, Samples, Utterance
from voicegate.web.app import Assembly, build_app

T = TypeVar("T")
TOKEN = "security-suite-bearer-token-0123456789"
CLIENT = ("192.0.2.10", 50000)
WRITES = ("write_note", "delete_note")


@dataclass
class Deaf:
    """A recogniser that hears no speech in anything, and counts what reached it."""

    recogniser: str = "fake"
    model: str = "fake"
    calibration: Calibration = FakeTranscriber.calibration
    calls: list[Utterance] = field(default_factory=list)

    def transcribe(
        self,
        samples: Samples,
        *,
        languages: Sequence[str] = ("en",),
        candidates: Sequence[str] = (),
    ) -> Hearing:
        return self.transcribe_many([Utterance(samples, tuple(languages), tuple(candidates))])[0]

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        self.calls.extend(utterances)
        return [Hearing("", "en", 0.99, -3.0, refusal=Reason.NO_SPEECH) for _ in utterances]

    def frames(self, samples: Samples) -> npt.NDArray[np.float32]:
        """No features: it heard no speech to match."""
        return np.zeros((0, 0), dtype=np.float32)


@dataclass
class Eager(Deaf):
    """A recogniser that hears a clear "yes" in anything it is given.

    With it, whatever reaches the recogniser releases a one-card set: a hostile recording that is
    refused under it was refused before being heard, not for sounding like nothing.
    """

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        self.calls.extend(utterances)
        return [
            Hearing(
                "Yes.",
                "en",
                0.01,
                -0.1,
                scores=tuple((c, -0.1 if c == "yes" else -30.0) for c in u.candidates),
                hypotheses=(Heard("Yes.", "en", -0.1, "yes"),),
            )
            for u in utterances
        ]


@dataclass
class World:
    """One served gate and the handles a hostile-input test needs."""

    app: FastAPI
    http: httpx.AsyncClient
    store: Store
    clock: ManualClock
    recogniser: Deaf
    device: SigningDevice

    @property
    def assembly(self) -> Assembly:
        assembly: Assembly = self.app.state.voicegate
        return assembly

    @property
    def services(self) -> Services:
        return self.assembly.services

    @property
    def events(self) -> Events:
        return self.services.events

    async def writes_run(self) -> int:
        """How many writes the upstream has run, by its own count."""
        result = await self.assembly.pool.call_tool("stats", {})
        calls: dict[str, int] = (result.structured_content or {}).get("calls", {})
        return sum(calls.get(name, 0) for name in WRITES)

    async def mcp(
        self, method: str, params: dict[str, Any], *, session: str = ""
    ) -> httpx.Response:
        """One JSON-RPC request to ``/mcp`` with the bearer token."""
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
        }
        if session:
            headers["Mcp-Session-Id"] = session
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return await self.http.post("/mcp", json=body, headers=headers)


@asynccontextmanager
async def world(
    *, modes: str = "", voice: bool = True, recogniser: Deaf | None = None, **config_fields: Any
) -> AsyncIterator[World]:
    """The app with its lifespan running, and a voice device of user ``owner`` paired;
    ``config_fields`` change the ``ServerConfig``."""
    clock = ManualClock()
    store = await open_store("memory")
    recogniser = recogniser or Deaf()
    pipeline = VoicePipeline(recogniser, ReplayGuard(store.fingerprints, clock=clock))
    config = ServerConfig(token=Secret(TOKEN), keys=KeyRing.generate(), **config_fields)
    app = build_app(
        config,
        upstream=UpstreamSpec.in_process(build_notes_server()),
        policy=Policy(high_risk=("delete_*",), modes=parse_modes([modes] if modes else None)),
        store=store,
        voice=pipeline if voice else None,
        clock=clock,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=CLIENT)
        async with httpx.AsyncClient(transport=transport, base_url=config.base_url) as http:
            services: Services = app.state.voicegate.services
            device = await paired_device(http, services, clock, user=config.user)
            yield World(app, http, store, clock, recogniser, device)
    await store.close()


@asynccontextmanager
async def held(opened: AbstractAsyncContextManager[T]) -> AsyncIterator[T]:
    """Enter and leave ``opened`` in one task of its own, as a server would.

    The in-process upstream's task group must be left by the task that entered it, and a pytest
    fixture's set-up and tear-down may run in different tasks.
    """
    ready: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        async with opened as w:
            ready.set_result(w)
            await stop.wait()

    task = asyncio.create_task(hold())
    waiting: set[asyncio.Future[Any]] = {task, ready}
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        task.result()  # raises what went wrong while opening
    try:
        yield ready.result()
    finally:
        stop.set()
        await task


class Held(Deaf):
    """A recogniser that holds each call until the test lets it go (no sleeps: two events)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        self.entered.set()
        # A bound, so a broken test fails instead of hanging; it is never the expected path.
        self.release.wait(timeout=60)
        return super().transcribe_many(utterances)
