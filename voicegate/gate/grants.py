"""Grants: "approve, and allow the same for ten minutes", made on the device, spent by the gate.

A grant is made only with a yes the user's own paired device signed (``make``, called by
``answers`` once the card it answers was released), and only for a set of one card that is
not high-risk, in ``device`` mode, of a tool the operator did not turn grants off for. It is
bound to the user, the upstream, the tool and the exact values of every argument the operator
did not name as free, and it ends at its expiry or after its count, whichever comes first.

A later write of the agent that fits a live grant runs at once (``use``): the count is spent by
one atomic store step (``GrantStore.spend``), so concurrent calls, on any replica, never run
more often than the user allowed; the write then runs through ``approvals.run_confirmed``, so
it runs once and leaves a receipt naming the grant and the card that made it. Anything that
does not fit makes an ordinary card.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from voicegate.canonical import args_hash
from voicegate.domain import (
    Check,
    Evidence,
    Grant,
    GrantAsk,
    GrantMade,
    GrantUse,
    PendingSet,
    Receipt,
    Risk,
    Stage,
)
from voicegate.faults import GRANT_SPENT
from voicegate.gate.approvals import run_confirmed
from voicegate.gate.checks import CheckName
from voicegate.gate.grant_rules import GrantRules
from voicegate.gate.proposals import ActionRequest
from voicegate.gate.wiring import Granting
from voicegate.reasons import Reason

__all__ = [
    "fits",
    "fixed_hash",
    "make",
    "offer",
    "plan",
    "refusal",
    "split",
    "terms",
    "use",
    "within",
]


def split(
    arguments: Mapping[str, Any], free: Sequence[str]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The arguments a grant keeps fixed (all but the ``free`` names), and the free names the
    call had."""
    fixed = {k: v for k, v in arguments.items() if k not in free}
    varying = tuple(sorted(k for k in arguments if k in free))
    return fixed, varying


def fixed_hash(tool: str, fixed: Mapping[str, Any]) -> str:
    """The canonical hash a grant binds: the tool and its fixed arguments."""
    return args_hash({"tool": tool, "fixed": dict(fixed)})


def fits(grant: Grant, *, upstream: str, tool: str, arguments: Mapping[str, Any]) -> bool:
    """Whether a call of ``tool`` with ``arguments`` on ``upstream`` is the same as ``grant``
    allows: same upstream and tool, and every argument but the free ones exactly as fixed (none
    missing, none added). Pure; liveness is the store's to judge when it spends."""
    if grant.upstream != upstream or grant.tool != tool:
        return False
    fixed, _ = split(arguments, grant.free)
    return hmac.compare_digest(fixed_hash(tool, fixed), grant.fixed_hash)


def within(rules: GrantRules, grant: Grant) -> bool:
    """Whether ``grant`` is still inside the operator's bounds as they are now: an operator who
    narrows ``--grant-free``, ``--grant-max`` or ``--grant-max-uses`` narrows grants already
    made, which then run nothing."""
    if not set(grant.free) <= set(rules.free_for(grant.tool)):
        return False
    # Whole minutes by construction (``GrantIn``); rounded, as the float sum and difference of
    # two clock readings may be a hair over them.
    minutes = round((grant.expires_at - grant.created_at) / 60.0)
    return grant.max_uses <= rules.max_uses and minutes <= rules.max_minutes


def refusal(w: Granting, pending: PendingSet, ask: GrantAsk) -> Reason | None:
    """Why ``ask`` may not become a grant with a yes to ``pending``, or None when it may.

    Never for a set of several cards (a choice among them is not "the same"), a high-risk tool
    (it asks for its own second step every time), a tool not approved on the device (token or
    reject mode), one the operator turned grants off for, nor past the operator's bounds.
    """
    policy = w.policy
    rules = policy.grants
    if len(pending.actions) != 1:
        return Reason.GRANT_SEVERAL_CARDS
    tool = pending.actions[0].tool
    if pending.risk is Risk.HIGH or policy.risk_of(tool) is Risk.HIGH:
        return Reason.GRANT_HIGH_RISK
    if (
        pending.mode != "device"
        or policy.device_refusal(tool) is not None
        or not rules.allows(tool)
    ):
        return Reason.GRANT_OFF
    if not 1 <= ask.minutes <= rules.max_minutes or not 1 <= ask.uses <= rules.max_uses:
        return Reason.GRANT_BEYOND_LIMIT
    return None


