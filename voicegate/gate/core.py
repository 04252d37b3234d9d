"""The gate: proposes pending card sets and releases a write only when every named check passes.

A write runs at most once. The order of a release is: claim the set by compare-and-swap
(``waiting`` -> ``executing``), spend its nonce in the ledger, call the upstream, then append
a receipt and record the result. A crash anywhere in that order leaves the set ``executing``;
``settle_interrupted`` turns it into ``unknown`` with a receipt (or into what its receipt says,
when the crash came after the receipt), and nothing runs it again. ``faults.reach`` marks each
step for the crash tests and does nothing unless ``VOICEGATE_FAULT_POINT`` is set.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicegate.canonical import args_hash, canonical_json
from voicegate.errors import Refused, StoreUnavailable
from voicegate.gate import card, faults
from voicegate.gate.checks import Checklist
from voicegate.gate.receipts import seal
from voicegate.gate.types import (
    Action,
    Check,
    Decision,
    DeviceKind,
    Evidence,
    Modality,
    PendingSet,
    Receipt,
    Risk,
    Stage,
    Status,
)
from voicegate.reasons import Kind, Reason
from voicegate.secrets import KeyRing
from voicegate.store.base import Store

Executor = Callable[[str, Mapping[str, Any]], Awaitable[Any]]

MAX_CARDS = 5
# Evidence older than this is stale even if its set is still open: an answer is given to a card
# the user is looking at now.
EVIDENCE_MAX_AGE = 120.0
# How many times a compare-and-swap is retried when a racing writer changed the set meanwhile.
SWAP_ATTEMPTS = 8
INTERRUPTED = "interrupted before the upstream answered; it will not be run again"

__all__ = ["ActionRequest", "Executor", "Gate", "Outcome"]


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """A write the agent asks for, before it is turned into a card."""

    tool: str
    arguments: Mapping[str, Any]
    target: str = ""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one piece of evidence did to a pending set."""

    pending: PendingSet
    decision: Decision
    released: bool
    checks: tuple[Check, ...]
    reason: Reason | None = None
    receipt: Receipt | None = None


