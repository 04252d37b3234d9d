"""Writes approved outside the card flow: a two-phase token, or the client's own dialog.

The approval is claimed the same way a card is: as a set created ``executing``, whose id comes
from the approval's key, before that key is spent. So the same approval runs once, and a crash
leaves a set for ``settlement`` like any other release.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence

from voicegate.domain import Check, GrantUse, PendingSet, Receipt, Risk, Stage, Status
from voicegate.errors import Refused, StoreUnavailable
from voicegate.gate.backlog import Job
from voicegate.gate.checks import CheckName
from voicegate.gate.drafts import draft
from voicegate.gate.proposals import ActionRequest, action_of
from voicegate.gate.release import (
    APPROVAL_SPENT,
    KEY_HOLD,
    OUTSIDE_PREFIX,
    call,
    swap_eventually,
    write_outcome,
)
from voicegate.gate.settlement import settle
from voicegate.gate.wiring import Approving
from voicegate.reasons import Reason

__all__ = ["run_confirmed", "run_delegated"]


async def run_confirmed(
    w: Approving,
    user: str,
    request: ActionRequest,
    *,
    mode: str,
    spend_key: str | None,
    spend_until: float,
    checks: Sequence[Check] = (),
    risk: Risk = Risk.LOW,
    proposed_at: float | None = None,
    grant: GrantUse | None = None,
) -> Receipt:
    """Run a write already approved outside the card flow (a token, the client's dialog, or a
    grant the user made on the device, which ``grant`` names in the receipt).

    The approval is claimed as a set created ``executing`` (a second claim of the same
    ``spend_key`` raises ``Refused(ALREADY_USED)``), then ``spend_key`` is consumed, so the
    same approval runs once and a crash leaves a set for ``settle_interrupted``. ``risk``
    and ``proposed_at`` (when the approval was asked for) go into the receipt. A store that
    fails after the call raises ``Refused(OUTCOME_UNRECORDED)``: it ran, its receipt follows.
    """
    if not w.policy.is_write(request.tool):
        raise Refused(Reason.NOT_A_WRITE)
    action = action_of(request)
    now = w.clock()
    key = spend_key if spend_key is not None else "run:" + secrets.token_urlsafe(16)
    claim = PendingSet(
        id=OUTSIDE_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:24],
        user=user,
        actions=(action,),
        risk=risk,
        stage=Stage.FINAL,
        nonce=key,
        created_at=now if proposed_at is None else proposed_at,
        deadline=spend_until if spend_key is not None else now,
        ttl=0.0,
        mode=mode,
        status=Status.EXECUTING,
        chosen=1,
        decided_at=now,
    )
    try:
        await w.store.pending.create(claim)
    except ValueError:
        raise Refused(Reason.ALREADY_USED) from None
    try:
        spent = await w.store.ledger.consume(key, expires_at=claim.deadline + KEY_HOLD)
    except StoreUnavailable:
        # Nothing ran: once the store is back the claim is closed as never run.
        w.backlog.add(Job(claim.id, lambda: settle(w, claim, may_have_run=False)))
        raise
    if not spent:
        await swap_eventually(w, claim, status=Status.FAILED, error=APPROVAL_SPENT)
        raise Refused(Reason.ALREADY_USED)
    recorded = (*checks, Check(CheckName.APPROVAL_CONSUMED_ONCE.value, True))
    outcome, result, error, executed_at = await call(w, action)
    unsealed = draft(
        claim,
        outcome=outcome,
        decided_at=now,
        executed_at=executed_at,
        checks=recorded,
        evidence=None,
        result=result,
        error=error,
        grant=grant,
    )
    _, receipt = await write_outcome(w, claim, unsealed)
    if receipt is None:
        raise Refused(
            Reason.OUTCOME_UNRECORDED, f"receipt {unsealed.id} follows", pending_id=claim.id
        )
    return receipt


async def run_delegated(w: Approving, user: str, request: ActionRequest) -> Receipt:
    """Run at once, trusting the client's own dialog; the receipt says so."""
    return await run_confirmed(w, user, request, mode="delegate", spend_key=None, spend_until=0.0)
