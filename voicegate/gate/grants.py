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

import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from voicegate.canonical import args_hash
from voicegate.errors import ConfigError
from voicegate.gate.approvals import run_confirmed
from voicegate.gate.faults import GRANT_SPENT
from voicegate.gate.proposals import ActionRequest
from voicegate.gate.types import (
    Check,
    Evidence,
    Grant,
    GrantAsk,
    GrantUse,
    PendingSet,
    Receipt,
    Risk,
    Stage,
)
from voicegate.gate.wiring import Wiring
from voicegate.reasons import Reason

__all__ = [
    "DEFAULT_MAX_MINUTES",
    "DEFAULT_MAX_USES",
    "MOST_MINUTES",
    "MOST_USES",
    "GrantRules",
    "fits",
    "fixed_hash",
    "make",
    "offer",
    "parse_free",
    "refusal",
    "split",
    "use",
    "within",
]

# The offer the page makes, "allow the same for 10 minutes", is also the longest a grant may
# run unless the operator says otherwise: long enough for a burst of the same work while the
# user is still about, short enough that a yes to one card does not become standing leave.
DEFAULT_MAX_MINUTES = 10
# A burst, not a stream: past ten repeats the user is asked again.
DEFAULT_MAX_USES = 10
# The most an operator may allow at all: a day, and a thousand repeats. Past that a grant is no
# longer a repeat of one moment's yes but a standing permission, which is a policy (``--mode``).
MOST_MINUTES = 1440
MOST_USES = 1000


@dataclass(frozen=True, slots=True)
class GrantRules:
    """The operator's bounds on grants (``serve --grant-max``, ``--grant-max-uses``,
    ``--grant-free``, ``--no-grants``)."""

    max_minutes: int = DEFAULT_MAX_MINUTES
    max_uses: int = DEFAULT_MAX_USES
    # (tool glob, argument names that may vary under a grant); every match adds its names.
    free: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Tool globs no grant is ever made for.
    off: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.max_minutes <= MOST_MINUTES:
            raise ConfigError(f"--grant-max is 0 to {MOST_MINUTES} minutes (0: no grants)")
        if not 0 <= self.max_uses <= MOST_USES:
            raise ConfigError(f"--grant-max-uses is 0 to {MOST_USES} (0: no grants)")

    @property
    def on(self) -> bool:
        """Whether any grant may be made at all (neither bound is 0)."""
        return self.max_minutes > 0 and self.max_uses > 0

    def allows(self, tool: str) -> bool:
        """Whether grants may be made (and spent) for ``tool`` at all."""
        return self.on and not any(fnmatchcase(tool, glob) for glob in self.off)

    def free_for(self, tool: str) -> tuple[str, ...]:
        """The argument names of ``tool`` that may vary under a grant, sorted."""
        names = {n for glob, named in self.free if fnmatchcase(tool, glob) for n in named}
        return tuple(sorted(names))


def parse_free(values: Sequence[str] | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Parse ``TOOLGLOB=arg,arg`` pairs of ``--grant-free``; a pair without ``=`` or names is a
    ``ConfigError``."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for value in values or ():
        pattern, sep, names = value.partition("=")
        named = tuple(n.strip() for n in names.split(",") if n.strip())
        if not sep or not pattern.strip() or not named:
            raise ConfigError(f"--grant-free needs TOOLGLOB=ARG[,ARG...], got {value!r}")
        out.append((pattern.strip(), named))
    return tuple(out)


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


def refusal(w: Wiring, pending: PendingSet, ask: GrantAsk) -> Reason | None:
    """Why ``ask`` may not become a grant with a yes to ``pending``, or None when it may.

    Never for a set of several cards (a choice among them is not "the same"), a high-risk tool
    (it asks for its own second step every time), a tool not approved on the device (token or
    reject mode), one the operator turned grants off for, nor past the operator's bounds.
    """
    rules = w.grant_rules
    if len(pending.actions) != 1:
        return Reason.GRANT_SEVERAL_CARDS
    tool = pending.actions[0].tool
    if pending.risk is Risk.HIGH or w.risk_of(tool) is Risk.HIGH:
        return Reason.GRANT_HIGH_RISK
    if pending.mode != "device" or w.device_refusal(tool) is not None or not rules.allows(tool):
        return Reason.GRANT_OFF
    if not 1 <= ask.minutes <= rules.max_minutes or not 1 <= ask.uses <= rules.max_uses:
        return Reason.GRANT_BEYOND_LIMIT
    return None


def offer(w: Wiring, pending: PendingSet) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """What a yes to ``pending`` may allow again: the names of the arguments a grant would keep
    fixed and of those that would vary; None where no grant may be asked for."""
    if pending.stage is not Stage.CHOOSE or refusal(w, pending, GrantAsk(1, 1)) is not None:
        return None
    action = pending.actions[0]
    fixed, varying = split(action.arguments, w.grant_rules.free_for(action.tool))
    return tuple(sorted(fixed)), varying


async def make(w: Wiring, evidence: Evidence, pending: PendingSet, receipt: Receipt) -> Grant:
    """Store the grant ``evidence`` asked for, now that its yes released ``pending``'s card."""
    assert evidence.grant is not None and len(pending.actions) == 1
    action = pending.actions[0]
    # Free only what the page showed as varying: a free name the approved call did not have
    # stays out (fixed as absent), so a later call that adds it makes a card.
    fixed, free = split(action.arguments, w.grant_rules.free_for(action.tool))
    now = w.clock()
    grant = Grant(
        id="g_" + secrets.token_urlsafe(12),
        user=pending.user,
        upstream=w.upstream,
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
        receipt_id=receipt.id,
    )
    await w.store.grants.add(grant)
    return grant


async def use(
    w: Wiring, user: str, tool: str, arguments: Mapping[str, Any]
) -> tuple[Grant, Receipt] | None:
    """Run a write of ``user`` at once under a live grant it fits, or None to make a card.

    The policy is read now: a tool made high-risk, moved off the device or whose grants were
    turned off since the grant was made runs under no grant.
    """
    if w.risk_of(tool) is Risk.HIGH or w.device_refusal(tool) is not None:
        return None
    if not w.grant_rules.allows(tool):
        return None
    now = w.clock()
    for grant in await w.store.grants.live(user, now):
        if not fits(grant, upstream=w.upstream, tool=tool, arguments=arguments):
            continue
        if not within(w.grant_rules, grant):
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
            checks=(Check("grant_fits", True), Check("grant_spent_once", True)),
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
