"""What each room of the gate reads, and no more: one ``Protocol`` per room.

``Gate`` holds its parts as plain attributes and passes itself to each room (``proposals``,
``answers``, ``release``, ``settlement``, ``approvals``, ``grants``, ``batch``), which reads
them at the moment it needs them: a caller that swaps the executor, the policy or the backlog on
a running gate is obeyed at once. Each room takes the protocol below that names only the parts it
reads, and those of the rooms it calls on: a room that starts reading another part says so here,
and mypy holds it to that.

Two parts are frozen values passed whole: ``Timing`` (how long a card waits) and ``GatePolicy``
(what the operator decides about each tool, asked at the moment the gate needs the answer).

- ``Ledger``: the store, the clock and the backlog of what the store could not take yet;
- ``Proposing`` (``proposals``): a ``Ledger`` and the bounds on sets and their ``Timing``;
- ``Sealing`` (``settlement``, and ``release.append``): a ``Ledger`` and the receipt keys;
- ``Releasing`` (``release``): ``Sealing``, the upstream and the step hook;
- ``Approving`` (``approvals``): ``Releasing`` and the ``GatePolicy`` (which tools are writes);
- ``Granting`` (``grants``): ``Approving``; it reads the policy's risks, refusals and grant bounds;
- ``Answering`` (``answers``, ``batch``): all of these, and whom passkeys are made for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from voicegate.domain import HighRiskStep, Risk
from voicegate.gate.backlog import Backlog
from voicegate.gate.grant_rules import GrantRules
from voicegate.gate.quota import ProposalLimits
from voicegate.passkey import RelyingParty
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing
from voicegate.store.base import Store

# Runs one write upstream: the tool's name and its arguments, to its result.
Executor = Callable[[str, Mapping[str, Any]], Awaitable[Any]]

__all__ = [
    "DEFAULT_TIMING",
    "Answering",
    "Approving",
    "Executor",
    "GatePolicy",
    "Granting",
    "Ledger",
    "Proposing",
    "Releasing",
    "Sealing",
    "Timing",
]


@dataclass(frozen=True, slots=True)
class Timing:
    """How long a card waits for its answer, and how often the user may ask for more time."""

    # Seconds a set waits at its first stage (choose, or the only yes), and at a high-risk
    # card's second step; each request for more time adds its stage's again.
    choose_ttl: float = 120.0
    final_ttl: float = 60.0
    # WCAG 2.2.1 (Timing Adjustable) asks that the user can extend at least ten times.
    max_extensions: int = 10

    def __post_init__(self) -> None:
        if self.max_extensions < 10:
            raise ValueError("WCAG 2.2.1 asks for at least 10 extensions")


DEFAULT_TIMING = Timing()


def _low(tool: str) -> Risk:
    return Risk.LOW


def _another_yes(tool: str) -> HighRiskStep:
    return HighRiskStep.YES


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """What the operator decides about each tool, which the gate asks when it needs the answer.

    The callables answer by the policy as it stands when they are asked (the MCP front's
    ``Catalog`` answers from the upstream's listing and the operator's ``Policy``), so a card is
    released, granted or stepped by the policy at the user's answer, not at its proposal.
    Without an operator's rule, a registered write may be released from a device at the risk it
    was proposed with, and the second step of a high-risk card is another yes.
    """

    # Whether a tool is a write: only writes are released.
    is_write: Callable[[str], bool]
    # Why a waiting card of a tool may not be released from a device now (None: it may); see
    # ``device_refusal``.
    refusal: Callable[[str], Reason | None] | None = None
    # The risk the operator gives a tool now, and what a high-risk card of it asks after its
    # choice.
    risk_of: Callable[[str], Risk] = _low
    step_of: Callable[[str], HighRiskStep] = _another_yes
    # The upstream this gate stands in front of (``UpstreamSpec.identity``), which grants bind,
    # and the operator's bounds on grants.
    upstream: str = ""
    grants: GrantRules = field(default_factory=GrantRules)

    def device_refusal(self, tool: str) -> Reason | None:
        """Why a waiting card of ``tool`` may not be released from a device now, or None: the
        operator's ``refusal``, else ``NOT_A_WRITE`` for a tool that is not a write."""
        if self.refusal is not None:
            return self.refusal(tool)
        return None if self.is_write(tool) else Reason.NOT_A_WRITE


class Ledger(Protocol):
    """The store, the clock, and what the store could not take yet, to retry."""

    store: Store
    clock: Callable[[], float]
    backlog: Backlog


class Proposing(Ledger, Protocol):
    """What opening, reading, extending and closing a set read."""

    timing: Timing
    limits: ProposalLimits | None


class Sealing(Ledger, Protocol):
    """What appending a receipt, and settling a release a crash cut short, read."""

    receipt_keys: KeyRing


class Releasing(Sealing, Protocol):
    """What a release reads: claim, spend, call the upstream once, receipt, record."""

    executor: Executor
    # Called with the name of each step of a release as it is passed (``faults.POINTS``), and
    # when a granted call's use is spent (``faults.GRANT_SPENT``).
    on_step: Callable[[str], None]


class Approving(Releasing, Protocol):
    """What a write approved outside the card flow reads: the policy says which tools are
    writes."""

    policy: GatePolicy


class Granting(Approving, Protocol):
    """What making, offering and spending a grant read: the policy's risks, device refusals,
    upstream and grant bounds, read as they stand when the grant is made or spent."""


class Answering(Proposing, Granting, Protocol):
    """What acting on an answer reads: every room's parts, and whom passkeys are made for."""

    # Whom passkeys are made for (RP id and origins); None where passkeys cannot work.
    relying_party: RelyingParty | None