class Gate:
    """Pending card sets, the confirm checks, single-use release and receipts."""

    def __init__(
        self,
        store: Store,
        *,
        executor: Executor,
        is_write: Callable[[str], bool],
        receipt_keys: KeyRing,
        clock: Callable[[], float] = time.time,
        choose_ttl: float = 120.0,
        final_ttl: float = 60.0,
        max_extensions: int = 10,
    ) -> None:
        if max_extensions < 10:
            raise ValueError("WCAG 2.2.1 asks for at least 10 extensions")
        self.store = store
        self.executor = executor
        self.is_write = is_write
        self.receipt_keys = receipt_keys
        self.clock = clock
        self.choose_ttl = choose_ttl
        self.final_ttl = final_ttl
        self.max_extensions = max_extensions

    # -- proposing and reading ---------------------------------------------------------------

    async def propose(
        self,
        user: str,
        actions: Sequence[ActionRequest],
        *,
        risk: Risk,
        preview: str = "",
        mode: str = "device",
    ) -> PendingSet:
        """Open a set of 1-5 cards for ``user``; the agent gets the set without its nonce."""
        if not 1 <= len(actions) <= MAX_CARDS:
            raise ValueError(f"a pending set holds 1 to {MAX_CARDS} actions, not {len(actions)}")
        cards = tuple(
            Action(
                tool=a.tool,
                arguments=dict(a.arguments),
                args_hash=args_hash({"tool": a.tool, "arguments": dict(a.arguments)}),
                card_text=card.render(a.tool, a.arguments),
                target=a.target,
            )
            for a in actions
        )
        now = self.clock()
        pending = PendingSet(
            id="p_" + secrets.token_urlsafe(12),
            user=user,
            actions=cards,
            risk=risk,
            stage=Stage.CHOOSE,
            nonce=secrets.token_urlsafe(24),
            created_at=now,
            deadline=now + self.choose_ttl,
            ttl=self.choose_ttl,
            preview=preview,
            mode=mode,
        )
        await self.store.pending.create(pending)
        return pending

    async def status(self, pending_id: str) -> PendingSet:
        """The set as it stands now; a waiting set past its deadline becomes ``expired``."""
        pending = await self._get(pending_id)
        if pending.status is Status.WAITING and self.clock() > pending.deadline:
            expired = pending.replace(status=Status.EXPIRED)
            if await self.store.pending.swap(pending, expired):
                return expired
            return await self._get(pending_id)
        return pending

    async def open_for(self, user: str) -> list[PendingSet]:
        """The sets still waiting for ``user``'s answer, oldest first."""
        now = self.clock()
        sets = await self.store.pending.list_for_user(user, open_only=True)
        return [p for p in sets if p.status is Status.WAITING and p.deadline >= now]

    async def receipts(self, user: str | None = None) -> list[Receipt]:
        """Receipts of ``user`` (everyone when None), in chain order."""
        return await self.store.receipts.list(user)

    # -- the user's answers ------------------------------------------------------------------

    async def answer(self, evidence: Evidence) -> Outcome:
        """Run every named check on ``evidence`` and act on it: choose, confirm, cancel, wait."""
        checks = Checklist()
        pending = await self.store.pending.get(evidence.pending_id)
        if pending is None:
            return self._refused(
                evidence, None, checks.fail("for_this_set", Reason.UNKNOWN_PENDING), checks
            )
        reason = await self._precheck(evidence, pending, checks)
        if reason is not None:
            return self._refused(evidence, pending, reason, checks)
        decision = evidence.decision
        if decision.kind is Kind.CANCEL:
            return await self._settle_without_release(evidence, pending, checks, Status.CANCELLED)
        if decision.kind is Kind.MORE_TIME:
            try:
                extended = await self.extend(pending.id, user=evidence.user)
            except Refused as refusal:
                return self._refused(evidence, pending, refusal.reason, checks)
            return Outcome(extended, decision, False, checks.done())
        chosen, reason = self._chosen_card(pending, decision)
        if chosen is None:
            assert reason is not None
            return self._refused(
                evidence, pending, checks.fail("words_choose_one_card", reason), checks
            )
        checks.ok("words_choose_one_card")
        action = pending.actions[chosen - 1]
        if not self._unchanged(action):
            return self._refused(
                evidence, pending, checks.fail("action_unchanged", Reason.ACTION_CHANGED), checks
            )
        checks.ok("action_unchanged")
        if not self.is_write(action.tool):
            return self._refused(
                evidence, pending, checks.fail("registered_write", Reason.NOT_A_WRITE), checks
            )
        checks.ok("registered_write")
        if not await self.store.ledger.consume(
            "evidence:" + evidence.id, expires_at=evidence.created_at + 2 * EVIDENCE_MAX_AGE
        ):
            return self._refused(
                evidence,
                pending,
                checks.fail("evidence_consumed_once", Reason.EVIDENCE_REUSED),
                checks,
            )
        checks.ok("evidence_consumed_once")
        if pending.risk is Risk.HIGH and pending.stage is Stage.CHOOSE:
            return await self._advance_to_final(evidence, pending, chosen, checks)
        return await self._release(evidence, pending, chosen, checks)

    async def extend(self, pending_id: str, *, user: str) -> PendingSet:
        """More time (WCAG 2.2.1): the deadline becomes max(old, now + the stage's TTL)."""
        for _ in range(SWAP_ATTEMPTS):
            pending = await self._get(pending_id)
            self._require_owner(pending, user)
            if pending.status is not Status.WAITING:
                raise Refused(Reason.NOT_OPEN)
            now = self.clock()
            if now > pending.deadline:
                raise Refused(Reason.SET_EXPIRED)
            if pending.extensions >= self.max_extensions:
                raise Refused(Reason.EXTENSION_LIMIT)
            extended = pending.replace(
                deadline=max(pending.deadline, now + pending.ttl),
                extensions=pending.extensions + 1,
            )
            if await self.store.pending.swap(pending, extended):
                return extended
        raise Refused(Reason.BUSY, "the set kept changing while it was being extended")

    async def cancel(self, pending_id: str, *, user: str) -> PendingSet:
        """The user says no: the set closes and nothing runs."""
        return await self._close(pending_id, Status.CANCELLED, user=user)

    async def withdraw(self, pending_id: str) -> PendingSet:
        """The agent takes its proposal back; nothing runs."""
        return await self._close(pending_id, Status.WITHDRAWN, user=None)

    # -- other ways in -----------------------------------------------------------------------

    async def run_confirmed(
        self,
        user: str,
        request: ActionRequest,
        *,
        mode: str,
        spend_key: str | None,
        spend_until: float,
        checks: Sequence[Check] = (),
    ) -> Receipt:
        """Run a write already approved outside the card flow (a token, or the client's dialog).

        ``spend_key`` is consumed first, so the same approval runs once; a second call raises
        ``Refused(ALREADY_USED)``.
        """
        recorded = list(checks)
        if spend_key is not None:
            if not await self.store.ledger.consume(spend_key, expires_at=spend_until):
                raise Refused(Reason.ALREADY_USED)
            recorded.append(Check("approval_consumed_once", True))
        if not self.is_write(request.tool):
            raise Refused(Reason.NOT_A_WRITE)
        action = Action(
            tool=request.tool,
            arguments=dict(request.arguments),
            args_hash=args_hash({"tool": request.tool, "arguments": dict(request.arguments)}),
            card_text=card.render(request.tool, request.arguments),
            target=request.target,
        )
        now = self.clock()
        outcome, result, error, executed_at = await self._call(action)
        return await self._append_receipt(
            user=user,
            pending_id="",
            action=action,
            risk=Risk.LOW,
            mode=mode,
            outcome=outcome,
            proposed_at=now,
            decided_at=now,
            executed_at=executed_at,
            checks=tuple(recorded),
            evidence=None,
            result=result,
            error=error,
        )

    async def run_delegated(self, user: str, request: ActionRequest) -> Receipt:
        """Run at once, trusting the client's own dialog; the receipt says so."""
        return await self.run_confirmed(
            user, request, mode="delegate", spend_key=None, spend_until=0.0
        )

    async def settle_interrupted(self, *, grace: float = 0.0) -> int:
        """After a crash: every set left ``executing`` becomes ``unknown`` with a receipt.

        Only sets claimed at least ``grace`` seconds ago are settled, so a replica starting
        beside others does not settle a release another replica is still running; a lone
        process settles with no grace at start.

        A set whose receipt was already written (the crash came between the receipt and the
        record) takes the receipt's outcome instead, so it never gets a second receipt.
        """
        settled = 0
        cutoff = self.clock() - grace
        for pending in await self.store.pending.list_by_status(Status.EXECUTING.value):
            if (pending.decided_at or pending.created_at) > cutoff:
                continue
            written = await self._receipt_of(pending)
            if written is not None:
                if await self.store.pending.swap(pending, _recorded(pending, written)):
                    settled += 1
                continue
            unknown = pending.replace(status=Status.UNKNOWN, error=INTERRUPTED)
            if not await self.store.pending.swap(pending, unknown):
                continue
            assert pending.chosen is not None
            receipt = await self._append_receipt(
                user=pending.user,
                pending_id=pending.id,
                action=pending.actions[pending.chosen - 1],
                risk=pending.risk,
                mode=pending.mode,
                outcome="unknown",
                proposed_at=pending.created_at,
                decided_at=pending.decided_at or pending.created_at,
                executed_at=None,
                checks=(),
                evidence=None,
                result=None,
                error=INTERRUPTED,
            )
            await self._swap_eventually(unknown, receipt_id=receipt.id)
            settled += 1
        return settled

    async def _receipt_of(self, pending: PendingSet) -> Receipt | None:
        """The receipt a release of ``pending`` already wrote, if any."""
        for receipt in reversed(await self.store.receipts.list(pending.user)):
            if receipt.pending_id == pending.id:
                return receipt
        return None

    # -- the steps ---------------------------------------------------------------------------

    async def _precheck(
        self, evidence: Evidence, pending: PendingSet, checks: Checklist
    ) -> Reason | None:
        """The checks every answer passes, releasing or not. None when all pass."""
        if not secrets.compare_digest(evidence.nonce.encode(), pending.nonce.encode()):
            return checks.fail("for_this_set", Reason.WRONG_SET)
        checks.ok("for_this_set")
        # A set that is closed refuses before the device is looked up: most answers that lose a
        # race for the same set end here, one store read sooner.
        if pending.status is not Status.WAITING:
            return checks.fail("set_open", Reason.NOT_OPEN)
        device = await self.store.devices.get(evidence.device_id)
        if device is None:
            return checks.fail("paired_device_of_user", Reason.UNKNOWN_DEVICE)
        if device.revoked_at is not None:
            return checks.fail("paired_device_of_user", Reason.DEVICE_REVOKED)
        if device.user != pending.user or evidence.user != pending.user:
            return checks.fail("paired_device_of_user", Reason.WRONG_DEVICE_USER)
        if evidence.modality is Modality.VOICE and device.kind is not DeviceKind.VOICE:
            return checks.fail("paired_device_of_user", Reason.DEVICE_CANNOT_SPEAK)
        checks.ok("paired_device_of_user")
        now = self.clock()
        if now > pending.deadline:
            return checks.fail("set_open", Reason.SET_EXPIRED)
        checks.ok("set_open")
        if not (pending.created_at - 1.0 <= evidence.created_at <= now + 1.0) or (
            now - evidence.created_at > EVIDENCE_MAX_AGE
        ):
            return checks.fail("evidence_fresh", Reason.STALE_REQUEST)
        checks.ok("evidence_fresh")
        if evidence.decision.kind is Kind.REFUSE:
            return checks.fail("words_choose_one_card", evidence.decision.reason or Reason.UNCLEAR)
        return None

    @staticmethod
    def _chosen_card(pending: PendingSet, decision: Decision) -> tuple[int | None, Reason | None]:
        """Which card the answer releases at this stage, or why it releases none."""
        if pending.stage is Stage.FINAL:
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

    @staticmethod
    def _unchanged(action: Action) -> bool:
        """The stored action still hashes and renders as it did when the card was shown."""
        expected = args_hash({"tool": action.tool, "arguments": dict(action.arguments)})
        return secrets.compare_digest(expected, action.args_hash) and (
            card.render(action.tool, action.arguments) == action.card_text
        )

    async def _advance_to_final(
        self, evidence: Evidence, pending: PendingSet, chosen: int, checks: Checklist
    ) -> Outcome:
        """A high-risk choice: spend this nonce and ask for a second yes under a new one."""
        if not await self.store.ledger.consume(
            "nonce:" + pending.nonce, expires_at=pending.deadline + 3600
        ):
            return self._refused(
                evidence, pending, checks.fail("nonce_consumed_once", Reason.ALREADY_USED), checks
            )
        checks.ok("nonce_consumed_once")
        now = self.clock()
        final = pending.replace(
            stage=Stage.FINAL,
            nonce=secrets.token_urlsafe(24),
            chosen=chosen,
            ttl=self.final_ttl,
            deadline=now + self.final_ttl,
            extensions=0,
        )
        if not await self.store.pending.swap(pending, final):
            return self._refused(evidence, pending, Reason.NOT_OPEN, checks)
        return Outcome(final, evidence.decision, False, checks.done())

    async def _release(
        self, evidence: Evidence, pending: PendingSet, chosen: int, checks: Checklist
    ) -> Outcome:
        """Claim the set, spend the nonce, run the write once, leave a receipt."""
        now = self.clock()
        claimed = pending.replace(status=Status.EXECUTING, chosen=chosen, decided_at=now)
        if not await self.store.pending.swap(pending, claimed):
            return self._refused(
                evidence, pending, checks.fail("nonce_consumed_once", Reason.NOT_OPEN), checks
            )
        faults.reach("after_claim")
        if not await self.store.ledger.consume(
            "nonce:" + pending.nonce, expires_at=pending.deadline + 3600
        ):
            # Another replica spent this nonce under a set restored from an older copy: stop.
            await self._swap_eventually(claimed, status=Status.UNKNOWN, error="nonce already spent")
            return self._refused(
                evidence, pending, checks.fail("nonce_consumed_once", Reason.ALREADY_USED), checks
            )
        checks.ok("nonce_consumed_once")
        faults.reach("after_nonce")
        action = pending.actions[chosen - 1]
        outcome, result, error, executed_at = await self._call(action)
        faults.reach("after_call")
        receipt = await self._append_receipt(
            user=pending.user,
            pending_id=pending.id,
            action=action,
            risk=pending.risk,
            mode=pending.mode,
            outcome=outcome,
            proposed_at=pending.created_at,
            decided_at=now,
            executed_at=executed_at,
            checks=checks.done(),
            evidence=evidence,
            result=result,
            error=error,
        )
        faults.reach("after_receipt")
        final = await self._swap_eventually(
            claimed,
            status=Status.CONFIRMED if outcome == "executed" else Status.FAILED,
            result=result,
            error=error,
            receipt_id=receipt.id,
        )
        faults.reach("after_record")
        reason = None if outcome == "executed" else Reason.UPSTREAM_FAILED
        return Outcome(final, evidence.decision, True, checks.done(), reason, receipt)

    async def _call(self, action: Action) -> tuple[str, Any, str | None, float | None]:
        """Call the upstream once. This is the one boundary where any exception is caught:
        whatever the upstream raises, the write is recorded as failed and never retried."""
        try:
            result = await self.executor(action.tool, action.arguments)
        except StoreUnavailable:
            raise
        except Exception as exc:  # the one documented boundary: see the docstring
            return "failed", None, f"{type(exc).__name__}: {exc}", self.clock()
        return "executed", _recordable(result), None, self.clock()

    async def _append_receipt(
        self,
        *,
        user: str,
        pending_id: str,
        action: Action,
        risk: Risk,
        mode: str,
        outcome: str,
        proposed_at: float,
        decided_at: float,
        executed_at: float | None,
        checks: tuple[Check, ...],
        evidence: Evidence | None,
        result: Any,
        error: str | None,
    ) -> Receipt:
        receipt_id = "rcpt_" + secrets.token_urlsafe(12)

        def make(seq: int, prev_digest: str) -> Receipt:
            return seal(
                Receipt(
                    id=receipt_id,
                    user=user,
                    seq=seq,
                    prev_digest=prev_digest,
                    pending_id=pending_id,
                    tool=action.tool,
                    arguments=action.arguments,
                    args_hash=action.args_hash,
                    card_text=action.card_text,
                    risk=risk,
                    mode=mode,
                    outcome=outcome,
                    proposed_at=proposed_at,
                    decided_at=decided_at,
                    executed_at=executed_at,
                    checks=checks,
                    device_id=evidence.device_id if evidence else None,
                    modality=evidence.modality if evidence else None,
                    input=evidence.input if evidence else None,
                    transcript=evidence.transcript if evidence else None,
                    recogniser=evidence.recogniser if evidence else None,
                    model=evidence.model if evidence else None,
                    fingerprint_id=evidence.fingerprint_id if evidence else None,
                    result=result,
                    error=error,
                ),
                self.receipt_keys,
            )

        return await self.store.receipts.append(user, make)

    async def _settle_without_release(
        self, evidence: Evidence, pending: PendingSet, checks: Checklist, status: Status
    ) -> Outcome:
        closed = pending.replace(status=status, decided_at=self.clock())
        if not await self.store.pending.swap(pending, closed):
            return self._refused(evidence, pending, Reason.NOT_OPEN, checks)
        return Outcome(closed, evidence.decision, False, checks.done())

    async def _close(self, pending_id: str, status: Status, *, user: str | None) -> PendingSet:
        for _ in range(SWAP_ATTEMPTS):
            pending = await self._get(pending_id)
            if user is not None:
                self._require_owner(pending, user)
            if pending.status is not Status.WAITING:
                raise Refused(Reason.NOT_OPEN)
            closed = pending.replace(status=status, decided_at=self.clock())
            if await self.store.pending.swap(pending, closed):
                return closed
        raise Refused(Reason.BUSY, "the set kept changing while it was being closed")

    async def _swap_eventually(self, current: PendingSet, **changes: Any) -> PendingSet:
        """Record changes on a set this process has claimed; only ``extend`` can race it."""
        for _ in range(SWAP_ATTEMPTS):
            updated = current.replace(**changes)
            if await self.store.pending.swap(current, updated):
                return updated
            latest = await self.store.pending.get(current.id)
            if latest is None:
                break
            current = latest
        return current

    async def _get(self, pending_id: str) -> PendingSet:
        pending = await self.store.pending.get(pending_id)
        if pending is None:
            raise Refused(Reason.UNKNOWN_PENDING)
        return pending

    @staticmethod
    def _require_owner(pending: PendingSet, user: str) -> None:
        if pending.user != user:
            raise Refused(Reason.WRONG_DEVICE_USER)

    def _refused(
        self,
        evidence: Evidence,
        pending: PendingSet | None,
        reason: Reason,
        checks: Checklist,
    ) -> Outcome:
        shown = pending or _placeholder(evidence)
        recorded = checks.done()
        refusal = Decision(Kind.REFUSE, None, reason)
        return Outcome(shown, refusal, False, recorded, reason)


def _recorded(pending: PendingSet, receipt: Receipt) -> PendingSet:
    """``pending`` with the result its receipt holds, as the release would have recorded it."""
    status = {"executed": Status.CONFIRMED, "failed": Status.FAILED}.get(
        receipt.outcome, Status.UNKNOWN
    )
    return pending.replace(
        status=status, result=receipt.result, error=receipt.error, receipt_id=receipt.id
    )


def _recordable(result: Any) -> Any:
    """The upstream's result as the receipt can hash it; anything else is kept as text."""
    try:
        canonical_json(result)
    except ValueError:
        return {"unrecordable_result": repr(result)[:2000]}
    return result


def _placeholder(evidence: Evidence) -> PendingSet:
    """A stand-in for an unknown set, so an Outcome always names the id it was asked about."""
    return PendingSet(
        id=evidence.pending_id,
        user=evidence.user,
        actions=(),
        risk=Risk.LOW,
        stage=Stage.CHOOSE,
        nonce="",
        created_at=0.0,
        deadline=0.0,
        ttl=0.0,
        status=Status.EXPIRED,
    )
