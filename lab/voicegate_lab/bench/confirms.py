"""Confirms through ``Gate.answer`` on a scratch store: the shared part of ``core`` and ``p5``.

A scratch store is the memory store, a SQLite file in a temporary folder, or a schema of its
own on PostgreSQL that is dropped afterwards. Every set holds one low-risk card, so one tap
(choose 1) releases it; the upstream is a counter that, in the racing workers, appends one
line per execution to a log file (O_APPEND, so lines from several processes never interleave).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voicegate.domain import (
    Decision,
    Device,
    DeviceKind,
    Evidence,
    InputKind,
    Modality,
    PendingSet,
    Risk,
)
from voicegate.errors import MissingExtra, StoreUnavailable
from voicegate.extras import need
from voicegate.gate.core import ActionRequest, Gate, GatePolicy, Outcome
from voicegate.reasons import Kind
from voicegate.secrets import KeyRing, generate_secret
from voicegate.store import open_store
from voicegate.store.base import Store

USER = "bench"
DEVICE = "dev_bench"
TOOL = "write_note"


class StoreMissing(Exception):
    """The backend cannot be reached here (PostgreSQL not running, or its driver missing)."""


def new_keys() -> str:
    """A fresh receipt key ring in its text form, to hand to worker processes."""
    return "k1:" + generate_secret().reveal().decode()


@contextlib.asynccontextmanager
async def scratch_url(backend: str, pg_dsn: str) -> AsyncIterator[str]:
    """A store URL for ``backend`` ("memory", "sqlite" or "postgres") that is gone afterwards."""
    if backend == "memory":
        yield "memory"
        return
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="voicegate-bench-") as folder:
            yield str(Path(folder) / "gate.db")
        return
    try:
        asyncpg = need("asyncpg", "the PostgreSQL benchmarks")
    except MissingExtra as exc:
        raise StoreMissing(str(exc)) from None
    schema = "vg_bench_" + secrets.token_hex(6)
    try:
        conn = await asyncpg.connect(pg_dsn, timeout=5)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreMissing(f"PostgreSQL not reachable: {type(exc).__name__}") from exc
    await conn.close()
    try:
        yield f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}schema={schema}"
    finally:
        conn = await asyncpg.connect(pg_dsn, timeout=5)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


class Counter:
    """The upstream: counts executions, and logs each to ``log`` when one is given."""

    def __init__(self, log: str | None = None) -> None:
        self.log = log
        self.calls = 0

    async def __call__(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        self.calls += 1
        if self.log is not None:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{os.getpid()} {arguments.get('name')}\n".encode())
            finally:
                os.close(fd)
        return {"ok": True}


def gate_over(store: Store, keys: str, executor: Counter) -> Gate:
    """A gate over ``store`` that treats every tool as a write, without proposal bounds.

    The bench opens thousands of sets for one user to measure confirms; the bounds an agent
    meets (``quota``) are not what it measures.
    """
    return Gate(
        store,
        executor=executor,
        policy=GatePolicy(is_write=lambda tool: True),
        receipt_keys=KeyRing(keys),
        limits=None,
    )


async def open_sets(gate: Gate, count: int) -> list[PendingSet]:
    """Register the bench device (once) and propose ``count`` one-card sets."""
    if await gate.store.devices.get(DEVICE) is None:
        device = Device(DEVICE, USER, DeviceKind.TAP, "unused", "ES256", gate.clock())
        await gate.store.devices.add(device)
    tag = secrets.token_hex(4)
    return [
        await gate.propose(USER, [ActionRequest(TOOL, {"name": f"{tag}-{i}"})], risk=Risk.LOW)
        for i in range(count)
    ]


def tap(gate: Gate, pending: PendingSet) -> Evidence:
    """A fresh tap choosing card 1 of ``pending``."""
    return Evidence(
        id="ev_" + secrets.token_hex(8),
        pending_id=pending.id,
        nonce=pending.nonce,
        device_id=DEVICE,
        user=USER,
        modality=Modality.TAP,
        input=InputKind.TOUCH,
        decision=Decision(Kind.CHOOSE, 1),
        created_at=gate.clock(),
    )


async def confirms_per_s(url: str, count: int, repetitions: int) -> float:
    """Median confirms per second, one after another, on the store at ``url``."""
    store = await open_store(url)
    try:
        gate = gate_over(store, new_keys(), Counter())
        rates = []
        for _ in range(repetitions + 1):  # the first round warms connections and caches
            sets = await open_sets(gate, count)
            start = time.perf_counter()
            for pending in sets:
                outcome = await gate.answer(tap(gate, pending))
                if not outcome.released:
                    raise RuntimeError(f"a confirm was refused: {outcome.reason}")
            rates.append(count / (time.perf_counter() - start))
        return round(sorted(rates[1:])[len(rates[1:]) // 2], 1)
    finally:
        await store.close()


async def race_worker(
    payload: Mapping[str, Any], go: Callable[[], Awaitable[None]]
) -> dict[str, Any]:
    """Answer every set in ``payload["sets"]`` ``payload["times"]`` times, all at once."""
    store = await open_store(payload["url"])
    # As a server's worker limit would, keep a bounded number of confirms in flight: a thousand
    # at once only queue for the pool's ten connections until its acquire timeout.
    slots = asyncio.Semaphore(payload["in_flight"])

    async def answer(gate: Gate, pending: PendingSet) -> Outcome | None:
        async with slots:
            try:
                return await gate.answer(tap(gate, pending))
            except StoreUnavailable:
                return None

    try:
        gate = gate_over(store, payload["keys"], Counter(payload["log"]))
        sets = [await gate.status(pending_id) for pending_id in payload["sets"]]
        await go()
        start = time.time()
        outcomes: Sequence[Outcome | None] = await asyncio.gather(
            *(answer(gate, p) for p in sets for _ in range(payload["times"]))
        )
        end = time.time()
    finally:
        await store.close()
    return {
        "released": sum(o is not None and o.released for o in outcomes),
        "unavailable": sum(o is None for o in outcomes),
        "start": start,
        "end": end,
    }
