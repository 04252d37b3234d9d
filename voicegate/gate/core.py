"""The gate: proposes pending card sets and releases a write only when every named check passes.

``Gate`` is the one object callers hold; each of its methods is one room of the gate, a module
of its own that reads only the gate's parts it names (its protocol in ``wiring``):

- ``proposals``: open a set, read it, give it more time, cancel or withdraw it;
- ``checks``: the named checks an answer must pass, pure;
- ``answers``: act on an answer that passed them (``batch``: one answer for several cards);
- ``release``: claim, spend, call the upstream once, append the receipt, record the result;
- ``settlement``: settle the sets a crash left ``executing``;
- ``approvals``: writes approved outside the card flow (a token, the client's own dialog);
- ``grants``: "approve, and allow the same for a while": made on the device, spent here.

A write runs at most once, and a crash anywhere in a release leaves a set that
``settle_interrupted`` settles without running it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from voicegate import faults
from voicegate.domain import Check, Evidence, Grant, PendingSet, Receipt, Risk
from voicegate.gate import answers, approvals, batch, proposals, quota, settlement
from voicegate.gate import grants as granting
from voicegate.gate.backlog import Backlog
from voicegate.gate.drafts import UNRECORDED
from voicegate.gate.outcome import Outcome
from voicegate.gate.proposals import MAX_CARDS, ActionRequest
from voicegate.gate.settlement import MAY_HAVE_RUN, NEVER_RAN
from voicegate.gate.wiring import DEFAULT_TIMING, Executor, GatePolicy, Timing
from voicegate.passkey import RelyingParty
from voicegate.secrets import KeyRing
from voicegate.store.base import Store

__all__ = [
    "MAX_CARDS",
    "MAY_HAVE_RUN",
    "NEVER_RAN",
    "UNRECORDED",
    "ActionRequest",
    "Executor",
    "Gate",
    "GatePolicy",
    "Outcome",
    "Timing",
]


class Gate:
    """Pending card sets, the confirm checks, single-use release and receipts.

    Its parts: the ``store``; the ``executor`` that runs a released write upstream; the
    operator's ``policy`` (``GatePolicy``: which tools are writes, their risk, refusal and
    second step, the upstream and the bounds on grants); the ``receipt_keys`` receipts are
    sealed with; whom passkeys are made for (``relying_party``); the ``clock``; the ``timing``
    of cards and the ``limits`` on proposals (None: unbounded); and two hooks.

    ``on_step`` hears each step of a release as it is passed (``faults.POINTS``); by default,
    ``faults.ignore``, it does nothing (the crash tests pass one that kills the process).
    ``on_news`` hears ``("proposed", set)`` once a set is stored and ``("released", set)`` once
    an answer released its write (notifications, ``voicegate.notify``); it must return at once
    and never raise, since the gate does not wait for it.
    """

    def __init__(
        self,
        store: Store,
        *,
        executor: Executor,
        policy: GatePolicy,
        receipt_keys: KeyRing,
        relying_party: RelyingParty | None = None,
        clock: Callable[[], float] = time.time,
        timing: Timing = DEFAULT_TIMING,
        limits: quota.ProposalLimits | None = quota.DEFAULT,
        on_step: Callable[[str], None] = faults.ignore,
        on_news: Callable[[str, PendingSet], None] | None = None,
    ) -> None:
        self.store = store
        self.executor = executor
        self.policy = policy
        self.receipt_keys = receipt_keys
        self.relying_party = relying_party
        self.clock = clock
        self.timing = timing
        self.limits = limits
        self.on_step = on_step
        self.on_news = on_news
        # What the store could not take yet, retried (``backlog.RETRY_DELAYS``); tests swap it.
        self.backlog = Backlog()

    # -- proposing and reading: voicegate.gate.proposals --------------------------------------

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
        """Open a set of 1-5 cards for ``user``; the agent gets the set without its nonce."""
        pending = await proposals.propose(
            self, user, actions, risk=risk, preview=preview, mode=mode, agent=agent
        )
        if self.on_news is not None:
            self.on_news("proposed", pending)
        return pending

    async def status(self, pending_id: str) -> PendingSet:
        """The set as it stands now; a waiting set past its deadline becomes ``expired``."""
        return await proposals.status(self, pending_id)

    async def open_for(self, user: str) -> list[PendingSet]:
        """The sets still waiting for ``user``'s answer, oldest first."""
        return await proposals.open_for(self, user)

    async def paired(self, user: str) -> bool:
        """Whether ``user`` has a paired device that is not revoked, so someone can approve."""
        return any(d.revoked_at is None for d in await self.store.devices.list(user))

    async def receipts(self, user: str | None = None) -> list[Receipt]:
        """Receipts of ``user`` (everyone when None), in chain order."""
        return await self.store.receipts.list(user)

    async def extend(self, pending_id: str, *, user: str) -> PendingSet:
        """More time (WCAG 2.2.1): the stage's TTL is added to the deadline, a bounded number
        of times."""
        return await proposals.extend(self, pending_id, user=user)

    async def cancel(self, pending_id: str, *, user: str) -> PendingSet:
        """The user says no: the set closes and nothing runs."""
        return await proposals.cancel(self, pending_id, user=user)

    async def withdraw(self, pending_id: str) -> PendingSet:
        """The agent takes its proposal back; nothing runs."""
        return await proposals.withdraw(self, pending_id)

    # -- the user's answers: voicegate.gate.answers -------------------------------------------

    async def answer(self, evidence: Evidence) -> Outcome:
        """Run every named check on ``evidence`` and act on it: choose, confirm, cancel, wait."""
        outcome = await answers.answer(self, evidence)
        if outcome.released and self.on_news is not None:
            self.on_news("released", outcome.pending)
        return outcome

    async def answer_all(self, evidences: Sequence[Evidence]) -> list[Outcome]:
        """One answer that approves several one-card sets, each released on its own; refused
        whole where any is several cards or high-risk (``voicegate.gate.batch``)."""
        outcomes = await batch.approve_all(self, evidences)
        if self.on_news is not None:
            for outcome in outcomes:
                if outcome.released:
                    self.on_news("released", outcome.pending)
        return outcomes

    # -- other ways in: voicegate.gate.approvals ----------------------------------------------

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
        """Run a write already approved outside the card flow (a token, or the client's dialog)."""
        return await approvals.run_confirmed(
            self,
            user,
            request,
            mode=mode,
            spend_key=spend_key,
            spend_until=spend_until,
            checks=checks,
            risk=risk,
            proposed_at=proposed_at,
        )

    async def run_delegated(self, user: str, request: ActionRequest) -> Receipt:
        """Run at once, trusting the client's own dialog; the receipt says so."""
        return await approvals.run_delegated(self, user, request)

    # -- grants: voicegate.gate.grants -------------------------------------------------------

    async def use_grant(self, user: str, request: ActionRequest) -> tuple[Grant, Receipt] | None:
        """Run ``request`` at once under a live grant of ``user`` it fits (the grant as spent,
        and the receipt), or None: then it needs a card."""
        return await granting.use(self, user, request.tool, request.arguments)

    def grant_offer(self, pending: PendingSet) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The arguments a yes to ``pending`` could keep fixed and let vary under a grant, or
        None where it may not make one."""
        return granting.offer(self, pending)

    async def grants(self, user: str | None) -> list[Grant]:
        """The live grants of ``user`` (everyone's when None), oldest first."""
        return await self.store.grants.live(user, self.clock())

    async def end_grant(self, grant_id: str, *, user: str | None) -> bool:
        """End a grant now (of ``user`` only, when named); True when it was live."""
        return await self.store.grants.end(grant_id, at=self.clock(), user=user)

    # -- after a crash: voicegate.gate.settlement ---------------------------------------------

    async def settle_interrupted(self, *, grace: float = 0.0) -> int:
        """After a crash: every set left ``executing`` is settled, with a receipt."""
        return await settlement.settle_interrupted(self, grace=grace)
