"""The user's answer to a pending set, acted on once every named check has passed.

The checks are ``checks.check_set`` and ``checks.check_answer`` (pure); this module reads what
they need from the store, then acts on the verdict: close the set for a cancel, extend it for
more time, spend the evidence id, and either move a high-risk set on to its next step under a
new nonce or ``release`` the chosen card.

The one rule of a high-risk set: after its choice it goes through every stage the operator's
step for the chosen tool names now (``HighRiskStep.stages``: another yes, a passkey, or a yes
then a passkey), in that order, each under a nonce of its own; a stage already passed is never
asked again, and none is ever skipped.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets

from voicegate.domain import Evidence, FirstYes, PendingSet, Risk, Stage, Status
from voicegate.errors import Refused, StoreUnavailable
from voicegate.gate import grants
from voicegate.gate.checks import (
    EVIDENCE_MAX_AGE,
    Checklist,
    CheckName,
    check_answer,
    check_set,
)
from voicegate.gate.outcome import Outcome, refused
from voicegate.gate.proposals import extend
from voicegate.gate.release import KEY_HOLD, release, spend_key
from voicegate.gate.wiring import Answering
from voicegate.passkey import passkey_id
from voicegate.reasons import Kind, Reason

__all__ = ["answer"]

logger = logging.getLogger(__name__)


async def answer(w: Answering, evidence: Evidence) -> Outcome:
    """Run every named check on ``evidence`` and act on it: choose, confirm, cancel, wait."""
    pending = await w.store.pending.get(evidence.pending_id)
    addressed = check_set(evidence, pending)
    if addressed.reason is not None or pending is None:
        return refused(
            evidence, pending, addressed.reason or Reason.UNKNOWN_PENDING, addressed.checks
        )
    device = await w.store.devices.get(evidence.device_id)
    credential = None
    if evidence.passkey is not None:
        credential = await w.store.passkeys.get(passkey_id(evidence.passkey.credential_id))
    verdict = check_answer(
        evidence,
        pending,
        device,
        now=w.clock(),
        device_refusal=w.policy.device_refusal,
        before=addressed.checks,
        credential=credential,
        relying_party=w.relying_party,
    )
    if verdict.reason is not None:
        return refused(evidence, pending, verdict.reason, verdict.checks)
    checks = Checklist(verdict.checks)
    if verdict.passkey is not None:
        # The counter moves on by compare-and-swap: of two assertions racing with one count,
        # and of a copied authenticator behind the original, one at most gets through.
        if not await w.store.passkeys.use(
            verdict.passkey.id, verdict.passkey.sign_count, at=w.clock()
        ):
            checks.fail(CheckName.PASSKEY_VERIFIED, Reason.PASSKEY_COUNTER)
            return refused(evidence, pending, Reason.PASSKEY_COUNTER, checks.done())
        checks.ok(CheckName.PASSKEY_VERIFIED)
    decision = evidence.decision
    if decision.kind is Kind.CANCEL:
        return await _close(w, evidence, pending, checks, Status.CANCELLED)
    if decision.kind is Kind.MORE_TIME:
        try:
            extended = await extend(w, pending.id, user=evidence.user)
        except Refused as refusal:
            return refused(evidence, pending, refusal.reason, checks.done())
        return Outcome(extended, decision, False, checks.done())
    assert verdict.chosen is not None
    if evidence.grant is not None:
        # Fail closed: a yes whose grant part may not be had releases nothing at all, so the
        # user never gets a write they approved only together with a repeat they cannot have.
        why = grants.refusal(w, pending, evidence.grant)
        if why is not None:
            checks.fail(CheckName.GRANT_ALLOWED, why)
            return refused(evidence, pending, why, checks.done())
        checks.ok(CheckName.GRANT_ALLOWED)
    if not await w.store.ledger.consume(
        "evidence:" + evidence.id, expires_at=evidence.created_at + 2 * EVIDENCE_MAX_AGE
    ):
        checks.fail(CheckName.EVIDENCE_CONSUMED_ONCE, Reason.EVIDENCE_REUSED)
        return refused(evidence, pending, Reason.EVIDENCE_REUSED, checks.done())
    checks.ok(CheckName.EVIDENCE_CONSUMED_ONCE)
    # One set has one risk, and the operator's policy is read now: a set proposed at low risk
    # whose tool has since been made high-risk asks for the second yes all the same.
    high = pending.risk is Risk.HIGH or any(
        w.policy.risk_of(a.tool) is Risk.HIGH for a in pending.actions
    )
    following = _next_stage(w, pending, verdict.chosen) if high else None
    if following is not None:
        return await _advance(w, evidence, pending, verdict.chosen, checks, following)
    planned = grants.plan(w, evidence, pending) if evidence.grant is not None else None
    outcome = await release(
        w,
        evidence,
        pending,
        verdict.chosen,
        checks,
        passkey=verdict.passkey,
        granted=grants.terms(planned) if planned is not None else None,
    )
    if planned is None or not outcome.released or outcome.receipt is None:
        return outcome
    try:
        made = await grants.make(w, planned, outcome.receipt)
    except StoreUnavailable:
        # The write ran and its receipt is written; only the repeat is not there, and the
        # answer says so by carrying no grant.
        logger.warning("grant for %s not stored: the store is unreachable", pending.id)
        return outcome
    return dataclasses.replace(outcome, grant=made)


_ORDER = (Stage.CHOOSE, Stage.FINAL, Stage.PASSKEY)


def _next_stage(w: Answering, pending: PendingSet, chosen: int) -> Stage | None:
    """The stage a high-risk set moves to after a yes at its current one, or None to release."""
    step = w.policy.step_of(pending.actions[chosen - 1].tool)
    later = _ORDER[_ORDER.index(pending.stage) + 1 :]
    return next((stage for stage in later if stage in step.stages), None)


async def _advance(
    w: Answering,
    evidence: Evidence,
    pending: PendingSet,
    chosen: int,
    checks: Checklist,
    stage: Stage,
) -> Outcome:
    """A high-risk yes: spend this nonce and ask for the next step under a new one."""
    if not await w.store.ledger.consume(spend_key(pending), expires_at=pending.deadline + KEY_HOLD):
        checks.fail(CheckName.NONCE_CONSUMED_ONCE, Reason.ALREADY_USED)
        return refused(evidence, pending, Reason.ALREADY_USED, checks.done())
    checks.ok(CheckName.NONCE_CONSUMED_ONCE)
    now = w.clock()
    yes = FirstYes(
        evidence_id=evidence.id,
        device_id=evidence.device_id,
        modality=evidence.modality,
        input=evidence.input,
        decided_at=now,
        chosen=chosen,
        checks=checks.done(),
        transcript=evidence.transcript,
        recogniser=evidence.recogniser,
        model=evidence.model,
        fingerprint_id=evidence.fingerprint_id,
    )
    kept = {"first_yes": yes} if pending.stage is Stage.CHOOSE else {"second_yes": yes}
    final = pending.replace(
        risk=Risk.HIGH,
        stage=stage,
        nonce=secrets.token_urlsafe(24),
        chosen=chosen,
        ttl=w.timing.final_ttl,
        deadline=now + w.timing.final_ttl,
        extensions=0,
        **kept,
    )
    if not await w.store.pending.swap(pending, final):
        return refused(evidence, pending, Reason.NOT_OPEN, checks.done())
    return Outcome(final, evidence.decision, False, checks.done())


async def _close(
    w: Answering, evidence: Evidence, pending: PendingSet, checks: Checklist, status: Status
) -> Outcome:
    """The user said no on the device: the set closes without a release."""
    closed = pending.replace(status=status, decided_at=w.clock())
    if not await w.store.pending.swap(pending, closed):
        return refused(evidence, pending, Reason.NOT_OPEN, checks.done())
    return Outcome(closed, evidence.decision, False, checks.done())
