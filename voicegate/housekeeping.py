"""Forgetting what the gate no longer needs: spent ledger keys past expiry, old fingerprints,
pending sets (with their cards) older than the retention, and grants that ended as long ago.

A set's receipt keeps what was shown and what ran, so the set itself is only needed while it
can still be answered or settled; ``executing`` sets are never deleted.
"""

from __future__ import annotations

import asyncio
import logging

from voicegate.errors import StoreUnavailable
from voicegate.gate.core import Gate
from voicegate.store.base import Store

logger = logging.getLogger(__name__)

FINGERPRINT_RETENTION = 30 * 24 * 3600.0  # 30 days, in seconds
# Closed sets are kept as long as fingerprints: the longest any part of the gate looks back.
# A waiting set is long past its deadline by then (2 minutes, at most 10 extensions).
SET_RETENTION = FINGERPRINT_RETENTION
INTERVAL = 300.0  # 5 minutes, in seconds: ledger rows are small, a slower sweep is fine


async def prune_once(
    store: Store,
    now: float,
    *,
    retention: float = FINGERPRINT_RETENTION,
    set_retention: float = SET_RETENTION,
) -> int:
    """Forget expired ledger keys, fingerprints older than ``retention``, sets older than
    ``set_retention`` (except ``executing`` ones) and grants that expired or ended as long ago
    (the receipts of their uses keep what each was); how many went."""
    spent = await store.ledger.prune(now)
    old = await store.fingerprints.prune(now - retention)
    sets = await store.pending.prune(now - set_retention)
    grants = await store.grants.prune(now - set_retention)
    return spent + old + sets + grants


async def keep_tidy(
    gate: Gate,
    *,
    retention: float = FINGERPRINT_RETENTION,
    set_retention: float = SET_RETENTION,
    interval: float = INTERVAL,
    lease: float,
) -> None:
    """Every ``interval`` seconds until cancelled: prune, and settle releases past their lease.

    A store outage only waits for the next round.
    """
    while True:
        try:
            await prune_once(
                gate.store, gate.clock(), retention=retention, set_retention=set_retention
            )
            await gate.settle_interrupted(grace=lease)
        except StoreUnavailable as exc:
            logger.warning("housekeeping skipped: store unavailable (%s)", exc)
        await asyncio.sleep(interval)
