"""SIGKILL of a real gate process at every step of a confirm, then a restart on the same store.

Each step starts ``voicegate serve`` with the fault hook armed (``VOICEGATE_FAULT_POINT``) or with
an upstream that kills the gate from inside the call, confirms one write with a signed tap, and
watches the process die of SIGKILL. The next process starts on the same database (armed for the
next point, so one series of restarts covers every point with one process start each) and first
checks the set the last one left behind: the write ran at most once, a second confirm runs
nothing, the set has exactly one receipt, and ``pending_status`` and the receipts tell the same,
clear story. At the end the whole receipt chain, written across all the crashes, verifies.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.reliability.cluster import (
    Phone,
    pending_status,
    propose,
    ready,
    start,
)
from tests.reliability.counter import executions as executed
from voicegate.gate.core import MAY_HAVE_RUN, NEVER_RAN
from voicegate.gate.receipts import verify_chain
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing
from voicegate.store import open_store

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Crash:
    """Where the gate dies, and what a restart must make of it."""

    name: str
    fault: str | None  # the gate's own fault point
    kill_gate: str | None  # or the upstream kills the gate mid-call
    ran: int  # executions the upstream recorded
    status: str  # pending_status after the restart
    outcome: str  # the one receipt's outcome
    error: str | None  # why, as the receipt and pending_status tell it


# Once the nonce is spent nobody can tell from the store whether the upstream ran, so from
# there on a crash before the receipt settles as "may have run", never as "nothing ran".
CRASHES = [
    Crash("before-nonce", "after_claim", None, 0, "failed", "not_run", NEVER_RAN),
    Crash("after-nonce", "after_nonce", None, 0, "unknown", "unknown", MAY_HAVE_RUN),
    Crash("in-call-unwritten", None, "before_write", 0, "unknown", "unknown", MAY_HAVE_RUN),
    Crash("in-call-written", None, "after_write", 1, "unknown", "unknown", MAY_HAVE_RUN),
    Crash("after-call", "after_call", None, 1, "unknown", "unknown", MAY_HAVE_RUN),
    Crash("after-receipt", "after_receipt", None, 1, "confirmed", "executed", None),
    Crash("after-record", "after_record", None, 1, "confirmed", "executed", None),
]


@dataclass(frozen=True)
class Left:
    """A set a killed process left behind."""

    crash: Crash
    pending_id: str
    nonce: str


async def crash_series(tmp_path: Path, db: str, keys: str, log: Path, crashes: list[Crash]) -> None:
    """Crash once at each of ``crashes``, checking after each restart what the last one left."""
    phone = Phone()
    left: list[Left] = []
    for crash in [*crashes, None]:
        served = start(
            tmp_path,
            crash.name if crash else "last",
            db,
            keys=keys,
            executions=log,
            fault=crash.fault if crash else None,
            kill_gate=crash.kill_gate if crash else None,
        )
        try:
            await ready(served)
            async with served.agent() as agent, httpx.AsyncClient(base_url=served.base) as http:
                if not left:
                    await phone.pair(db, http, keys)
                else:
                    await check_settled(left[-1], phone, agent, http, log)
                if crash is None:
                    break
                pending_id = await propose(agent, crash.name)
                nonce = (await phone.nonces(http))[pending_id]
                with pytest.raises(httpx.TransportError):
                    await phone.tap(pending_id, nonce).send(http)
                left.append(Left(crash, pending_id, nonce))
            assert await served.killed() == -signal.SIGKILL, (crash.name, served.output())
        finally:
            served.stop()

    store = await open_store(db)
    try:
        chain = await store.receipts.list()
    finally:
        await store.close()
    # one receipt per crashed set, in crash order, and the chain holds across every restart
    assert [r.pending_id for r in chain] == [gone.pending_id for gone in left]
    assert verify_chain(chain, KeyRing(keys)) == []
    for gone, receipt in zip(left, chain, strict=True):
        assert receipt.error == gone.crash.error, gone.crash.name


async def check_settled(
    gone: Left, phone: Phone, agent: Client, http: httpx.AsyncClient, log: Path
) -> None:
    """What a restart must make of the set a killed process left behind."""
    crash = gone.crash
    again = await phone.tap(gone.pending_id, gone.nonce).send(http)
    assert again.status_code == 409, (crash.name, again.text)
    assert again.json()["reason"] == Reason.NOT_OPEN
    assert [e["name"] for e in executed(log)].count(crash.name) == crash.ran, crash.name

    status = await pending_status(agent, gone.pending_id)
    assert status["status"] == crash.status, (crash.name, status)
    listed = (await phone.signed("GET", "/device/receipts").send(http)).json()
    (receipt,) = [r for r in listed if r["pending_id"] == gone.pending_id]
    assert receipt["outcome"] == crash.outcome, crash.name
    assert status["receipt_id"] == receipt["id"]
    assert status.get("error") == crash.error, crash.name  # the agent is told why


async def test_sigkill_at_every_step_of_a_confirm_never_runs_a_write_twice(
    tmp_path: Path, keys: str, executions: Path
) -> None:
    await crash_series(tmp_path, str(tmp_path / "gate.db"), keys, executions, CRASHES)


@pytest.mark.postgres
async def test_sigkill_mid_call_and_after_the_receipt_on_postgres_never_runs_twice(
    tmp_path: Path, shared_pg: str, keys: str, executions: Path
) -> None:
    await crash_series(tmp_path, shared_pg, keys, executions, [CRASHES[3], CRASHES[5]])
