"""The database goes away under a running gate: confirms fail closed, reads go on, it heals.

PostgreSQL: a private server the test starts itself is stopped mid-run and started again, once
before a confirm and once in the middle of one, after the upstream ran.
SQLite: another connection holds the file's write lock for a while.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import require
from tests.gate.helpers import ManualClock, Risk, Upstream, actions, evidence, make_gate, pair
from tests.reliability.cluster import Phone, data, pending_status, propose, running, start
from tests.reliability.counter import executions as executed
from tests.reliability.pgserver import PrivatePostgres, can_run
from voicegate.domain import Status
from voicegate.gate.backlog import Backlog
from voicegate.gate.core import UNRECORDED
from voicegate.reasons import Kind, Reason
from voicegate.receipts import verify_chain
from voicegate.store import open_store

pytestmark = pytest.mark.slow

LEDGER_UNAVAILABLE = Reason.LEDGER_UNAVAILABLE.value
# A pooled connection opened before the outage fails once after it; a few fresh requests
# (each a new signature) are enough for the pool to reconnect.
ATTEMPTS_AFTER_RECOVERY = 5


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    """A running PostgreSQL server of this test's own."""
    require(can_run(), "PostgreSQL server binaries (initdb, pg_ctl) and a user to run them")
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.remove()


async def confirm_once_healed(
    phone: Phone, http: httpx.AsyncClient, pending_id: str, nonce: str
) -> httpx.Response:
    """Tap until the gate answers with anything but ``ledger_unavailable``."""
    for _ in range(ATTEMPTS_AFTER_RECOVERY):
        response = await phone.tap(pending_id, nonce).send(http)
        if response.status_code != 503:
            return response
        assert response.json()["reason"] == LEDGER_UNAVAILABLE
    return response


@pytest.mark.postgres
async def test_postgres_down_fails_confirms_closed_keeps_reads_and_heals_when_it_returns(
    tmp_path: Path, private_pg: PrivatePostgres, keys: str, executions: Path
) -> None:
    served = start(tmp_path, "gate", private_pg.dsn, keys=keys, executions=executions)
    async with (
        running(served),
        served.agent() as agent,
        httpx.AsyncClient(base_url=served.base, timeout=60.0) as http,
    ):
        phone = Phone()
        await phone.pair(private_pg.dsn, http, keys)
        pending_id = await propose(agent, "through-the-outage")
        nonce = (await phone.nonces(http))[pending_id]

        private_pg.stop()
        refused = await phone.tap(pending_id, nonce).send(http)
        assert refused.status_code == 503
        assert refused.json()["reason"] == LEDGER_UNAVAILABLE
        listing = await phone.signed("GET", "/device/pending").send(http)
        assert listing.status_code == 503
        # Reads pass through; anything that needs the ledger says so, as a tool result.
        assert data(await agent.call_tool("list_notes", {})) == {"executions": 0}
        write = await agent.call_tool("write_note", {"name": "new", "text": "t"})
        status = await agent.call_tool("pending_status", {"pending_id": pending_id})
        for result in (write, status):
            assert result.is_error and data(result)["reason"] == LEDGER_UNAVAILABLE
        assert executed(executions) == []

        private_pg.start()
        healed = await confirm_once_healed(phone, http, pending_id, nonce)
        assert healed.status_code == 200, healed.text
        assert (await pending_status(agent, pending_id))["status"] == "confirmed"

    assert [e["name"] for e in executed(executions)] == ["through-the-outage"]


@pytest.mark.postgres
async def test_postgres_lost_after_the_upstream_ran_answers_unrecorded_and_writes_the_receipt_later(
    private_pg: PrivatePostgres,
) -> None:
    store = await open_store(private_pg.dsn)
    clock, upstream = ManualClock(), Upstream()

    async def runs_then_loses_the_database(tool: str, arguments: Mapping[str, Any]) -> Any:
        result = await upstream(tool, arguments)
        await asyncio.to_thread(private_pg.stop)
        return result

    gate = make_gate(store, clock, upstream)
    gate.executor = runs_then_loses_the_database
    # Short real waits: the backlog retries against a real server that is starting again.
    gate.backlog = Backlog(delays=(0.05, 0.2))
    try:
        device = await pair(store)
        pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
        outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
        assert outcome.released and outcome.reason is Reason.OUTCOME_UNRECORDED
        assert outcome.receipt is None and len(upstream.calls) == 1
        seen = await gate.status(pending.id)
        assert seen.status is Status.CONFIRMED and seen.error == UNRECORDED

        await asyncio.to_thread(private_pg.start)
        await asyncio.wait_for(gate.backlog.wait(), timeout=60)
        (receipt,) = await store.receipts.list("u1")
        recorded = await gate.status(pending.id)
        assert (receipt.outcome, receipt.pending_id) == ("executed", pending.id)
        assert recorded.status is Status.CONFIRMED and recorded.receipt_id == receipt.id
        assert verify_chain([receipt], gate.receipt_keys) == []
        again = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
        assert again.reason is Reason.NOT_OPEN
        assert await gate.settle_interrupted() == 0
        assert len(upstream.calls) == 1
    finally:
        gate.backlog.close()
        await store.close()


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Hold the SQLite file's write lock from another connection for the block."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


async def test_locked_sqlite_file_fails_confirms_closed_and_heals_when_released(
    tmp_path: Path, keys: str, executions: Path
) -> None:
    db = tmp_path / "gate.db"
    served = start(tmp_path, "gate", str(db), keys=keys, executions=executions)
    async with (
        running(served),
        served.agent() as agent,
        httpx.AsyncClient(base_url=served.base, timeout=60.0) as http,
    ):
        phone = Phone()
        await phone.pair(str(db), http, keys)
        pending_id = await propose(agent, "behind-the-lock")
        nonce = (await phone.nonces(http))[pending_id]

        with write_locked(db):
            # The gate waits out its busy timeout, then refuses; nothing runs.
            refused = await phone.tap(pending_id, nonce).send(http)
            assert refused.status_code == 503
            assert refused.json()["reason"] == LEDGER_UNAVAILABLE
            assert data(await agent.call_tool("list_notes", {})) == {"executions": 0}
            assert executed(executions) == []

        healed = await phone.tap(pending_id, nonce).send(http)
        assert healed.status_code == 200, healed.text
        assert (await pending_status(agent, pending_id))["status"] == "confirmed"

    assert [e["name"] for e in executed(executions)] == ["behind-the-lock"]
