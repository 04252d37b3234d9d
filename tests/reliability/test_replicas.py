"""Two real ``voicegate serve`` processes on one PostgreSQL database behave as one gate.

Both replicas share the database, the signing keys and the bearer token, and nothing else: each
has its own memory, its own upstream process and its own port. The agent proposes on either,
the device answers on either, and the executions file counts what really ran.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.cluster import (
    Phone,
    Served,
    Signed,
    pending_status,
    propose,
    running,
    start,
)
from tests.reliability.counter import executions as executed
from voicegate.domain import Status
from voicegate.reasons import Reason
from voicegate.receipts import verify_chain
from voicegate.secrets import KeyRing
from voicegate.store import open_store

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SETS = 200
TAPS_PER_SET = 10
# Sets are proposed and raced in waves, so none waits near its 120-second deadline on a slow
# machine.
WAVES = 4
# Sets raced at once. Each fires all its taps together, half to each replica, so the losers reach
# the gate while the winner is still being released: 80 requests in flight, 40 per replica.
RACING_SETS = 8
# The share of sets whose winning tap was in flight together with a tap sent to the other
# replica (all of them on an idle machine; a busy one may let a few sets race on one side only).
CROSSED = 0.9
# Writes proposed through the agent's MCP endpoint at once, per replica.
PROPOSING = 4
# One phone answering 2,000 times in a minute is far past the default budgets; lifted here so
# that every confirm reaches the gate and races.
UNLIMITED = {"answers_per_device": 100_000, "answers_per_user": 100_000}

# uvicorn closes an idle keep-alive connection after 5 s; a client that reuses one just as it
# closes reads a reset. Dropping idle connections sooner than the server does avoids the race.
SHORT_KEEPALIVE = httpx.Limits(max_connections=RACING_SETS * TAPS_PER_SET, keepalive_expiry=2.0)


@dataclass(frozen=True, slots=True)
class Tap:
    """One confirm as the phone saw it: where it went, what came back, and when."""

    pending_id: str
    replica: str
    status: int
    reason: str
    sent: float
    answered: float

    def overlaps(self, other: Tap) -> bool:
        """Both were in flight at one moment."""
        return self.sent < other.answered and other.sent < self.answered


def crossed(taps: list[Tap]) -> bool:
    """The winner was in flight together with a tap on the other replica."""
    winner = next(t for t in taps if t.status == 200)
    return any(t.replica != winner.replica and t.overlaps(winner) for t in taps)


# The race proposes its 200 writes at once: no device budget and no proposal bound may refuse
# any of them, or it would measure the bounds instead of the exactly-once release.
UNBOUNDED: dict[str, Any] = {
    "rate_limits": UNLIMITED,
    "proposal_limits": {"open_per_user": 100_000, "per_agent": 100_000},
}


def replicas(tmp_path: Path, db: str, keys: str, log: Path) -> tuple[Served, Served]:
    """Two gate processes over ``db`` that share keys and token."""
    return (
        start(tmp_path, "replica-a", db, keys=keys, executions=log, **UNBOUNDED),
        start(tmp_path, "replica-b", db, keys=keys, executions=log, **UNBOUNDED),
    )


async def propose_many(served: Served, names: list[str]) -> list[str]:
    """Propose one write per name through ``served``'s MCP endpoint; the pending ids."""
    gate = asyncio.Semaphore(PROPOSING)
    async with served.agent() as agent:

        async def one(name: str) -> str:
            async with gate:
                return await propose(agent, name)

        return list(await asyncio.gather(*(one(n) for n in names)))


