"""The named confirm checks, recorded pass or fail, in the order the gate runs them.

``check_set`` and ``check_answer`` are the checks themselves: they take values (the answer,
the set as stored, the device that signed it, the time) and return a ``Verdict``, and do no I/O.
They are two because the device is read from the store only for an answer to a set that is
still waiting: most answers that lose a race for the same set end in ``check_set``, one store
read sooner. The checks that spend something (the evidence id, the set's nonce) are the
ledger's, and the gate records them after these, in ``CheckName`` order.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from voicegate import passkey
from voicegate.canonical import args_hash
from voicegate.domain import (
    Action,
    Check,
    Decision,
    Device,
    DeviceKind,
    Evidence,
    Modality,
    Passkey,
    PasskeyProof,
    PendingSet,
    Stage,
    Status,
)
from voicegate.errors import Refused
from voicegate.gate import card
from voicegate.reasons import Kind, Reason


class CheckName(StrEnum):
    """The name of one confirm check, as a receipt records it; in the order the gate runs them."""

    # The set exists and the evidence carries its current nonce.
    FOR_THIS_SET = "for_this_set"
    # A paired, live device of the set's user.
    PAIRED_DEVICE_OF_USER = "paired_device_of_user"
    # Still waiting and before its deadline.
    SET_OPEN = "set_open"
    # Made after the set opened and not older than the freshness window.
    EVIDENCE_FRESH = "evidence_fresh"
    # The answer names exactly one card valid at this stage.
    WORDS_CHOOSE_ONE_CARD = "words_choose_one_card"
    # The action still hashes and renders as shown.
    ACTION_UNCHANGED = "action_unchanged"
    # A card shortened for display had its full text on the device's screen.
    SHOWN_IN_FULL = "shown_in_full"
    # The tool is a write the operator gates.
    REGISTERED_WRITE = "registered_write"
    # A passkey step: the user's passkey signed this set, stage and action.
    PASSKEY_VERIFIED = "passkey_verified"
    # This evidence was never used before.
    EVIDENCE_CONSUMED_ONCE = "evidence_consumed_once"
    # This set's nonce was never spent before.
    NONCE_CONSUMED_ONCE = "nonce_consumed_once"
    # A token or other approval outside the card flow, spent once.
    APPROVAL_CONSUMED_ONCE = "approval_consumed_once"
    # A yes that asks for a grant: one card, not high-risk, within bounds.
    GRANT_ALLOWED = "grant_allowed"
    # A write run under a grant: same user, upstream, tool and fixed arguments ...
    GRANT_FITS = "grant_fits"
    # ... and one of the grant's uses, spent atomically, was left for it.
    GRANT_SPENT_ONCE = "grant_spent_once"


# Evidence older than this is stale even if its set is still open: an answer is given to a card
# the user is looking at now.
EVIDENCE_MAX_AGE = 120.0

__all__ = [
    "EVIDENCE_MAX_AGE",
    "CheckName",
    "Checklist",
    "Verdict",
    "check_answer",
    "check_set",
    "passkey_challenge",
]


class Checklist:
    """Collects check results in order; ``fail`` returns the reason for a one-line refusal."""

    def __init__(self, checks: Iterable[Check] = ()) -> None:
        self._checks: list[Check] = list(checks)

    def ok(self, name: CheckName) -> None:
        """Record that ``name`` passed."""
        self._checks.append(Check(name.value, True))

    def fail(self, name: CheckName, reason: Reason) -> Reason:
        """Record that ``name`` failed with ``reason`` and return the reason."""
        self._checks.append(Check(name.value, False, reason))
        return reason

    def done(self) -> tuple[Check, ...]:
        """Every check recorded so far."""
        return tuple(self._checks)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the checks made of an answer: every check run, and why it is refused, if it is.

    An answer that passed names the card it releases in ``chosen``; a cancel or a request for
    more time passes with ``chosen`` None, and the gate acts on its decision. An answer to a
    passkey step carries what its assertion proved in ``passkey``: the gate still has to move
    the credential's counter on (``PasskeyStore.use``) before it records ``passkey_verified``.
    """

    checks: tuple[Check, ...]
    reason: Reason | None = None
    chosen: int | None = None
    passkey: PasskeyProof | None = None


