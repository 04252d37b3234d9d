"""SIGKILL of a real gate process at every step of a confirm, then a restart on the same store.

Each step starts ``voicegate serve`` with its step hook armed to SIGKILL it at one step (through
the crash tests' entry, ``tests/reliability/crashing.py``) or with an upstream that kills the
gate from inside the call, confirms one write with a signed tap, and watches the process die
of SIGKILL. The next process starts on the same database (armed for the
next point, so one series of restarts covers every point with one process start each) and first
checks the set the last one left behind: the write ran at most once, a second confirm runs
nothing, the set has exactly one receipt, and ``pending_status`` and the receipts tell the same,
clear story. At the end the whole receipt chain, written across all the crashes, verifies.

A granted call (a write that fits a grant the user made, run at once) gets the same series: the
gate dies after the grant's use is spent and before its write is claimed, in the upstream call,
and after its receipt. Each use is spent once, the write runs at most once, what was claimed
settles as a card's release would, and the next fitting call gets the next count.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.reliability.cluster import (
    Phone,
    Served,
    data,
    pending_status,
    propose,
    ready,
    start,
)
from tests.reliability.counter import executions as executed
from voicegate.faults import GRANT_SPENT
from voicegate.gate.core import MAY_HAVE_RUN, NEVER_RAN
from voicegate.reasons import Reason
from voicegate.receipts import verify_chain
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
    status: str | None  # pending_status after the restart; None: nothing was claimed
    outcome: str | None  # the one receipt's outcome; None: there is no receipt
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
# A granted call has no card: a crash once its use is spent and before its write is claimed
# loses that use and runs nothing (never the same count handed out again); from the claim on it
# is the release a token or a card gets, and settles the same way.
GRANTED = [
    Crash("granted-after-spend", GRANT_SPENT, None, 0, None, None, None),
    Crash("granted-in-call-unwritten", None, "before_write", 0, "unknown", "unknown", MAY_HAVE_RUN),
    Crash("granted-in-call-written", None, "after_write", 1, "unknown", "unknown", MAY_HAVE_RUN),
    Crash("granted-after-receipt", "after_receipt", None, 1, "confirmed", "executed", None),
]
# The one write every granted call repeats (a grant keeps every argument fixed by default).
NOTE = {"name": "granted", "text": "t"}


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


async def granted_series(
    tmp_path: Path, db: str, keys: str, log: Path, crashes: list[Crash]
) -> None:
    """Make a grant of one use per crash and one more, crash a granted call at each of
    ``crashes``, and check after each restart what the last one left; the last use then runs."""
    phone = Phone()
    uses = len(crashes) + 1
    ran = 0  # writes of NOTE the upstream must have recorded so far
    seen: set[str] = set()  # receipts already accounted for
    left: Crash | None = None  # what the last process died of
    # The first process makes the grant and ends cleanly; each next one checks what the one
    # before left, and (but the last) dies in a granted call.
    for step, crash in enumerate([None, *crashes, None]):
        served = start(
            tmp_path,
            crash.name if crash else f"granted-{step}",
            db,
            keys=keys,
            executions=log,
            fault=crash.fault if crash else None,
            kill_gate=crash.kill_gate if crash else None,
        )
        try:
            await ready(served)
            async with served.agent() as agent, httpx.AsyncClient(base_url=served.base) as http:
                if step == 0:
                    await phone.pair(db, http, keys)
                    await make_grant(phone, agent, http, uses=uses)
                    ran += 1
                    seen.update(r["id"] for r in await receipts(phone, http))
                if left is not None:
                    ran += left.ran
                    await check_granted(left, phone, agent, http, log, ran, seen)
                if step > 0:
                    assert (await live_grant(phone, http))["uses_left"] == uses - (step - 1)
                if crash is None:
                    if step > 0:
                        await last_use(phone, agent, http, log, ran)
                    continue
                await call_until_killed(served)
                left = crash
            assert await served.killed() == -signal.SIGKILL, (crash.name, served.output())
        finally:
            served.stop()

    store = await open_store(db)
    try:
        chain = await store.receipts.list()
    finally:
        await store.close()
    assert verify_chain(chain, KeyRing(keys)) == []
    # The card that made the grant, then one receipt per claimed granted call, and the last use.
    claimed = [c for c in crashes if c.status is not None]
    assert [r.mode for r in chain] == ["device"] + ["grant"] * (len(claimed) + 1)
    assert [r.error for r in chain[1:]] == [c.error for c in claimed] + [None]


async def call_until_killed(served: Served) -> None:
    """A fitting call on a session of its own, which the gate dies under: it never answers."""
    died = False
    try:
        async with served.agent() as agent:
            await agent.call_tool("write_note", NOTE)
    except* (httpx2.TransportError, MCPError):  # the SDK's transport runs on httpx2
        died = True
    assert died, served.name


async def make_grant(phone: Phone, agent: Client, http: httpx.AsyncClient, *, uses: int) -> None:
    """The user's signed yes to ``NOTE``'s card, allowing the same ``uses`` more times."""
    reply = data(await agent.call_tool("write_note", NOTE))
    pending_id = str(reply["pending_id"])
    nonce = (await phone.nonces(http))[pending_id]
    body = {"pending_id": pending_id, "nonce": nonce, "decision": "confirm"}
    tapped = await phone.signed(
        "POST", "/device/tap", {**body, "grant": {"minutes": 10, "uses": uses}}
    ).send(http)
    assert tapped.status_code == 200, tapped.text
    assert tapped.json()["grant"]["uses_left"] == uses


async def live_grant(phone: Phone, http: httpx.AsyncClient) -> dict[str, Any]:
    """The one live grant, as the user's page lists it."""
    listed = (await phone.signed("GET", "/device/grants").send(http)).json()
    (grant,) = listed["grants"]
    return dict(grant)