def offer(w: Granting, pending: PendingSet) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """What a yes to ``pending`` may allow again: the names of the arguments a grant would keep
    fixed and of those that would vary; None where no grant may be asked for."""
    if pending.stage is not Stage.CHOOSE or refusal(w, pending, GrantAsk(1, 1)) is not None:
        return None
    action = pending.actions[0]
    fixed, varying = split(action.arguments, w.policy.grants.free_for(action.tool))
    return tuple(sorted(fixed)), varying


def plan(w: Granting, evidence: Evidence, pending: PendingSet) -> Grant:
    """The grant ``evidence`` asks for with its yes to ``pending``, before the release: its
    terms go into that release's receipt (``terms``), and ``make`` stores it once released."""
    assert evidence.grant is not None and len(pending.actions) == 1
    action = pending.actions[0]
    # Free only what the page showed as varying: a free name the approved call did not have
    # stays out (fixed as absent), so a later call that adds it makes a card.
    fixed, free = split(action.arguments, w.policy.grants.free_for(action.tool))
    now = w.clock()
    return Grant(
        id="g_" + secrets.token_urlsafe(12),
        user=pending.user,
        upstream=w.policy.upstream,
        tool=action.tool,
        fixed=fixed,
        fixed_hash=fixed_hash(action.tool, fixed),
        free=free,
        created_at=now,
        expires_at=now + 60.0 * evidence.grant.minutes,
        max_uses=evidence.grant.uses,
        uses_left=evidence.grant.uses,
        device_id=evidence.device_id,
        pending_id=pending.id,
        receipt_id="",
    )


def terms(grant: Grant) -> GrantMade:
    """What the receipt of the card that makes ``grant`` says of it."""
    return GrantMade(
        grant_id=grant.id,
        tool=grant.tool,
        fixed=tuple(sorted(grant.fixed)),
        free=grant.free,
        minutes=round((grant.expires_at - grant.created_at) / 60.0),
        expires_at=grant.expires_at,
        uses=grant.max_uses,
    )


async def make(w: Granting, planned: Grant, receipt: Receipt) -> Grant:
    """Store ``planned`` (``plan``), now that its yes released its card with ``receipt``."""
    grant = dataclasses.replace(planned, receipt_id=receipt.id)
    await w.store.grants.add(grant)
    return grant


async def use(
    w: Granting, user: str, tool: str, arguments: Mapping[str, Any]
) -> tuple[Grant, Receipt] | None:
    """Run a write of ``user`` at once under a live grant it fits, or None to make a card.

    The policy is read now: a tool made high-risk, moved off the device or whose grants were
    turned off since the grant was made runs under no grant.
    """
    if w.policy.risk_of(tool) is Risk.HIGH or w.policy.device_refusal(tool) is not None:
        return None
    if not w.policy.grants.allows(tool):
        return None
    now = w.clock()
    for grant in await w.store.grants.live(user, now):
        if not fits(grant, upstream=w.policy.upstream, tool=tool, arguments=arguments):
            continue
        if not within(w.policy.grants, grant):
            continue
        # Revoking a device ends its grants (``GrantStore.end_for_device``); a device revoked
        # some other way still makes nothing run.
        maker = await w.store.devices.get(grant.device_id)
        if maker is None or maker.revoked_at is not None:
            continue
        spent = await w.store.grants.spend(grant.id, now)
        if spent is None:  # a racing call took its last use, or it ended meanwhile
            continue
        # A crash here loses this use and runs nothing: the count is never handed out twice.
        w.on_step(GRANT_SPENT)
        receipt = await run_confirmed(
            w,
            user,
            ActionRequest(tool=tool, arguments=arguments),
            mode="grant",
            # Unique per use: the atomic spend hands each call its own count.
            spend_key=f"grant:{spent.id}:{spent.uses_left}",
            spend_until=spent.expires_at,
            checks=(
                Check(CheckName.GRANT_FITS.value, True),
                Check(CheckName.GRANT_SPENT_ONCE.value, True),
            ),
            proposed_at=now,
            grant=GrantUse(
                grant_id=spent.id,
                made_by=spent.pending_id,
                made_receipt=spent.receipt_id,
                uses_left=spent.uses_left,
                expires_at=spent.expires_at,
                max_uses=spent.max_uses,
                free=spent.free,
            ),
        )
        return spent, receipt
    return None