def check_set(evidence: Evidence, pending: PendingSet | None) -> Verdict:
    """The answer names this set by its current nonce, and the set is still waiting."""
    checks = Checklist()
    if pending is None:
        return _refuse(checks, CheckName.FOR_THIS_SET, Reason.UNKNOWN_PENDING)
    same_nonce = secrets.compare_digest(evidence.nonce.encode(), pending.nonce.encode())
    if pending.status is Status.WITHDRAWN and evidence.user == pending.user:
        # The set's own user is told it was withdrawn, whichever nonce they hold: nothing of
        # it can run any more, and "another card" would send them looking for one.
        if not same_nonce:
            return _refuse(checks, CheckName.FOR_THIS_SET, Reason.WITHDRAWN)
        checks.ok(CheckName.FOR_THIS_SET)
        return _refuse(checks, CheckName.SET_OPEN, Reason.WITHDRAWN)
    if not same_nonce:
        return _refuse(checks, CheckName.FOR_THIS_SET, Reason.WRONG_SET)
    checks.ok(CheckName.FOR_THIS_SET)
    if pending.status is not Status.WAITING:
        return _refuse(checks, CheckName.SET_OPEN, Reason.NOT_OPEN)
    return Verdict(checks.done())


def check_answer(
    evidence: Evidence,
    pending: PendingSet,
    device: Device | None,
    *,
    now: float,
    device_refusal: Callable[[str], Reason | None],
    before: Iterable[Check] = (),
    credential: Passkey | None = None,
    relying_party: passkey.RelyingParty | None = None,
) -> Verdict:
    """Every check after ``check_set`` (whose checks come in ``before``), on plain values.

    ``device`` is the stored device named by the evidence (None when there is none). Passes a
    cancel or a request for more time once the answer itself is sound; passes a choice or a
    yes only for one card, unchanged, shown in full and a write the operator still lets a
    device release (``device_refusal`` of its tool is None: not disabled, not moved to another
    mode since the card was proposed). At a passkey step the yes must also carry an assertion
    by ``credential`` (the stored passkey it names) over this set, nonce and action, checked
    for ``relying_party``.
    """
    checks = Checklist(before)
    if device is None:
        return _refuse(checks, CheckName.PAIRED_DEVICE_OF_USER, Reason.UNKNOWN_DEVICE)
    if device.revoked_at is not None:
        return _refuse(checks, CheckName.PAIRED_DEVICE_OF_USER, Reason.DEVICE_REVOKED)
    if device.user != pending.user or evidence.user != pending.user:
        return _refuse(checks, CheckName.PAIRED_DEVICE_OF_USER, Reason.WRONG_DEVICE_USER)
    if evidence.modality is Modality.VOICE and device.kind is not DeviceKind.VOICE:
        return _refuse(checks, CheckName.PAIRED_DEVICE_OF_USER, Reason.DEVICE_CANNOT_SPEAK)
    checks.ok(CheckName.PAIRED_DEVICE_OF_USER)
    if now > pending.deadline:
        return _refuse(checks, CheckName.SET_OPEN, Reason.SET_EXPIRED)
    checks.ok(CheckName.SET_OPEN)
    if not (pending.created_at - 1.0 <= evidence.created_at <= now + 1.0) or (
        now - evidence.created_at > EVIDENCE_MAX_AGE
    ):
        return _refuse(checks, CheckName.EVIDENCE_FRESH, Reason.STALE_REQUEST)
    checks.ok(CheckName.EVIDENCE_FRESH)
    decision = evidence.decision
    if decision.kind is Kind.REFUSE:
        return _refuse(checks, CheckName.WORDS_CHOOSE_ONE_CARD, decision.reason or Reason.UNCLEAR)
    if decision.kind in (Kind.CANCEL, Kind.MORE_TIME):
        return Verdict(checks.done())
    chosen, reason = _chosen_card(pending, decision)
    if chosen is None:
        assert reason is not None
        return _refuse(checks, CheckName.WORDS_CHOOSE_ONE_CARD, reason)
    checks.ok(CheckName.WORDS_CHOOSE_ONE_CARD)
    action = pending.actions[chosen - 1]
    if not _unchanged(action):
        return _refuse(checks, CheckName.ACTION_UNCHANGED, Reason.ACTION_CHANGED)
    checks.ok(CheckName.ACTION_UNCHANGED)
    if not _shown_enough(action, chosen, evidence):
        return _refuse(checks, CheckName.SHOWN_IN_FULL, Reason.NOT_SHOWN_IN_FULL)
    checks.ok(CheckName.SHOWN_IN_FULL)
    refusal = device_refusal(action.tool)
    if refusal is not None:
        return _refuse(checks, CheckName.REGISTERED_WRITE, refusal)
    checks.ok(CheckName.REGISTERED_WRITE)
    if pending.stage is not Stage.PASSKEY and evidence.passkey is None:
        return Verdict(checks.done(), chosen=chosen)
    try:
        proof = _passkey(evidence, pending, action, credential, relying_party)
    except Refused as why:
        return _refuse(checks, CheckName.PASSKEY_VERIFIED, why.reason)
    return Verdict(checks.done(), chosen=chosen, passkey=proof)


