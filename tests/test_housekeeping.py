"""Housekeeping forgets spent ledger keys after expiry and fingerprints after retention."""

from __future__ import annotations

from voicegate.gate.types import StoredFingerprint
from voicegate.housekeeping import prune_once
from voicegate.store.memory import MemoryStore


async def test_expired_ledger_keys_and_old_fingerprints_are_forgotten():
    store = MemoryStore()
    assert await store.ledger.consume("old", expires_at=100.0)
    assert await store.ledger.consume("live", expires_at=10_000.0)
    await store.fingerprints.add(StoredFingerprint("f_old", "u1", 0.0, b"x"))
    await store.fingerprints.add(StoredFingerprint("f_new", "u1", 9_000.0, b"y"))
    assert await prune_once(store, 1_000.0, retention=500.0) == 2
    assert [f.id for f in await store.fingerprints.since("u1", 0.0)] == ["f_new"]
    assert not await store.ledger.consume("live", expires_at=10_000.0)
