"""The JSON shapes of the device API (pydantic, at the edge only)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from voicegate.gate import card
from voicegate.gate.core import Outcome
from voicegate.gate.types import Action, Device, PendingSet, Receipt, Stage, Status
from voicegate.reasons import NEXT_STEP, SECOND_YES, YES_NO_NEXT_STEP, Kind, Reason
from voicegate.text import storable


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _storable(self) -> Self:
        # A lone surrogate or a NUL in any text field is refused here as ``bad_request``; a
        # store would refuse to bind it, and that must never read as an outage.
        if not all(storable(v) for v in self.__dict__.values() if isinstance(v, str)):
            raise ValueError("text with a lone surrogate or a NUL character")
        return self


class PairIn(_In):
    """A device asks to pair: the operator's code and the public key it made."""

    code: str = Field(max_length=32, examples=["1234 5678"])
    public_key: dict[str, str] | str = Field(
        description="ECDSA P-256 public key: a JWK object, or SPKI as PEM or base64 DER"
    )
    name: str = Field(default="", max_length=200, examples=["Asha's phone"])


class PairOut(BaseModel):
    """The new device. The server keeps only its public key."""

    device_id: str
    user: str
    kind: str
    algorithm: str
    server_time: float

    @classmethod
    def of(cls, device: Device, now: float) -> PairOut:
        return cls(
            device_id=device.id,
            user=device.user,
            kind=device.kind.value,
            algorithm=device.algorithm,
            server_time=now,
        )


class CardOut(BaseModel):
    """One card: its number as the user says it, the action text and everything that runs.

    ``text`` may cut long values (``… (+N chars)``); ``full_text`` cuts nothing, and
    ``arguments`` are the exact arguments of the call. A yes to a card with ``shortened`` set
    releases only when the answer names it in ``shown`` (the device showed ``full_text``).
    """

    number: int
    tool: str
    text: str
    full_text: str
    shortened: bool
    arguments: dict[str, Any]

    @classmethod
    def of(cls, number: int, action: Action) -> CardOut:
        whole = card.full(action.tool, action.arguments)
        return cls(
            number=number,
            tool=action.tool,
            text=action.card_text,
            full_text=whole,
            shortened=whole != action.card_text,
            arguments=dict(action.arguments),
        )


class PendingOut(BaseModel):
    """A waiting set as the device shows it; ``nonce`` is seen by the device only."""

    id: str
    cards: list[CardOut]
    stage: str
    risk: str
    status: str
    preview: str
    chosen: int | None
    deadline: float
    seconds_left: float
    extensions_left: int
    nonce: str

    @classmethod
    def of(cls, pending: PendingSet, *, now: float, max_extensions: int) -> PendingOut:
        return cls(
            id=pending.id,
            cards=[CardOut.of(i, a) for i, a in enumerate(pending.actions, start=1)],
            stage=pending.stage.value,
            risk=pending.risk.value,
            status=pending.status.value,
            preview=pending.preview,
            chosen=pending.chosen,
            deadline=pending.deadline,
            seconds_left=max(0.0, pending.deadline - now),
            extensions_left=max(0, max_extensions - pending.extensions),
            nonce=pending.nonce,
        )


class PendingList(BaseModel):
    """This user's waiting sets, oldest first."""

    sets: list[PendingOut]
    server_time: float
    voice: bool = Field(
        default=True,
        description="Whether this server takes spoken answers; false on a --no-voice server, "
        "where a device offers taps only.",
    )


class TapIn(_In):
    """A tap (or key, or switch press) on a card."""

    pending_id: str = Field(max_length=100)
    nonce: str = Field(max_length=200)
    decision: Literal["choose", "confirm", "cancel"]
    card: int | None = Field(default=None, ge=1, le=5)
    input: Literal["touch", "key", "switch"] = "touch"
    shown: list[Annotated[int, Field(ge=1, le=5)]] = Field(
        default_factory=list,
        max_length=5,
        description="The cards whose full text this device showed; a shortened card needs it",
    )


class MoreTimeIn(_In):
    """Ask for more time on one set (WCAG 2.2.1)."""

    pending_id: str = Field(max_length=100)


class AnswerOut(BaseModel):
    """What one answer did: the decision, what was heard, and what to do next."""

    pending_id: str
    decision: str
    card: int | None
    card_text: str | None
    released: bool
    reason: str | None
    next_step: str
    heard: list[str]
    status: str
    stage: str
    deadline: float
    seconds_left: float
    receipt_id: str | None

    @classmethod
    def of(cls, outcome: Outcome, *, now: float, heard: list[str]) -> AnswerOut:
        pending = outcome.pending
        card = outcome.decision.card or pending.chosen
        text = (
            pending.actions[card - 1].card_text
            if card is not None and 1 <= card <= len(pending.actions)
            else None
        )
        return cls(
            pending_id=pending.id,
            decision=outcome.decision.kind.value,
            card=card,
            card_text=text,
            released=outcome.released,
            reason=outcome.reason.value if outcome.reason else None,
            next_step=next_step(outcome),
            heard=heard,
            status=pending.status.value,
            stage=pending.stage.value,
            deadline=pending.deadline,
            seconds_left=max(0.0, pending.deadline - now),
            receipt_id=outcome.receipt.id if outcome.receipt else None,
        )


class ReceiptOut(BaseModel):
    """A receipt as the user's device lists it."""

    id: str
    seq: int
    pending_id: str
    tool: str
    card_text: str
    outcome: str
    decided_at: float
    executed_at: float | None
    device_id: str | None
    modality: str | None
    input: str | None
    transcript: str | None
    shown_text: str | None
    checks: list[dict[str, Any]]

    @classmethod
    def of(cls, receipt: Receipt) -> ReceiptOut:
        return cls(
            id=receipt.id,
            seq=receipt.seq,
            pending_id=receipt.pending_id,
            tool=receipt.tool,
            card_text=receipt.card_text,
            outcome=receipt.outcome,
            decided_at=receipt.decided_at,
            executed_at=receipt.executed_at,
            device_id=receipt.device_id,
            modality=receipt.modality.value if receipt.modality else None,
            input=receipt.input.value if receipt.input else None,
            transcript=receipt.transcript,
            shown_text=receipt.shown_text,
            checks=[
                {"name": c.name, "passed": c.passed, "reason": c.reason.value if c.reason else None}
                for c in receipt.checks
            ],
        )


def next_step(outcome: Outcome) -> str:
    """What the user can do after ``outcome``: the reason's step (worded for a yes-or-no
    question where that differs), or, after the first yes to a high-risk action, that a second
    one is needed; "" once nothing more is asked."""
    pending = outcome.pending
    if outcome.reason is None:
        waiting = pending.status is Status.WAITING and not outcome.released
        said_yes = outcome.decision.kind in (Kind.CHOOSE, Kind.CONFIRM)
        return SECOND_YES if waiting and said_yes and pending.stage is Stage.FINAL else ""
    if pending.stage is Stage.FINAL or len(pending.actions) == 1:
        return YES_NO_NEXT_STEP.get(outcome.reason) or NEXT_STEP.get(outcome.reason, "")
    return NEXT_STEP.get(outcome.reason, "")


class RefusalOut(BaseModel):
    """Every refusal: a closed reason code and what the user can do instead."""

    reason: Reason
    next_step: str
    detail: str | None = Field(
        default=None,
        description="What in the request was wrong, where the check says more than the reason "
        "(such as `voice needs nonce`); left out otherwise. It names only the request's own "
        "fields, never another user's data.",
    )
