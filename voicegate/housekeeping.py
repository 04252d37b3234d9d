"""Forgetting what the gate no longer needs: spent ledger keys past expiry, old fingerprints."""

from __future__ import annotations

import asyncio
import logging

from voicegate.errors import StoreUnavailable
from voicegate.gate.core import Gate
from voicegate.store.base import Store

logger = logging.getLogger(__name__)

FINGERPRINT_RETENTION = 30 * 24 * 3600.0  # 30 days, in seconds
INTERVAL = 300.0  # 5 minutes, in seconds: ledger rows are small, a slower sweep is fine


async def prune_once(store: Store, now: float, *, retention: float = FINGERPRINT_RETENTION) -> int:
    """Forget expired ledger keys and fingerprints older than ``retention``; how many went."""
    spent = await store.ledger.prune(now)
    old = await store.fingerprints.prune(now - retention)
    return spent + old


async def keep_tidy(
    gate: Gate,
    *,
    retention: float = FINGERPRINT_RETENTION,
    interval: float = INTERVAL,
    lease: float,
) -> None:
    """Every ``interval`` seconds until cancelled: prune, and settle releases past their lease.

    A store outage only waits for the next round.
    """
    while True:
        try:
            await prune_once(gate.store, gate.clock(), retention=retention)
            await gate.settle_interrupted(grace=lease)
        except StoreUnavailable as exc:
            logger.warning("housekeeping skipped: store unavailable (%s)", exc)
        await asyncio.sleep(interval)