def passkey_challenge(pending: PendingSet, action: Action) -> bytes:
    """The challenge a passkey signs to release ``action`` of ``pending`` at its stage now:
    the set, the stage's nonce and the action's canonical hash, recomputed from what will run."""
    action_hash = args_hash({"tool": action.tool, "arguments": dict(action.arguments)})
    return passkey.challenge(pending.id, pending.nonce, action_hash)


def _passkey(
    evidence: Evidence,
    pending: PendingSet,
    action: Action,
    credential: Passkey | None,
    relying_party: passkey.RelyingParty | None,
) -> PasskeyProof:
    """What the evidence's passkey assertion proves for this set, or ``Refused`` with why not.

    A passkey answers the passkey step only; a yes without one does not.
    """
    assertion = evidence.passkey
    if pending.stage is not Stage.PASSKEY:
        raise Refused(Reason.WRONG_STAGE)
    if assertion is None:
        raise Refused(Reason.PASSKEY_REQUIRED)
    if credential is None or credential.user != pending.user:
        raise Refused(Reason.UNKNOWN_PASSKEY)
    if relying_party is None:
        raise Refused(Reason.PASSKEY_WRONG_RP)
    expected = passkey_challenge(pending, action)
    return passkey.check_assertion(assertion, credential, rp=relying_party, expected=expected)


def _refuse(checks: Checklist, name: CheckName, reason: Reason) -> Verdict:
    checks.fail(name, reason)
    return Verdict(checks.done(), reason)


def _chosen_card(pending: PendingSet, decision: Decision) -> tuple[int | None, Reason | None]:
    """Which card the answer releases at this stage, or why it releases none."""
    if pending.stage is not Stage.CHOOSE:
        if decision.kind is Kind.CONFIRM and pending.chosen is not None:
            return pending.chosen, None
        return (
            None,
            Reason.NUMBER_ON_FINAL if decision.kind is Kind.CHOOSE else Reason.WRONG_STAGE,
        )
    if decision.kind is Kind.CHOOSE:
        if decision.card is None or not 1 <= decision.card <= len(pending.actions):
            return None, Reason.OUT_OF_RANGE
        return decision.card, None
    if decision.kind is Kind.CONFIRM:
        if len(pending.actions) == 1:
            return 1, None
        return None, Reason.AMBIGUOUS
    return None, Reason.WRONG_STAGE


def _unchanged(action: Action) -> bool:
    """The stored action still hashes and renders as it did when the card was shown."""
    expected = args_hash({"tool": action.tool, "arguments": dict(action.arguments)})
    return secrets.compare_digest(expected, action.args_hash) and (
        card.render(action.tool, action.arguments) == action.card_text
    )


def _shown_enough(action: Action, chosen: int, evidence: Evidence) -> bool:
    """A card shortened for display releases only when the device showed its full text.

    A card that was not cut showed everything already. The device names what it showed in the
    signed answer; a device that names nothing is taken to have shown the short text only.
    """
    if card.full(action.tool, action.arguments) == action.card_text:
        return True
    return chosen in evidence.shown_in_full
