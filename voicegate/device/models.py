"""The JSON shapes of the device API (pydantic, at the edge only)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from voicegate.domain import (
    Action,
    Device,
    Grant,
    PendingSet,
    Receipt,
    Stage,
    Status,
    to_dict,
)
from voicegate.gate import card, grant_rules
from voicegate.gate.core import Outcome
from voicegate.reasons import NEXT_STEP, PASSKEY_STEP, SECOND_YES, YES_NO_NEXT_STEP, Kind, Reason
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
    label: str = Field(
        description="A short name for buttons and announcements, unlike every other card's in "
        "its set, escaped as the card text is: `write_note 'eggs'`"
    )
    sentence: str = Field(
        default="",
        description="The card told as a sentence (`Write note with name “a” and text “milk”.`), "
        "values cut as in `text`, escaped and marked as the card text is",
    )
    full_sentence: str = Field(default="", description="The sentence with nothing cut")

    @classmethod
    def of(cls, number: int, action: Action, label: str) -> CardOut:
        whole = card.full(action.tool, action.arguments)
        return cls(
            number=number,
            tool=action.tool,
            text=action.card_text,
            full_text=whole,
            shortened=whole != action.card_text,
            arguments=dict(action.arguments),
            label=label,
            sentence=card.sentence(action.tool, action.arguments),
            full_sentence=card.sentence(action.tool, action.arguments, max_value_chars=None),
        )


class PasskeyAskOut(BaseModel):
    """What the browser needs to make the assertion of a passkey step, bytes as base64url.

    ``challenge`` commits to the set, this stage's nonce and the chosen action's canonical
    hash; ``credentials`` are the ids of the user's passkeys (empty: none registered yet).
    ``rp_id`` and ``origin`` are null where this server cannot use passkeys.
    """

    challenge: str
    rp_id: str | None
    origin: str | None
    credentials: list[str]
    timeout_ms: int


class GrantOfferOut(BaseModel):
    """What a yes to this set may also allow: the same again for a while ("approve, and allow
    the same for 10 minutes"). Only on a set of one card, not high-risk, whose tool the
    operator lets be repeated."""

    fixed: list[str] = Field(description="Arguments that must stay exactly as on the card")
    varying: list[str] = Field(description="Arguments the operator lets vary under a grant")
    max_minutes: int
    max_uses: int


class GrantOut(BaseModel):
    """A grant as its user sees it: what it allows, until when, and how many times more."""

    id: str
    tool: str
    fixed: dict[str, Any]
    varying: list[str]
    created_at: float
    expires_at: float
    seconds_left: float
    uses_left: int
    max_uses: int
    device_id: str
    pending_id: str
    receipt_id: str
    text: str = Field(description="The tool and its fixed arguments, as a card shows them")

    @classmethod
    def of(cls, grant: Grant, *, now: float) -> GrantOut:
        return cls(
            id=grant.id,
            tool=grant.tool,
            fixed=dict(grant.fixed),
            varying=list(grant.free),
            created_at=grant.created_at,
            expires_at=grant.expires_at,
            seconds_left=max(0.0, grant.expires_at - now),
            uses_left=grant.uses_left,
            max_uses=grant.max_uses,
            device_id=grant.device_id,
            pending_id=grant.pending_id,
            receipt_id=grant.receipt_id,
            text=card.render(grant.tool, grant.fixed),
        )


class PendingOut(BaseModel):
    """A waiting set as the device shows it; ``nonce`` is seen by the device only. A set at
    its passkey step carries ``passkey``: what the browser asks the authenticator for.

    ``preview`` (the question of a choice) and ``name`` are the agent's text escaped as the card
    text is, with its markers, so no client shows a raw control or bidi character.
    """

    id: str
    cards: list[CardOut]
    stage: str
    risk: str
    status: str
    preview: str = Field(
        description="The text above the cards (a choice's question), escaped, ending in the "
        "card's markers (`  ⚠ hidden characters`); empty when there is none"
    )
    name: str = Field(
        description="A short name of the set for buttons and announcements: its card's, or "
        "its question's (`“Which note?” (one of 2: write_note)`)"
    )
    summary: str = Field(
        default="",
        description="One short line for the set, as a notification shows it: its card's "
        "sentence with values cut at 40 characters, or a choice's name",
    )
    chosen: int | None
    deadline: float
    seconds_left: float
    extensions_left: int
    nonce: str
    passkey: PasskeyAskOut | None = None
    grant: GrantOfferOut | None = None

    @classmethod
    def of(
        cls,
        pending: PendingSet,
        *,
        now: float,
        max_extensions: int,
        passkey: PasskeyAskOut | None = None,
        grant: GrantOfferOut | None = None,
    ) -> PendingOut:
        # Past the choice (the second yes, the passkey step) the set is named by its chosen card.
        final = pending.stage in (Stage.FINAL, Stage.PASSKEY)
        cards = [(a.tool, a.arguments) for a in pending.actions]
        chosen = pending.chosen if final else None
        name, labels = card.names(cards, pending.preview, chosen=chosen)
        return cls(
            id=pending.id,
            cards=[
                CardOut.of(i, a, label)
                for i, (a, label) in enumerate(zip(pending.actions, labels, strict=True), start=1)
            ],
            stage=pending.stage.value,
            risk=pending.risk.value,
            status=pending.status.value,
            preview=card.preview(pending.preview),
            name=name,
            summary=card.headline(cards, pending.preview, chosen=chosen),
            chosen=pending.chosen,
            deadline=pending.deadline,
            seconds_left=max(0.0, pending.deadline - now),
            extensions_left=max(0, max_extensions - pending.extensions),
            nonce=pending.nonce,
            passkey=passkey,
            grant=grant,
        )


class SetStatusOut(BaseModel):
    """Where one set stands: enough to tell the user why it left the waiting list."""

    id: str
    status: str
    name: str
    deadline: float
    seconds_left: float

    @classmethod
    def of(cls, pending: PendingSet, *, now: float) -> SetStatusOut:
        final = pending.stage is Stage.FINAL
        name, _ = card.names(
            [(a.tool, a.arguments) for a in pending.actions],
            pending.preview,
            chosen=pending.chosen if final else None,
        )
        return cls(
            id=pending.id,
            status=pending.status.value,
            name=name,
            deadline=pending.deadline,
            seconds_left=max(0.0, pending.deadline - now),
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
    yes_by_voice: bool = Field(
        default=True,
        description="Whether this server may take a spoken yes; false where a yes is a tap "
        "only (no voice, or a recogniser such as `base` with Hindi on whose yes threshold is "
        "out of reach), while card numbers, cancel and more time may still be said.",
    )


class GrantIn(_In):
    """With a yes: allow the same again, for ``minutes``, at most ``uses`` times. Signed with
    the rest of the tap, so only the paired device's key can ask for one."""

    minutes: int = Field(ge=1, le=grant_rules.MOST_MINUTES, strict=True)
    uses: int = Field(ge=1, le=grant_rules.MOST_USES, strict=True)


class TapIn(_In):
    """A tap (or key, or switch press) on a card."""

    pending_id: str = Field(max_length=100)
    nonce: str = Field(max_length=200)
    decision: Literal["choose", "confirm", "cancel"]
    card: int | None = Field(default=None, ge=1, le=5)
    input: Literal["touch", "key", "switch", "notification"] = "touch"
    shown: list[Annotated[int, Field(ge=1, le=5)]] = Field(
        default_factory=list,
        max_length=5,
        description="The cards whose full text this device showed; a shortened card needs it",
    )
    grant: GrantIn | None = Field(
        default=None,
        description="With a yes to a set that offers it: allow the same again for a while; an "
        "ask the set or the operator does not allow refuses the whole answer",
    )


class AllItem(_In):
    """One of the sets an "Approve all" answers: its id, its nonce, the cards shown in full."""

    pending_id: str = Field(max_length=100)
    nonce: str = Field(max_length=200)
    shown: list[Annotated[int, Field(ge=1, le=5)]] = Field(default_factory=list, max_length=5)


class ApproveAllIn(_In):
    """Approve each of several waiting one-card sets, shown on this device, with one answer."""

    sets: list[AllItem] = Field(min_length=2, max_length=10)
    input: Literal["touch", "key", "switch"] = "touch"


class PushKeys(_In):
    """The browser's keys of a subscription (RFC 8291), base64url."""

    p256dh: str = Field(max_length=200)
    auth: str = Field(max_length=100)


class PushIn(_In):
    """A subscription as ``PushSubscription.toJSON()`` gives it."""

    endpoint: str = Field(max_length=2048)
    keys: PushKeys
    expirationTime: float | None = None  # the browser's own name


class PushOut(BaseModel):
    """Whether this server sends notifications, its key, and whether this device subscribed."""

    enabled: bool
    public_key: str
    subscribed: bool


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
    grant: GrantOut | None = None

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
            grant=GrantOut.of(outcome.grant, now=now) if outcome.grant else None,
        )


class AllOut(BaseModel):
    """What an "Approve all" did to each set, in the order asked."""

    answers: list[AnswerOut]


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
    passkey: dict[str, Any] | None = None

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
            passkey=to_dict(receipt.passkey) if receipt.passkey else None,
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
        if not (waiting and said_yes):
            return ""
        return {Stage.FINAL: SECOND_YES, Stage.PASSKEY: PASSKEY_STEP}.get(pending.stage, "")
    if pending.stage is not Stage.CHOOSE or len(pending.actions) == 1:
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
