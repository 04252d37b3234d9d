"""Plain values that flow through the gate: actions, pending sets, evidence, devices, receipts.

All are frozen, slotted dataclasses. ``to_dict`` gives the one JSON shape every store backend
persists (``voicegate.store.common`` reads it back), so a set written by one replica reads the
same on another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from voicegate.reasons import Kind, Reason

JSONObject = Mapping[str, Any]


class Risk(StrEnum):
    """How much a write can hurt; high-risk writes need a second, separately nonced yes."""

    LOW = "low"
    HIGH = "high"


class Stage(StrEnum):
    """Which answer a pending set waits for: a card choice, the final yes, or the passkey.

    A high-risk set goes through them in this order, skipping those its step does not name
    (``HighRiskStep``), each under a nonce of its own.
    """

    CHOOSE = "choose"
    FINAL = "final"
    PASSKEY = "passkey"


class HighRiskStep(StrEnum):
    """What a high-risk card asks after its first yes: another yes, a passkey, or both."""

    YES = "yes"
    PASSKEY = "passkey"
    BOTH = "both"

    @property
    def stages(self) -> tuple[Stage, ...]:
        """The stages after ``choose`` this step asks for, in order."""
        return {
            HighRiskStep.YES: (Stage.FINAL,),
            HighRiskStep.PASSKEY: (Stage.PASSKEY,),
            HighRiskStep.BOTH: (Stage.FINAL, Stage.PASSKEY),
        }[self]


class Status(StrEnum):
    """Where a pending set is in its life."""

    WAITING = "waiting"
    EXECUTING = "executing"
    CONFIRMED = "confirmed"
    FAILED = "failed"
    UNKNOWN = "unknown"
    CANCELLED = "cancelled"
    WITHDRAWN = "withdrawn"
    EXPIRED = "expired"


OPEN_STATUSES = frozenset({Status.WAITING})


class RunOutcome(StrEnum):
    """What became of a write, as its receipt says: a plain string where stored."""

    EXECUTED = "executed"
    FAILED = "failed"  # the upstream raised: recorded, never retried
    NOT_RUN = "not_run"  # settled after a crash before its approval was spent
    UNKNOWN = "unknown"  # settled after a crash once its approval was spent: it may have run


class Modality(StrEnum):
    """How the user answered."""

    TAP = "tap"
    VOICE = "voice"
    PASSKEY = "passkey"


class InputKind(StrEnum):
    """The physical input behind an answer, recorded for accessibility audits."""

    TOUCH = "touch"
    KEY = "key"
    SWITCH = "switch"
    VOICE = "voice"
    # The Approve or Cancel of a notification, signed by the device's service worker.
    NOTIFICATION = "notification"


class DeviceKind(StrEnum):
    """What a paired device may send: taps only, or taps and voice."""

    TAP = "tap"
    VOICE = "voice"


@dataclass(frozen=True, slots=True)
class Action:
    """One write the agent asked for, exactly as it will run and as the card shows it."""

    tool: str
    arguments: JSONObject
    args_hash: str
    card_text: str
    target: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """The meaning of an answer: choose card k, confirm, cancel, more time, or refuse(reason)."""

    kind: Kind
    card: int | None = None
    reason: Reason | None = None

    @property
    def releases(self) -> bool:
        return self.kind in (Kind.CHOOSE, Kind.CONFIRM)


@dataclass(frozen=True, slots=True)
class FirstYes:
    """A yes that moved a high-risk write to its next step: kept on its set, then copied to
    the receipt.

    The receipt's own device, transcript and checks are the last answer's; ``first_yes`` is the
    choice that came before it, under the set's first nonce, and ``second_yes`` the final yes
    of a step that asks for a yes and then a passkey (``HighRiskStep.BOTH``).
    """

    evidence_id: str
    device_id: str
    modality: Modality
    input: InputKind
    decided_at: float
    chosen: int
    checks: tuple[Check, ...] = ()
    transcript: str | None = None
    recogniser: str | None = None
    model: str | None = None
    fingerprint_id: str | None = None


@dataclass(frozen=True, slots=True)
class PasskeyAssertion:
    """A WebAuthn assertion as the browser returned it, not yet checked (raw bytes)."""

    credential_id: bytes
    client_data: bytes
    authenticator_data: bytes
    signature: bytes


@dataclass(frozen=True, slots=True)
class PasskeyProof:
    """What a checked assertion proved, as the receipt keeps it.

    ``id`` is the credential's id hash (``Passkey.id``); the flags are the authenticator's
    own: user present, user verified (fingerprint, face or screen lock), and whether the
    passkey may be, and is, backed up (synced) elsewhere.
    """

    id: str
    user_present: bool
    user_verified: bool
    backup_eligible: bool
    backed_up: bool
    sign_count: int
    rp_id: str
    origin: str


@dataclass(frozen=True, slots=True)
class Passkey:
    """A user's registered passkey: only its public key, never anything that can sign.

    ``id`` is ``"pk_"`` and 24 hex digits of the SHA-256 of the credential id, the name the
    page, the commands and receipts use; ``credential_id`` is the raw id the browser asks for.
    """

    id: str
    user: str
    credential_id: bytes
    public_key: bytes  # the COSE key, CBOR-encoded, as the authenticator gave it
    sign_count: int
    created_at: float
    device_id: str = ""
    name: str = ""
    last_used_at: float | None = None


@dataclass(frozen=True, slots=True)
class Choice:
    """A choice among alternatives, as its receipt keeps it: the question, every option shown
    (each card's text, in order) and the one the user chose (1-based)."""

    question: str
    options: tuple[str, ...]
    chosen: int


@dataclass(frozen=True, slots=True)
class PendingSet:
    """1 to 5 cards waiting for the user's answer. ``nonce`` never leaves for the agent."""

    id: str
    user: str
    actions: tuple[Action, ...]
    risk: Risk
    stage: Stage
    nonce: str
    created_at: float
    deadline: float
    ttl: float
    preview: str = ""
    mode: str = "device"
    extensions: int = 0
    status: Status = Status.WAITING
    chosen: int | None = None
    result: Any = None
    error: str | None = None
    receipt_id: str | None = None
    decided_at: float | None = None
    first_yes: FirstYes | None = None
    second_yes: FirstYes | None = None
    version: int = 0

    def replace(self, **changes: Any) -> PendingSet:
        """A copy with ``changes`` and the version bumped, ready for ``PendingStore.swap``."""
        return dataclasses.replace(self, version=self.version + 1, **changes)


@dataclass(frozen=True, slots=True)
class GrantAsk:
    """What the user asked for with a yes: allow the same for ``minutes``, ``uses`` times."""

    minutes: int
    uses: int


@dataclass(frozen=True, slots=True)
class Evidence:
    """An answer from a paired device, already authenticated and decided."""

    id: str
    pending_id: str
    nonce: str
    device_id: str
    user: str
    modality: Modality
    input: InputKind
    decision: Decision
    created_at: float
    transcript: str | None = None
    recogniser: str | None = None
    model: str | None = None
    fingerprint_id: str | None = None
    # The card numbers whose full text the device had on screen (a shortened card needs it).
    shown_in_full: frozenset[int] = frozenset()
    # A passkey step's WebAuthn assertion, checked by the gate against the set it answers.
    passkey: PasskeyAssertion | None = None
    # The user's ask to allow the same again for a while ("approve, and allow the same").
    grant: GrantAsk | None = None


@dataclass(frozen=True, slots=True)
class Device:
    """A paired device. Only its public key is stored: a copy of the store cannot sign."""

    id: str
    user: str
    kind: DeviceKind
    public_key: str
    algorithm: str
    created_at: float
    name: str = ""
    revoked_at: float | None = None


@dataclass(frozen=True, slots=True)
class PairingCode:
    """A one-time pairing code, stored only as its hash."""

    code_hash: str
    user: str
    kind: DeviceKind
    expires_at: float


@dataclass(frozen=True, slots=True)
class StoredFingerprint:
    """The replay features of one accepted recording."""

    id: str
    user: str
    created_at: float
    data: bytes


@dataclass(frozen=True, slots=True)
class StoredTemplate:
    """One enrolment take of a user's answer, kept as features, never as audio."""

    id: str
    user: str
    # The answer it teaches, as the eval manifest writes it: "choose:2", "confirm", "cancel"
    meaning: str
    # What the user says for it, as they named it ("haan", "theek hai"); "" when unnamed
    label: str
    created_at: float
    data: bytes  # voicegate.voice.templates.encode
    device_id: str = ""


@dataclass(frozen=True, slots=True)
class PushSubscription:
    """Where to push a device's notifications (Web Push, RFC 8030), as its browser gave it.

    ``p256dh`` and ``auth`` are the browser's keys (RFC 8291) that each message is encrypted
    to; the push service in between sees only ciphertext and the endpoint.
    """

    device_id: str
    user: str
    endpoint: str
    p256dh: str
    auth: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Grant:
    """A user's leave to repeat one approved write without a card: narrow and short-lived.

    Made only from the user's own signed answer on a paired device (``voicegate.gate.grants``).
    A call fits it when it is for ``tool`` on ``upstream`` for ``user`` and its arguments, less
    the ``free`` names, are exactly ``fixed`` (``fixed_hash`` is their canonical hash). Each fit
    spends one of ``uses_left``; past ``expires_at`` or once ``ended_at`` is set it fits nothing.
    """

    id: str
    user: str
    upstream: str
    tool: str
    fixed: JSONObject
    fixed_hash: str
    free: tuple[str, ...]
    created_at: float
    expires_at: float
    max_uses: int
    uses_left: int
    device_id: str
    # The set whose approval made it, and that approval's receipt.
    pending_id: str
    receipt_id: str
    ended_at: float | None = None

    def live(self, now: float) -> bool:
        """Whether it may still be spent at ``now``."""
        return self.ended_at is None and self.uses_left > 0 and now < self.expires_at


@dataclass(frozen=True, slots=True)
class GrantUse:
    """What a receipt of a write run under a grant says of it: the grant, the card that made
    it (its set and receipt), and how many uses were left after this one."""

    grant_id: str
    made_by: str
    made_receipt: str
    uses_left: int
    expires_at: float
    # The grant's terms, so the chain itself shows what the user allowed: its count and the
    # arguments that could vary (every other was fixed to the approved call's).
    max_uses: int = 0
    free: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GrantMade:
    """What the receipt of the card whose yes made a grant says of it: the grant's terms, so
    the chain itself shows what the user allowed with that yes (``voicegate.gate.grants``)."""

    grant_id: str
    tool: str
    # The argument names held to the approved call's values, and those that may vary.
    fixed: tuple[str, ...]
    free: tuple[str, ...]
    minutes: int
    expires_at: float
    uses: int


@dataclass(frozen=True, slots=True)
class Check:
    """One named confirm check and how it came out."""

    name: str
    passed: bool
    reason: Reason | None = None


@dataclass(frozen=True, slots=True)
class Receipt:
    """A signed, hash-chained record of a decision that ran (or tried to run) a write."""

    id: str
    user: str
    seq: int
    prev_digest: str
    pending_id: str
    tool: str
    arguments: JSONObject
    args_hash: str
    card_text: str
    risk: Risk
    mode: str
    # A ``RunOutcome`` value; typed ``str`` so that any stored receipt loads and verifies.
    outcome: str
    proposed_at: float
    decided_at: float
    executed_at: float | None
    checks: tuple[Check, ...] = ()
    device_id: str | None = None
    modality: Modality | None = None
    input: InputKind | None = None
    transcript: str | None = None
    recogniser: str | None = None
    model: str | None = None
    fingerprint_id: str | None = None
    result: Any = None
    error: str | None = None
    first_yes: FirstYes | None = None
    choice: Choice | None = None
    # The whole text the device showed for this action when the user said yes.
    shown_text: str | None = None
    # The yes between the choice and a passkey step (``HighRiskStep.BOTH``), and the passkey.
    second_yes: FirstYes | None = None
    passkey: PasskeyProof | None = None
    # The grant a write ran under, in place of a card (``voicegate.gate.grants``).
    grant: GrantUse | None = None
    # The grant this card's yes made ("approve, and allow the same for 10 minutes").
    granted: GrantMade | None = None
    digest: str = ""
    signature: str = ""
    key_id: str = ""

    def body(self) -> dict[str, Any]:
        """Everything the digest covers: all fields but the digest and signature.

        ``first_yes``, ``choice``, ``shown_text``, ``second_yes``, ``passkey``, ``grant`` and
        ``granted`` are left out when there are none, so receipts written before they existed
        keep their digests.
        """
        data: dict[str, Any] = to_dict(self)
        for name in ("digest", "signature", "key_id"):
            data.pop(name)
        for optional in _OPTIONAL:
            if data[optional] is None:
                del data[optional]
        return data


_OPTIONAL = ("first_yes", "choice", "shown_text", "second_yes", "passkey", "grant", "granted")


def to_dict(value: Any) -> Any:
    """A JSON-ready dict of any of the dataclasses above (enums become their values)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_dict(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple | list):
        return [to_dict(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return {str(k): to_dict(v) for k, v in value.items()}
    return value
