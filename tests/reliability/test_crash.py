"""SIGKILL of a real gate process at every step of a confirm, then a restart on the same store.

Each case starts ``voicegate serve`` with the fault hook armed (``VOICEGATE_FAULT_POINT``) or with
an upstream that kills the gate from inside the call, confirms one write with a signed tap, and
watches the process die of SIGKILL. A second process then starts on the same database. Whatever
the point: the write ran at most once, a second confirm runs nothing, a receipt exists for the
set, and ``pending_status`` and the receipts tell the same, clear story.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.reliability.cluster import (
    Phone,
    pending_status,
    propose,
    ready,
    running,
    start,
)
from tests.reliability.counter import executions as executed
from voicegate.gate.core import INTERRUPTED
from voicegate.gate.receipts import verify_chain
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing
from voicegate.store import open_store

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Crash:
    """Where the gate dies, and what a restart must make of it."""

    fault: str | None  # the gate's own fault point
    kill_gate: str | None  # or the upstream kills the gate mid-call
    ran: int  # executions the upstream recorded
    status: str  # pending_status after the restart
    outcome: str  # the one receipt's outcome


CRASHES = [
    pytest.param(Crash("after_claim", None, 0, "unknown", "unknown"), id="before-nonce"),
    pytest.param(Crash("after_nonce", None, 0, "unknown", "unknown"), id="after-nonce"),
    pytest.param(Crash(None, "before_write", 0, "unknown", "unknown"), id="in-call-unwritten"),
    pytest.param(Crash(None, "after_write", 1, "unknown", "unknown"), id="in-call-written"),
    pytest.param(Crash("after_call", None, 1, "unknown", "unknown"), id="after-call"),
    pytest.param(Crash("after_receipt", None, 1, "confirmed", "executed"), id="after-receipt"),
    pytest.param(Crash("after_record", None, 1, "confirmed", "executed"), id="after-record"),
]


async def crash_then_restart(tmp_path: Path, db: str, keys: str, log: Path, crash: Crash) -> None:
    first = start(
        tmp_path,
        "doomed",
        db,
        keys=keys,
        executions=log,
        fault=crash.fault,
        kill_gate=crash.kill_gate,
    )
    phone = Phone()
    try:
        await ready(first)
        async with first.agent() as agent, httpx.AsyncClient(base_url=first.base) as http:
            pending_id = await propose(agent, "crash")
            await phone.pair(db, http)
            nonce = (await phone.nonces(http))[pending_id]
            with pytest.raises(httpx.TransportError):
                await phone.tap(pending_id, nonce).send(http)
        assert await first.killed() == -signal.SIGKILL, first.output()
    finally:
        first.stop()

    second = start(tmp_path, "restarted", db, keys=keys, executions=log)
    async with running(second), second.agent() as agent:
        async with httpx.AsyncClient(base_url=second.base) as http:
            again = await phone.tap(pending_id, nonce).send(http)
            assert again.status_code == 409 and again.json()["reason"] == Reason.NOT_OPEN
            listed = (await phone.signed("GET", "/device/receipts").send(http)).json()
        status = await pending_status(agent, pending_id)

    assert len(executed(log)) == crash.ran
    assert status["status"] == crash.status
    (receipt,) = [r for r in listed if r["pending_id"] == pending_id]
    assert receipt["outcome"] == crash.outcome
    assert status["receipt_id"] == receipt["id"]

    store = await open_store(db)
    try:
        chain = await store.receipts.list()
    finally:
        await store.close()
    assert [r.pending_id for r in chain] == [pending_id]
    assert verify_chain(chain, KeyRing(keys)) == []
    if crash.status == "unknown":
        # the reason is said to the agent and in the signed receipt
        assert status["error"] == chain[0].error == INTERRUPTED


@pytest.mark.parametrize("crash", CRASHES)
async def test_sigkill_at_any_step_of_a_confirm_never_runs_the_write_twice(
    tmp_path: Path, keys: str, executions: Path, crash: Crash
) -> None:
    await crash_then_restart(tmp_path, str(tmp_path / "gate.db"), keys, executions, crash)


@pytest.mark.postgres
@pytest.mark.parametrize("crash", [CRASHES[3], CRASHES[5]])
async def test_sigkill_on_postgres_never_runs_the_write_twice(
    tmp_path: Path, shared_pg: str, keys: str, executions: Path, crash: Crash
) -> None:
    await crash_then_restart(tmp_path, shared_pg, keys, executions, crash)
