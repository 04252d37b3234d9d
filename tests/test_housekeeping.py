"""Housekeeping forgets spent ledger keys after expiry, fingerprints and sets after retention."""

from __future__ import annotations

from tests.store.test_contract import pending
from voicegate.domain import Status, StoredFingerprint
from voicegate.housekeeping import prune_once
from voicegate.store.memory import MemoryStore


async def test_expired_ledger_keys_and_old_fingerprints_are_forgotten() -> None:
    store = MemoryStore()
    assert await store.ledger.consume("old", expires_at=100.0)
    assert await store.ledger.consume("live", expires_at=10_000.0)
    await store.fingerprints.add(StoredFingerprint("f_old", "u1", 0.0, b"x"))
    await store.fingerprints.add(StoredFingerprint("f_new", "u1", 9_000.0, b"y"))
    assert await prune_once(store, 1_000.0, retention=500.0, set_retention=500.0) == 2
    assert [f.id for f in await store.fingerprints.since("u1", 0.0)] == ["f_new"]
    assert not await store.ledger.consume("live", expires_at=10_000.0)


async def test_closed_sets_and_their_cards_are_deleted_after_the_retention() -> None:
    store = MemoryStore()
    await store.pending.create(pending("old", created_at=100.0, status=Status.CONFIRMED))
    await store.pending.create(pending("running", created_at=100.0, status=Status.EXECUTING))
    await store.pending.create(pending("recent", created_at=900.0, status=Status.CANCELLED))
    assert await prune_once(store, 1_000.0, retention=500.0, set_retention=500.0) == 1
    assert await store.pending.get("old") is None
    running = await store.pending.get("running")
    assert running is not None and running.status is Status.EXECUTING
    assert await store.pending.get("recent") is not None
