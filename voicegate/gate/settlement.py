"""After a crash: every set left ``executing`` is settled, with a receipt, and never run again.

A set whose receipt was already written (the crash came between the receipt and the record)
takes what its receipt says. Else its key is spent here: when that works the key was never
spent, so nothing ran (``NEVER_RAN``); when the key was spent the write may have run
(``MAY_HAVE_RUN``).
"""

from __future__ import annotations

import dataclasses

from voicegate.domain import PendingSet, Receipt, RunOutcome, Status
from voicegate.gate.drafts import draft, new_receipt_id, recorded
from voicegate.gate.release import KEY_HOLD, append, spend_key
from voicegate.gate.wiring import Sealing

NEVER_RAN = (
    "interrupted before its approval was spent: nothing ran and nothing will; propose it again "
    "if it is still wanted"
)
MAY_HAVE_RUN = (
    "interrupted after its approval was spent and before a result was recorded: it may have "
    "run once; it will not be run again"
)

__all__ = ["MAY_HAVE_RUN", "NEVER_RAN", "settle", "settle_interrupted"]


async def settle_interrupted(w: Sealing, *, grace: float = 0.0) -> int:
    """Settle every set left ``executing`` by a crash, with a receipt; how many were settled.

    Only sets claimed at least ``grace`` seconds ago are settled, so a replica starting
    beside others does not settle a release another replica is still running; a lone
    process settles with no grace at start. Outcomes this process still holds are written
    first, and never settled as unknown.

    A set whose receipt was already written (the crash came between the receipt and the
    record) takes the receipt's outcome instead, so it never gets a second receipt. Else the
    set's key is spent here: if that works nothing ran (``NEVER_RAN``, status ``failed``);
    if it was spent already the write may have run (``MAY_HAVE_RUN``, status ``unknown``).
    """
    await w.backlog.flush()
    settled = await _repair_settled(w)
    now = w.clock()
    cutoff = now - grace
    for pending in await w.store.pending.list_by_status(Status.EXECUTING.value):
        if (pending.decided_at or pending.created_at) > cutoff:
            continue
        if w.backlog.get(pending.id) is not None:
            continue
        written = await w.store.receipts.for_pending(pending.user, pending.id)
        if written is not None:
            if await w.store.pending.swap(pending, recorded(pending, written)):
                settled += 1
            continue
        expires_at = pending.deadline + KEY_HOLD
        # Past its hold the key may have been pruned: "not spent" would prove nothing.
        spent = now > expires_at or not await w.store.ledger.consume(
            spend_key(pending), expires_at=expires_at
        )
        if await settle(w, pending, may_have_run=spent):
            settled += 1
    return settled


async def settle(w: Sealing, pending: PendingSet, *, may_have_run: bool) -> bool:
    """Close an ``executing`` set nobody will finish, with a receipt; False if it moved.

    The set is closed first, naming its receipt, so two settlers never both write one; the
    receipt follows. A store lost between the two leaves a closed set whose receipt is
    missing, which ``_repair_settled`` writes on the next settlement.
    """
    if may_have_run:
        status, error = Status.UNKNOWN, MAY_HAVE_RUN
    else:
        status, error = Status.FAILED, NEVER_RAN
    receipt_id = new_receipt_id()
    closed = pending.replace(status=status, error=error, receipt_id=receipt_id)
    if not await w.store.pending.swap(pending, closed):
        return False
    await append(w, _settled_draft(closed))
    return True


def _settled_draft(closed: PendingSet) -> Receipt:
    """The receipt a settled set names: everything in it comes from the set itself."""
    assert closed.receipt_id is not None
    outcome = RunOutcome.UNKNOWN if closed.status is Status.UNKNOWN else RunOutcome.NOT_RUN
    unsealed = draft(
        closed,
        outcome=outcome,
        decided_at=closed.decided_at or closed.created_at,
        executed_at=None,
        checks=(),
        evidence=None,
        result=None,
        error=closed.error,
    )
    return dataclasses.replace(unsealed, id=closed.receipt_id)


async def _repair_settled(w: Sealing) -> int:
    """Write the receipt of every settled set whose receipt the store lost on the way."""
    repaired = 0
    for status, error in ((Status.FAILED, NEVER_RAN), (Status.UNKNOWN, MAY_HAVE_RUN)):
        for pending in await w.store.pending.list_by_status(status.value):
            if pending.error != error or pending.receipt_id is None:
                continue
            if await w.store.receipts.get(pending.receipt_id) is None:
                await append(w, _settled_draft(pending))
                repaired += 1
    return repaired
