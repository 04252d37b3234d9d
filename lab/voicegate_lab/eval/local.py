"""The real app in this process for the eval and the benchmarks: notes upstream, devices over ASGI.

``in_process`` builds the app as ``voicegate serve`` does (``voicegate.web.app.build_app``) in
front of the demo notes server, runs its lifespan, and hands back a ``Harness`` whose phones
reach it over an ASGI transport. The eval measures decisions, so the app's budgets are lifted
(``eval_config``); everything else is the server's own code.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from voicegate.gate.quota import ProposalLimits
from voicegate.limits import PairingLimits, RateLimits
from voicegate.settings import ServerConfig
from voicegate_lab.eval.harness import READ_TOOL, WRITE_TOOL, BaseHarness, Sleep, notes_of

if TYPE_CHECKING:
    from fastapi import FastAPI

    from voicegate.store.base import Store
    from voicegate.voice.pipeline import VoicePipeline

VoiceFactory = Callable[["Store"], Any]
# Budgets no manifest reaches: the in-process eval decides every answer it uploads.
UNTHROTTLED = RateLimits(10**9, 10**9, 10**9, 10**9)
# The same for proposals: a refused answer leaves its set open until its deadline.
UNBOUNDED = ProposalLimits(open_per_user=10**9, per_agent=10**9)
# And for pairing: a benchmark pairs a hundred phones within one budget window.
UNPAIRED = PairingLimits(per_address=10**9, in_all=10**9)


class Harness(BaseHarness):
    """The real app in this process: its own store, notes upstream, one device per user."""

    def __init__(
        self,
        app: FastAPI,
        client: httpx.AsyncClient,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        assembly = app.state.voicegate
        services = assembly.services
        super().__init__(client, services.store, services.gate, clock=clock, sleep=sleep)
        self.app = app
        self.services = services
        self.pool = assembly.pool

    def phone(self, n: int) -> contextlib.AbstractAsyncContextManager[httpx.AsyncClient]:
        """Each user pairs from its own loopback address, as separate phones would, so the
        per-address guessing budget is not what limits a run."""
        transport = httpx.ASGITransport(app=self.app, client=(f"127.0.{n // 250}.{n % 250}", 5))
        return httpx.AsyncClient(transport=transport, base_url=self.client.base_url)

    async def notes(self) -> set[str]:
        """The notes of the in-process upstream, read through the app's upstream session."""
        result = await self.pool.call_tool(READ_TOOL, {})
        return notes_of(result.structured_content, result.content)


@contextlib.asynccontextmanager
async def in_process(
    make_voice: VoiceFactory,
    *,
    store: Store | None = None,
    config: ServerConfig | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Sleep = asyncio.sleep,
) -> AsyncIterator[Harness]:
    """The real app around ``store`` (a memory store of its own when None) and the notes
    upstream, lifespan and all.

    ``make_voice(store)`` builds the voice pipeline over the app's own store, so the replay
    guard remembers every upload of the run. ``config`` is ``eval_config()`` by default, which
    lifts the voice, answer and pairing budgets: a manifest of a hundred answers from one user
    must not come back ``rate_limited`` or ``too_many_open``. A ``store`` passed in stays open
    for its owner to close. ``clock`` is the server's and the phones' time; ``sleep`` waits out
    a spent budget.
    """
    from voicegate.mcp.notes import build_notes_server
    from voicegate.mcp.policy import Policy
    from voicegate.mcp.upstream import UpstreamSpec
    from voicegate.store import open_store
    from voicegate.web.app import build_app

    config = config or eval_config()
    owned = store is None
    used = await open_store("memory") if store is None else store
    try:
        app = build_app(
            config,
            upstream=UpstreamSpec.in_process(build_notes_server()),
            policy=Policy(writes=(WRITE_TOOL,)),
            store=used,
            voice=make_voice(used),
            clock=clock,
        )
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
            async with httpx.AsyncClient(transport=transport, base_url=config.base_url) as client:
                yield Harness(app, client, clock=clock, sleep=sleep)
    finally:
        if owned:
            await used.close()


def eval_config() -> ServerConfig:
    """The server's defaults with every budget lifted, and a fresh token and key ring."""
    return ServerConfig(rate_limits=UNTHROTTLED, proposal_limits=UNBOUNDED, pairing_limits=UNPAIRED)


def whisper_voice(model: str | None, langs: Sequence[str], device: str = "auto") -> VoiceFactory:
    """The server's own pipeline: faster-whisper from disk and the replay guard on the store."""

    def make(store: Store) -> VoicePipeline:
        from voicegate.web.serve import default_pipeline

        return default_pipeline(
            store.fingerprints,
            model=model,
            languages=langs,
            device=device,
            templates=store.templates,
        )

    return make
