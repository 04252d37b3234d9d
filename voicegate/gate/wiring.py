"""What each room of the gate reads, and no more: one ``Protocol`` per room.

``Gate`` holds its parts as plain attributes and passes itself to each room (``proposals``,
``answers``, ``release``, ``settlement``, ``approvals``, ``grants``, ``batch``), which reads
them at the moment it needs them: a caller that swaps the upstream or the backlog on a running
gate is obeyed at once. Each room takes the protocol below that names only the parts it reads,
and those of the rooms it calls on: a room that starts reading another part says so here, and
mypy holds it to that.

- ``Ledger``: the store, the clock and the backlog of what the store could not take yet;
- ``Proposing`` (``proposals``): a ``Ledger`` and the bounds on sets and their ``Timing``;
- ``Sealing`` (``settlement``, and ``release.append``): a ``Ledger`` and the receipt keys;
- ``Releasing`` (``release``): ``Sealing``, the upstream and the step hook;
- ``Approving`` (``approvals``): ``Releasing`` and which tools are writes;
- ``Granting`` (``grants``): ``Approving`` and the policy a grant is bound by;
- ``Answering`` (``answers``, ``batch``): all of these, and the high-risk second step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
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
    """What a write approved outside the card flow reads."""

    is_write: Callable[[str], bool]


class Granting(Approving, Protocol):
    """What making, offering and spending a grant read."""

    # Why a waiting card of a tool may not be released from a device now (None: it may), and
    # the risk the operator gives a tool now: the policy as it stands when the user answers.
    device_refusal: Callable[[str], Reason | None]
    risk_of: Callable[[str], Risk]
    # The upstream this gate stands in front of (``UpstreamSpec.describe``), which grants bind,
    # and the operator's bounds on grants.
    upstream: str
    grant_rules: GrantRules


class Answering(Proposing, Granting, Protocol):
    """What acting on an answer reads: every room's parts, and the high-risk second step."""

    # What a high-risk card of a tool asks after its choice, by the policy as it stands now.
    step_of: Callable[[str], HighRiskStep]
    # Whom passkeys are made for (RP id and origins); None where passkeys cannot work.
    relying_party: RelyingParty | None
