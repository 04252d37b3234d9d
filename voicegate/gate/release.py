"""Releasing a write, once: claim the set, spend its key, call the upstream, leave a receipt.

The order is fixed: claim the set by compare-and-swap (``waiting`` -> ``executing``), spend its
nonce in the ledger, call the upstream, then append a receipt and record the result. A crash
anywhere in that order leaves the set ``executing`` for ``settlement``. A store that fails
after the upstream was called never turns into "nothing ran": the outcome is answered as
``OUTCOME_UNRECORDED``, kept in the ``Backlog`` and written once the store answers again.
Each step, as it is passed, is announced to ``on_step`` (``faults.POINTS``, for the crash tests).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from typing import Any

from voicegate.domain import (
    Action,
    Evidence,
    GrantMade,
    PasskeyProof,
    PendingSet,
    Receipt,
    RunOutcome,
    Status,
)
from voicegate.errors import StoreUnavailable
from voicegate.gate.backlog import Job
from voicegate.gate.checks import Checklist, CheckName
from voicegate.gate.drafts import draft, recordable, recorded, unrecorded
from voicegate.gate.outcome import Outcome, refused
from voicegate.gate.proposals import SWAP_ATTEMPTS
from voicegate.gate.wiring import Ledger, Releasing, Sealing
from voicegate.reasons import Reason
from voicegate.receipts import seal

# A spent key is kept this long past its set's deadline (1 hour, in seconds). Settlement may read
# "not spent" as "never ran" only while the key cannot have been pruned.
KEY_HOLD = 3600.0
# Sets claimed for approvals made outside the card flow; their nonce is the whole ledger key.
OUTSIDE_PREFIX = "r_"
# A key spent by someone else (a replica working from an older copy of the set): not run here.
APPROVAL_SPENT = "its approval was already spent elsewhere; it did not run here"

logger = logging.getLogger(__name__)

__all__ = [
    "APPROVAL_SPENT",
    "KEY_HOLD",
    "OUTSIDE_PREFIX",
    "append",
    "call",
    "release",
    "spend_key",
    "swap_eventually",
    "write_outcome",
]


async def release(
    w: Releasing,
    evidence: Evidence,
    pending: PendingSet,
    chosen: int,
    checks: Checklist,
    *,
    passkey: PasskeyProof | None = None,
    granted: GrantMade | None = None,
) -> Outcome:
    """Claim the set, spend the nonce, run the write once, leave a receipt (naming the grant
    the yes makes, ``granted``, where it makes one)."""
    now = w.clock()
    claimed = pending.replace(status=Status.EXECUTING, chosen=chosen, decided_at=now)
    if not await w.store.pending.swap(pending, claimed):
        checks.fail(CheckName.NONCE_CONSUMED_ONCE, Reason.NOT_OPEN)
        return refused(evidence, pending, Reason.NOT_OPEN, checks.done())
    w.on_step("after_claim")
    try:
        spent = await w.store.ledger.consume(
            spend_key(claimed), expires_at=claimed.deadline + KEY_HOLD
        )
    except StoreUnavailable:
        # Nothing ran: once the store is back the set waits again, under a fresh nonce.
        w.backlog.add(Job(claimed.id, lambda: _reopen(w, pending, claimed)))
        raise
    if not spent:
        # Another replica spent this nonce under a set restored from an older copy: stop.
        await swap_eventually(w, claimed, status=Status.UNKNOWN, error=APPROVAL_SPENT)
        checks.fail(CheckName.NONCE_CONSUMED_ONCE, Reason.ALREADY_USED)
        return refused(evidence, pending, Reason.ALREADY_USED, checks.done())
    checks.ok(CheckName.NONCE_CONSUMED_ONCE)
    w.on_step("after_nonce")
    outcome, result, error, executed_at = await call(w, pending.actions[chosen - 1])
    w.on_step("after_call")
    written = draft(
        claimed,
        outcome=outcome,
        decided_at=now,
        executed_at=executed_at,
        checks=checks.done(),
        evidence=evidence,
        result=result,
        error=error,
        passkey=passkey,
        granted=granted,
    )
    final, receipt = await write_outcome(w, claimed, written)
    w.on_step("after_record")
    if receipt is None:
        reason: Reason | None = Reason.OUTCOME_UNRECORDED
    else:
        reason = None if outcome is RunOutcome.EXECUTED else Reason.UPSTREAM_FAILED
    return Outcome(final, evidence.decision, True, checks.done(), reason, receipt)


async def call(w: Releasing, action: Action) -> tuple[RunOutcome, Any, str | None, float | None]:
    """Call the upstream once. This is the one boundary where any exception is caught:
    whatever the upstream raises, the write is recorded as failed and never retried."""
    try:
        result = await w.executor(action.tool, action.arguments)
    except StoreUnavailable:
        raise
    except Exception as exc:  # the one documented boundary: see the docstring
        return RunOutcome.FAILED, None, f"{type(exc).__name__}: {exc}", w.clock()
    return RunOutcome.EXECUTED, recordable(result), None, w.clock()


async def write_outcome(
    w: Releasing, claimed: PendingSet, written: Receipt
) -> tuple[PendingSet, Receipt | None]:
    """Append the receipt of a write that ran and record its result on the set.

    When the store fails on the way the outcome goes to the backlog, and the answer is the
    set as it will be recorded, marked ``UNRECORDED``; the receipt is None when it is not
    written yet.
    """
    receipt: Receipt | None = None
    try:
        receipt = await append(w, written)
        w.on_step("after_receipt")
        return await _record(w, claimed, receipt), receipt
    except StoreUnavailable as exc:
        logger.warning("%s ran; its outcome waits for the store: %s", claimed.id, exc)
        view = unrecorded(claimed, written, receipt)
        w.backlog.add(Job(claimed.id, lambda: _write_again(w, claimed, written), view))
        return view, receipt


async def append(w: Sealing, unsealed: Receipt) -> Receipt:
    """Seal ``unsealed`` as the next link of its user's chain and append it."""

    def make(seq: int, prev_digest: str) -> Receipt:
        linked = dataclasses.replace(unsealed, seq=seq, prev_digest=prev_digest)
        return seal(linked, w.receipt_keys)

    return await w.store.receipts.append(unsealed.user, make, w.receipt_keys)