async def test_2000_racing_confirms_over_two_replicas_run_each_of_200_writes_once(
    tmp_path: Path, shared_pg: str, keys: str, executions: Path
) -> None:
    a, b = replicas(tmp_path, shared_pg, keys, executions)
    proposed: list[str] = []
    races: list[list[Tap]] = []
    async with (
        running(a, b),
        httpx.AsyncClient(base_url=a.base, timeout=60.0, limits=SHORT_KEEPALIVE) as http_a,
        httpx.AsyncClient(base_url=b.base, timeout=60.0, limits=SHORT_KEEPALIVE) as http_b,
    ):
        phone = Phone()
        await phone.pair(shared_pg, http_a, keys)
        gate = asyncio.Semaphore(RACING_SETS)
        to = {"a": http_a, "b": http_b}

        async def send(pending_id: str, replica: str, request: Signed) -> Tap:
            sent = time.monotonic()
            response = await request.send(to[replica])
            answered = time.monotonic()
            reason = "" if response.status_code == 200 else str(response.json()["reason"])
            return Tap(pending_id, replica, response.status_code, reason, sent, answered)

        async def race(pending_id: str, nonce: str) -> list[Tap]:
            async with gate:
                # Signed just before the race, so none waits past its signature window.
                signed = [phone.tap(pending_id, nonce) for _ in range(TAPS_PER_SET)]
                return list(
                    await asyncio.gather(
                        *(send(pending_id, "ab"[i % 2], s) for i, s in enumerate(signed))
                    )
                )

        for wave in range(WAVES):
            half = SETS // WAVES // 2
            from_a, from_b = await asyncio.gather(
                propose_many(a, [f"a{wave}-{i}" for i in range(half)]),
                propose_many(b, [f"b{wave}-{i}" for i in range(half)]),
            )
            batch = [*from_a, *from_b]
            proposed.extend(batch)
            # Sets proposed on either replica wait on both, under the same nonce.
            nonces = await phone.nonces(http_b)
            assert nonces == await phone.nonces(http_a)
            assert set(nonces) == set(batch)
            random.Random(wave).shuffle(batch)
            races.extend(await asyncio.gather(*(race(p, nonces[p]) for p in batch)))

    answers = [t for taps in races for t in taps]
    released = Counter(t.pending_id for t in answers if t.status == 200)
    assert len(answers) == SETS * TAPS_PER_SET
    assert released == Counter({p: 1 for p in proposed})
    refusals = Counter((t.status, t.reason) for t in answers if t.status != 200)
    # every loser is told the set was already decided; none is a server error
    assert set(refusals) == {(409, Reason.NOT_OPEN.value)}, refusals
    # The race was real: in most sets a loser on the other replica was in flight with the winner.
    raced = sum(crossed(taps) for taps in races)
    assert raced >= CROSSED * SETS, f"{raced} of {SETS} sets raced across replicas"
    # and each replica won some of the races
    assert {t.replica for t in answers if t.status == 200} == {"a", "b"}
    ran = Counter(e["name"] for e in executed(executions))
    assert len(ran) == SETS and set(ran.values()) == {1}

    store = await open_store(shared_pg)
    try:
        chain = await store.receipts.list()
        settled = [await store.pending.get(p) for p in proposed]
    finally:
        await store.close()
    assert len(chain) == SETS and {r.pending_id for r in chain} == set(proposed)
    assert {r.outcome for r in chain} == {"executed"}
    assert verify_chain(chain, KeyRing(keys)) == []
    assert all(s is not None and s.status is Status.CONFIRMED for s in settled)


async def test_what_one_replica_approves_or_spends_the_other_sees_as_done(
    tmp_path: Path, shared_pg: str, keys: str, executions: Path
) -> None:
    a, b = replicas(tmp_path, shared_pg, keys, executions)
    async with (
        running(a, b),
        a.agent() as agent_a,
        b.agent() as agent_b,
        httpx.AsyncClient(base_url=a.base, limits=SHORT_KEEPALIVE) as http_a,
        httpx.AsyncClient(base_url=b.base, limits=SHORT_KEEPALIVE) as http_b,
    ):
        phone = Phone()
        await phone.pair(shared_pg, http_b, keys)  # paired on b, used on a
        pending_id = await propose(agent_a, "shared")
        nonce = (await phone.nonces(http_b))[pending_id]

        # One signed request, sent to both: a takes it, b refuses it as a replay.
        tap = phone.tap(pending_id, nonce)
        assert (await tap.send(http_a)).status_code == 200
        replayed = await tap.send(http_b)
        assert replayed.status_code == 401
        assert replayed.json()["reason"] == Reason.REQUEST_REPLAYED

        # A fresh signature on the spent nonce releases nothing on b.
        again = await phone.tap(pending_id, nonce).send(http_b)
        assert again.status_code == 409 and again.json()["reason"] == Reason.NOT_OPEN

        # Approved on a, seen as done on b: by the agent, by the device list, in the receipts.
        status = await pending_status(agent_b, pending_id)
        assert status["status"] == "confirmed"
        assert status["result"]["structuredContent"] == {"written": "shared"}
        assert pending_id not in await phone.nonces(http_b)
        listed = (await phone.signed("GET", "/device/receipts").send(http_b)).json()
        assert [r["id"] for r in listed] == [status["receipt_id"]]

    assert [e["name"] for e in executed(executions)] == ["shared"]
