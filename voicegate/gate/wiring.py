"""What every room of the gate reads: the store, the upstream, the clock and the settings.

``Gate`` holds these as plain attributes and passes itself to each room (``proposals``,
``answers``, ``release``, ``settlement``, ``approvals``), which reads them at the moment it
needs them: a caller that swaps the upstream or the backlog on a running gate is obeyed at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
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

__all__ = ["Executor", "Wiring"]


class Wiring(Protocol):
    """The gate's parts and settings, as the rooms read them."""

    store: Store
    executor: Executor
    is_write: Callable[[str], bool]
    # Why a waiting card of a tool may not be released from a device now (None: it may), and
    # the risk the operator gives a tool now: the policy as it stands when the user answers.
    device_refusal: Callable[[str], Reason | None]
    risk_of: Callable[[str], Risk]
    # What a high-risk card of a tool asks after its choice, by the policy as it stands now.
    step_of: Callable[[str], HighRiskStep]
    # Whom passkeys are made for (RP id and origins); None where passkeys cannot work.
    relying_party: RelyingParty | None
    receipt_keys: KeyRing
    clock: Callable[[], float]
    choose_ttl: float
    final_ttl: float
    max_extensions: int
    backlog: Backlog
    limits: ProposalLimits | None
    # Called with the name of each step of a release as it is passed (``faults.POINTS``), and
    # when a granted call's use is spent (``faults.GRANT_SPENT``).
    on_step: Callable[[str], None]
    # The upstream this gate stands in front of (``UpstreamSpec.describe``), which grants bind,
    # and the operator's bounds on grants.
    upstream: str
    grant_rules: GrantRules