def spend_key(pending: PendingSet) -> str:
    """The ledger key whose spending releases ``pending``."""
    if pending.id.startswith(OUTSIDE_PREFIX):
        return pending.nonce
    return "nonce:" + pending.nonce


async def swap_eventually(w: Ledger, current: PendingSet, **changes: Any) -> PendingSet:
    """Record changes on a set this process holds, retrying over version-only changes.

    A set that moved to another status, or names another receipt, was settled by someone
    else: that stands, and is returned unchanged.
    """
    for _ in range(SWAP_ATTEMPTS):
        updated = current.replace(**changes)
        if await w.store.pending.swap(current, updated):
            return updated
        latest = await w.store.pending.get(current.id)
        if latest is None:
            break
        if (latest.status, latest.receipt_id) != (current.status, current.receipt_id):
            logger.warning("%s was settled elsewhere; its record is kept", current.id)
            return latest
        current = latest
    return current


async def _write_again(w: Releasing, claimed: PendingSet, written: Receipt) -> None:
    """The backlog's retry: the receipt unless it got in before, then the record.

    A set that another replica settled meanwhile (the outage outlasted the lease) keeps
    that settlement and its one receipt: this outcome is logged, not written over it.
    """
    current = await w.store.pending.get(claimed.id)
    if current is None or current.version != claimed.version:
        logger.warning(
            "%s ran (%s) but was settled elsewhere while the store was away; receipt %s "
            "not written",
            claimed.id,
            written.outcome,
            written.id,
        )
        return
    receipt = await w.store.receipts.get(written.id)
    if receipt is None:
        receipt = await append(w, written)
    await _record(w, claimed, receipt)


async def _record(w: Releasing, claimed: PendingSet, receipt: Receipt) -> PendingSet:
    """Record on the set what its receipt says."""
    done = recorded(claimed, receipt)
    return await swap_eventually(
        w,
        claimed,
        status=done.status,
        result=done.result,
        error=done.error,
        receipt_id=done.receipt_id,
    )


async def _reopen(w: Releasing, pending: PendingSet, claimed: PendingSet) -> None:
    """A claim whose nonce the store failed to spend: nothing ran, the set waits again.

    A fresh nonce, since the old one may have been spent all the same.
    """
    reopened = claimed.replace(
        status=Status.WAITING,
        chosen=pending.chosen,
        decided_at=pending.decided_at,
        nonce=secrets.token_urlsafe(24),
    )
    await w.store.pending.swap(claimed, reopened)