async def receipts(phone: Phone, http: httpx.AsyncClient) -> list[dict[str, Any]]:
    """The user's receipts, as the page lists them."""
    return list((await phone.signed("GET", "/device/receipts").send(http)).json())


async def check_granted(
    gone: Crash,
    phone: Phone,
    agent: Client,
    http: httpx.AsyncClient,
    log: Path,
    ran: int,
    seen: set[str],
) -> None:
    """What a restart must make of a granted call a killed process left behind."""
    assert [e["name"] for e in executed(log)].count(NOTE["name"]) == ran, gone.name
    listed = await receipts(phone, http)
    new = [r for r in listed if r["id"] not in seen]
    seen.update(r["id"] for r in listed)
    if gone.status is None:
        assert new == [], gone.name  # nothing was claimed, so nothing settles
        return
    (receipt,) = new
    assert receipt["outcome"] == gone.outcome, gone.name
    status = await pending_status(agent, receipt["pending_id"])
    assert status["status"] == gone.status, (gone.name, status)
    assert status["receipt_id"] == receipt["id"]
    assert status.get("error") == gone.error, gone.name


async def last_use(
    phone: Phone, agent: Client, http: httpx.AsyncClient, log: Path, ran: int
) -> None:
    """The grant's last use runs at once and says so; the call after it is a card again."""
    last = await agent.call_tool("write_note", NOTE)
    assert not last.is_error and last.meta is not None, last
    assert last.meta["voicegate/grant"]["uses_left"] == 0
    assert [e["name"] for e in executed(log)].count(NOTE["name"]) == ran + 1
    assert (await phone.signed("GET", "/device/grants").send(http)).json()["grants"] == []
    past = data(await agent.call_tool("write_note", NOTE))
    assert past["status"] == "pending_user_confirmation"


async def test_sigkill_at_every_step_of_a_confirm_never_runs_a_write_twice(
    tmp_path: Path, keys: str, executions: Path
) -> None:
    await crash_series(tmp_path, str(tmp_path / "gate.db"), keys, executions, CRASHES)


async def test_sigkill_during_a_granted_call_spends_its_use_once_and_never_runs_it_twice(
    tmp_path: Path, keys: str, executions: Path
) -> None:
    await granted_series(tmp_path, str(tmp_path / "gate.db"), keys, executions, GRANTED)


@pytest.mark.postgres
async def test_sigkill_mid_call_and_after_the_receipt_on_postgres_never_runs_twice(
    tmp_path: Path, shared_pg: str, keys: str, executions: Path
) -> None:
    await crash_series(tmp_path, shared_pg, keys, executions, [CRASHES[3], CRASHES[5]])


@pytest.mark.postgres
async def test_sigkill_during_a_granted_call_on_postgres_spends_its_use_once(
    tmp_path: Path, shared_pg: str, keys: str, executions: Path
) -> None:
    # The spend is PostgreSQL's conditional UPDATE here; after it, in the call, after the receipt.
    crashes = [GRANTED[0], GRANTED[2], GRANTED[3]]
    await granted_series(tmp_path, shared_pg, keys, executions, crashes)
