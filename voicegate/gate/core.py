"""The gate: proposes pending card sets and releases a write only when every named check passes.

A write runs at most once. The order of a release is: claim the set by compare-and-swap
(``waiting`` -> ``executing``), spend its nonce in the ledger, call the upstream, then append
a receipt and record the result. An approval made outside the card flow (a token, the client's
own dialog) is claimed the same way, as a set created ``executing``, before its key is spent.

A crash anywhere in that order leaves the set ``executing``; ``settle_interrupted`` settles it
and nothing runs it again. It takes what its receipt says when the crash came after the
receipt; else it tries to spend the set's key itself: when that works the key was never spent,
so nothing ran (``NEVER_RAN``); when the key was spent the write may have run (``MAY_HAVE_RUN``).

A store that fails after the upstream was called never turns into "nothing ran": the outcome
is answered as ``OUTCOME_UNRECORDED``, kept in the ``Backlog`` and written once the store
answers again. ``faults.reach`` marks each step for the crash tests and does nothing unless
``VOICEGATE_FAULT_POINT`` is set.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicegate.canonical import args_hash, canonical_json
from voicegate.errors import Refused, StoreUnavailable
from voicegate.gate import card, faults, quota
from voicegate.gate.backlog import RETRY_DELAYS, Backlog, Job
from voicegate.gate.checks import Checklist
from voicegate.gate.receipts import seal
from voicegate.gate.types import (
    Action,
    Check,
    Choice,
    Decision,
    DeviceKind,
    Evidence,
    FirstYes,
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
# A spent key is kept this long past its set's deadline (1 hour, in seconds). Settlement may read
# "not spent" as "never ran" only while the key cannot have been pruned.
KEY_HOLD = 3600.0
# Sets claimed for approvals made outside the card flow; their nonce is the whole ledger key.
OUTSIDE_PREFIX = "r_"

NEVER_RAN = (
    "interrupted before its approval was spent: nothing ran and nothing will; propose it again "
    "if it is still wanted"
)
MAY_HAVE_RUN = (
    "interrupted after its approval was spent and before a result was recorded: it may have "
    "run once; it will not be run again"
)
UNRECORDED = (
    "ran once; the store was unreachable, so this outcome is not recorded yet; it will be "
    "recorded when the store returns"
)
# A key spent by someone else (a replica working from an older copy of the set): not run here.
APPROVAL_SPENT = "its approval was already spent elsewhere; it did not run here"

logger = logging.getLogger(__name__)

__all__ = [
    "MAY_HAVE_RUN",
    "NEVER_RAN",
    "UNRECORDED",
    "ActionRequest",
    "Executor",
    "Gate",
    "Outcome",
]


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
        retry_delays: Sequence[float] = RETRY_DELAYS,
        limits: quota.ProposalLimits | None = quota.DEFAULT,
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
        self.backlog = Backlog(delays=retry_delays)
        self.limits = limits

    # -- proposing and reading ---------------------------------------------------------------

    async def propose(
        self,
        user: str,
        actions: Sequence[ActionRequest],
        *,
        risk: Risk,
        preview: str = "",
        mode: str = "device",
        agent: str = "",
    ) -> PendingSet:
        """Open a set of 1-5 cards for ``user``; the agent gets the set without its nonce.

        ``agent`` names the agent token (``quota.agent_id``) whose proposal budget it spends;
        past any of ``limits`` it is refused (``quota.admit``) and nothing is stored. A gate
        built with ``limits=None`` (benchmarks) proposes without bounds.
        """
        if not 1 <= len(actions) <= MAX_CARDS:
            raise ValueError(f"a pending set holds 1 to {MAX_CARDS} actions, not {len(actions)}")
        if self.limits is not None:
            await quota.admit(
                self.store,
                self.limits,
                user=user,
                agent=agent,
                arguments=[a.arguments for a in actions],
                now=self.clock(),
            )
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
        """The set as it stands now; a waiting set past its deadline becomes ``expired``.

        A set whose outcome this process still holds is written first; while the store stays
        down its status answers from memory: the outcome, marked ``UNRECORDED``.
        """
        job = self.backlog.get(pending_id)
        if job is not None:
            # A poll tries the store once, but never queues behind the retry loop.
            await self.backlog.flush(wait=False)
            if self.backlog.get(pending_id) is job and job.view is not None:
                return job.view
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
        if not _shown_enough(action, chosen, evidence):
            return self._refused(
                evidence,
                pending,
                checks.fail("shown_in_full", Reason.NOT_SHOWN_IN_FULL),
                checks,
            )
        checks.ok("shown_in_full")
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
        """More time (WCAG 2.2.1): the stage's TTL is added to the deadline, at most
        ``max_extensions`` times.

        Adding, not resetting to now + TTL: asked for right after a card appears, a reset would
        gain a few seconds and still spend one of the extensions.
        """
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
                deadline=pending.deadline + pending.ttl,
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
        risk: Risk = Risk.LOW,
        proposed_at: float | None = None,
    ) -> Receipt:
        """Run a write already approved outside the card flow (a token, or the client's dialog).

        The approval is claimed as a set created ``executing`` (a second claim of the same
        ``spend_key`` raises ``Refused(ALREADY_USED)``), then ``spend_key`` is consumed, so the
        same approval runs once and a crash leaves a set for ``settle_interrupted``. ``risk``
        and ``proposed_at`` (when the approval was asked for) go into the receipt. A store that
        fails after the call raises ``Refused(OUTCOME_UNRECORDED)``: it ran, its receipt follows.
        """
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
            await self.store.pending.create(claim)
        except ValueError:
            raise Refused(Reason.ALREADY_USED) from None
        try:
            spent = await self.store.ledger.consume(key, expires_at=claim.deadline + KEY_HOLD)
        except StoreUnavailable:
            # Nothing ran: once the store is back the claim is closed as never run.
            self.backlog.add(Job(claim.id, lambda: self._settle(claim, may_have_run=False)))
            raise
        if not spent:
            await self._swap_eventually(claim, status=Status.FAILED, error=APPROVAL_SPENT)
            raise Refused(Reason.ALREADY_USED)
        recorded = (*checks, Check("approval_consumed_once", True))
        outcome, result, error, executed_at = await self._call(action)
        draft = self._draft(
            claim,
            outcome=outcome,
            decided_at=now,
            executed_at=executed_at,
            checks=recorded,
            evidence=None,
            result=result,
            error=error,
        )
        _, receipt = await self._write_outcome(claim, draft)
        if receipt is None:
            raise Refused(
                Reason.OUTCOME_UNRECORDED, f"receipt {draft.id} follows", pending_id=claim.id
            )
        return receipt

    async def run_delegated(self, user: str, request: ActionRequest) -> Receipt:
        """Run at once, trusting the client's own dialog; the receipt says so."""
        return await self.run_confirmed(
            user, request, mode="delegate", spend_key=None, spend_until=0.0
        )

    async def settle_interrupted(self, *, grace: float = 0.0) -> int:
        """After a crash: every set left ``executing`` is settled, with a receipt.

        Only sets claimed at least ``grace`` seconds ago are settled, so a replica starting
        beside others does not settle a release another replica is still running; a lone
        process settles with no grace at start. Outcomes this process still holds are written
        first, and never settled as unknown.

        A set whose receipt was already written (the crash came between the receipt and the
        record) takes the receipt's outcome instead, so it never gets a second receipt. Else the
        set's key is spent here: if that works nothing ran (``NEVER_RAN``, status ``failed``);
        if it was spent already the write may have run (``MAY_HAVE_RUN``, status ``unknown``).
        """
        await self.backlog.flush()
        settled = await self._repair_settled()
        now = self.clock()
        cutoff = now - grace
        for pending in await self.store.pending.list_by_status(Status.EXECUTING.value):
            if (pending.decided_at or pending.created_at) > cutoff:
                continue
            if self.backlog.get(pending.id) is not None:
                continue
            written = await self._receipt_of(pending)
            if written is not None:
                if await self.store.pending.swap(pending, _recorded(pending, written)):
                    settled += 1
                continue
            expires_at = pending.deadline + KEY_HOLD
            # Past its hold the key may have been pruned: "not spent" would prove nothing.
            spent = now > expires_at or not await self.store.ledger.consume(
                _spend_key(pending), expires_at=expires_at
            )
            if await self._settle(pending, may_have_run=spent):
                settled += 1
        return settled

    async def _settle(self, pending: PendingSet, *, may_have_run: bool) -> bool:
        """Close an ``executing`` set nobody will finish, with a receipt; False if it moved.

        The set is closed first, naming its receipt, so two settlers never both write one; the
        receipt follows. A store lost between the two leaves a closed set whose receipt is
        missing, which ``_repair_settled`` writes on the next settlement.
        """
        if may_have_run:
            status, error = Status.UNKNOWN, MAY_HAVE_RUN
        else:
            status, error = Status.FAILED, NEVER_RAN
        receipt_id = _new_receipt_id()
        closed = pending.replace(status=status, error=error, receipt_id=receipt_id)
        if not await self.store.pending.swap(pending, closed):
            return False
        await self._append(self._settled_draft(closed))
        return True

    def _settled_draft(self, closed: PendingSet) -> Receipt:
        """The receipt a settled set names: everything in it comes from the set itself."""
        assert closed.receipt_id is not None
        outcome = "unknown" if closed.status is Status.UNKNOWN else "not_run"
        draft = self._draft(
            closed,
            outcome=outcome,
            decided_at=closed.decided_at or closed.created_at,
            executed_at=None,
            checks=(),
            evidence=None,
            result=None,
            error=closed.error,
        )
        return dataclasses.replace(draft, id=closed.receipt_id)

    async def _repair_settled(self) -> int:
        """Write the receipt of every settled set whose receipt the store lost on the way."""
        repaired = 0
        for status, error in ((Status.FAILED, NEVER_RAN), (Status.UNKNOWN, MAY_HAVE_RUN)):
            for pending in await self.store.pending.list_by_status(status.value):
                if pending.error != error or pending.receipt_id is None:
                    continue
                if await self.store.receipts.get(pending.receipt_id) is None:
                    await self._append(self._settled_draft(pending))
                    repaired += 1
        return repaired

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
            _spend_key(pending), expires_at=pending.deadline + KEY_HOLD
        ):
            return self._refused(
                evidence, pending, checks.fail("nonce_consumed_once", Reason.ALREADY_USED), checks
            )
        checks.ok("nonce_consumed_once")
        now = self.clock()
        first_yes = FirstYes(
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
        final = pending.replace(
            stage=Stage.FINAL,
            nonce=secrets.token_urlsafe(24),
            chosen=chosen,
            ttl=self.final_ttl,
            deadline=now + self.final_ttl,
            extensions=0,
            first_yes=first_yes,
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
        try:
            spent = await self.store.ledger.consume(
                _spend_key(claimed), expires_at=claimed.deadline + KEY_HOLD
            )
        except StoreUnavailable:
            # Nothing ran: once the store is back the set waits again, under a fresh nonce.
            self.backlog.add(Job(claimed.id, lambda: self._reopen(pending, claimed)))
            raise
        if not spent:
            # Another replica spent this nonce under a set restored from an older copy: stop.
            await self._swap_eventually(claimed, status=Status.UNKNOWN, error=APPROVAL_SPENT)
            return self._refused(
                evidence, pending, checks.fail("nonce_consumed_once", Reason.ALREADY_USED), checks
            )
        checks.ok("nonce_consumed_once")
        faults.reach("after_nonce")
        outcome, result, error, executed_at = await self._call(pending.actions[chosen - 1])
        faults.reach("after_call")
        draft = self._draft(
            claimed,
            outcome=outcome,
            decided_at=now,
            executed_at=executed_at,
            checks=checks.done(),
            evidence=evidence,
            result=result,
            error=error,
        )
        final, receipt = await self._write_outcome(claimed, draft)
        faults.reach("after_record")
        if receipt is None:
            reason: Reason | None = Reason.OUTCOME_UNRECORDED
        else:
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

    async def _write_outcome(
        self, claimed: PendingSet, draft: Receipt
    ) -> tuple[PendingSet, Receipt | None]:
        """Append the receipt of a write that ran and record its result on the set.

        When the store fails on the way the outcome goes to the backlog, and the answer is the
        set as it will be recorded, marked ``UNRECORDED``; the receipt is None when it is not
        written yet.
        """
        receipt: Receipt | None = None
        try:
            receipt = await self._append(draft)
            faults.reach("after_receipt")
            return await self._record(claimed, receipt), receipt
        except StoreUnavailable as exc:
            logger.warning("%s ran; its outcome waits for the store: %s", claimed.id, exc)
            view = _unrecorded(claimed, draft, receipt)
            self.backlog.add(Job(claimed.id, lambda: self._write_again(claimed, draft), view))
            return view, receipt

    async def _write_again(self, claimed: PendingSet, draft: Receipt) -> None:
        """The backlog's retry: the receipt unless it got in before, then the record.

        A set that another replica settled meanwhile (the outage outlasted the lease) keeps
        that settlement and its one receipt: this outcome is logged, not written over it.
        """
        current = await self.store.pending.get(claimed.id)
        if current is None or current.version != claimed.version:
            logger.warning(
                "%s ran (%s) but was settled elsewhere while the store was away; receipt %s "
                "not written",
                claimed.id,
                draft.outcome,
                draft.id,
            )
            return
        receipt = await self.store.receipts.get(draft.id)
        if receipt is None:
            receipt = await self._append(draft)
        await self._record(claimed, receipt)

    async def _record(self, claimed: PendingSet, receipt: Receipt) -> PendingSet:
        """Record on the set what its receipt says."""
        recorded = _recorded(claimed, receipt)
        return await self._swap_eventually(
            claimed,
            status=recorded.status,
            result=recorded.result,
            error=recorded.error,
            receipt_id=recorded.receipt_id,
        )

    async def _reopen(self, pending: PendingSet, claimed: PendingSet) -> None:
        """A claim whose nonce the store failed to spend: nothing ran, the set waits again.

        A fresh nonce, since the old one may have been spent all the same.
        """
        reopened = claimed.replace(
            status=Status.WAITING,
            chosen=pending.chosen,
            decided_at=pending.decided_at,
            nonce=secrets.token_urlsafe(24),
        )
        await self.store.pending.swap(claimed, reopened)

    def _draft(
        self,
        pending: PendingSet,
        *,
        outcome: str,
        decided_at: float,
        executed_at: float | None,
        checks: tuple[Check, ...],
        evidence: Evidence | None,
        result: Any,
        error: str | None,
    ) -> Receipt:
        """The receipt of ``pending``'s chosen action, not yet sealed nor linked into a chain."""
        assert pending.chosen is not None
        action = pending.actions[pending.chosen - 1]
        return Receipt(
            id=_new_receipt_id(),
            user=pending.user,
            seq=0,
            prev_digest="",
            pending_id=pending.id,
            tool=action.tool,
            arguments=action.arguments,
            args_hash=action.args_hash,
            card_text=action.card_text,
            risk=pending.risk,
            mode=pending.mode,
            outcome=outcome,
            proposed_at=pending.created_at,
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
            first_yes=pending.first_yes,
            choice=_choice_of(pending),
            # A device release passed ``shown_in_full``: the screen held the whole text.
            shown_text=card.full(action.tool, action.arguments) if evidence else None,
        )

    async def _append(self, draft: Receipt) -> Receipt:
        """Seal ``draft`` as the next link of its user's chain and append it."""

        def make(seq: int, prev_digest: str) -> Receipt:
            linked = dataclasses.replace(draft, seq=seq, prev_digest=prev_digest)
            return seal(linked, self.receipt_keys)

        return await self.store.receipts.append(draft.user, make, self.receipt_keys)

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
        """Record changes on a set this process holds, retrying over version-only changes.

        A set that moved to another status, or names another receipt, was settled by someone
        else: that stands, and is returned unchanged.
        """
        for _ in range(SWAP_ATTEMPTS):
            updated = current.replace(**changes)
            if await self.store.pending.swap(current, updated):
                return updated
            latest = await self.store.pending.get(current.id)
            if latest is None:
                break
            if (latest.status, latest.receipt_id) != (current.status, current.receipt_id):
                logger.warning("%s was settled elsewhere; its record is kept", current.id)
                return latest
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


_STATUS_OF = {"executed": Status.CONFIRMED, "failed": Status.FAILED, "not_run": Status.FAILED}


def _recorded(pending: PendingSet, receipt: Receipt) -> PendingSet:
    """``pending`` with the result its receipt holds, as the release would have recorded it."""
    return pending.replace(
        status=_STATUS_OF.get(receipt.outcome, Status.UNKNOWN),
        result=receipt.result,
        error=receipt.error,
        receipt_id=receipt.id,
    )


def _unrecorded(claimed: PendingSet, draft: Receipt, receipt: Receipt | None) -> PendingSet:
    """What a status read answers for a write that ran while its outcome waits for the store."""
    error = UNRECORDED if draft.error is None else f"{draft.error}; {UNRECORDED}"
    return claimed.replace(
        status=_STATUS_OF.get(draft.outcome, Status.UNKNOWN),
        result=draft.result,
        error=error,
        receipt_id=receipt.id if receipt is not None else None,
    )


def _choice_of(pending: PendingSet) -> Choice | None:
    """A set of several cards was a choice: its receipt names the question and every option."""
    if len(pending.actions) < 2 or pending.chosen is None:
        return None
    options = tuple(a.card_text for a in pending.actions)
    return Choice(question=pending.preview, options=options, chosen=pending.chosen)


def _new_receipt_id() -> str:
    return "rcpt_" + secrets.token_urlsafe(12)


def _spend_key(pending: PendingSet) -> str:
    """The ledger key whose spending releases ``pending``."""
    if pending.id.startswith(OUTSIDE_PREFIX):
        return pending.nonce
    return "nonce:" + pending.nonce


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


def _shown_enough(action: Action, chosen: int, evidence: Evidence) -> bool:
    """A card shortened for display releases only when the device showed its full text.

    A card that was not cut showed everything already. The device names what it showed in the
    signed answer; a device that names nothing is taken to have shown the short text only.
    """
    if card.full(action.tool, action.arguments) == action.card_text:
        return True
    return chosen in evidence.shown_in_full
