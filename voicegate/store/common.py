"""What every backend shares: the stored text of sets and receipts, and checks on arguments.

Every backend stores these two as the JSON of ``to_dict``, so a set written by one replica, or by
the in-memory store in a test, reads back exactly as any other backend would return it; the
``*_from_dict`` converters turn that JSON back into the domain's values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from voicegate.domain import (
    Action,
    Check,
    Choice,
    Device,
    DeviceKind,
    FirstYes,
    GrantMade,
    GrantUse,
    InputKind,
    Modality,
    PasskeyProof,
    PendingSet,
    Receipt,
    Risk,
    Stage,
    Status,
    to_dict,
)
from voicegate.reasons import Reason


def dump(value: PendingSet | Receipt) -> str:
    """The JSON text stored for a pending set or a receipt."""
    return json.dumps(to_dict(value), separators=(",", ":"), allow_nan=False)


def load_pending(text: str) -> PendingSet:
    """A pending set back from its stored JSON text."""
    return pending_from_dict(json.loads(text))


def load_receipt(text: str) -> Receipt:
    """A receipt back from its stored JSON text."""
    return receipt_from_dict(json.loads(text))


def pending_marker(pending_id: str) -> str:
    """The text every receipt of set ``pending_id`` holds, as ``dump`` writes it.

    A receipt's other strings are JSON-escaped inside it, so the marker only narrows a search:
    whoever uses it compares the loaded receipt's ``pending_id`` too.
    """
    return '"pending_id":' + json.dumps(pending_id)


def check_swap(old: PendingSet, new: PendingSet) -> None:
    """Refuse a swap that could not have come from ``old.replace``; a caller bug, not a race."""
    if new.id != old.id or new.version != old.version + 1:
        raise ValueError("swap needs the same id and new.version == old.version + 1")


def check_receipt(receipt: Receipt, user: str, seq: int, prev_digest: str) -> None:
    """Refuse a receipt whose place in the chain differs from the one it was offered."""
    if (receipt.user, receipt.seq, receipt.prev_digest) != (user, seq, prev_digest):
        raise ValueError("make(seq, prev_digest) must return a receipt at that place in the chain")


def window_start(now: float, window: float) -> float:
    """The start of the fixed window of ``window`` seconds that holds ``now``."""
    if window <= 0:
        raise ValueError("window must be positive")
    return math.floor(now / window) * window


def action_from_dict(data: Mapping[str, Any]) -> Action:
    return Action(
        tool=data["tool"],
        arguments=dict(data["arguments"]),
        args_hash=data["args_hash"],
        card_text=data["card_text"],
        target=data.get("target", ""),
    )


def pending_from_dict(data: Mapping[str, Any]) -> PendingSet:
    return PendingSet(
        **{
            **data,
            "actions": tuple(action_from_dict(a) for a in data["actions"]),
            "risk": Risk(data["risk"]),
            "stage": Stage(data["stage"]),
            "status": Status(data["status"]),
            "first_yes": first_yes_from_dict(data.get("first_yes")),
            "second_yes": first_yes_from_dict(data.get("second_yes")),
        }
    )


def first_yes_from_dict(data: Mapping[str, Any] | None) -> FirstYes | None:
    if data is None:
        return None
    return FirstYes(
        **{
            **data,
            "modality": Modality(data["modality"]),
            "input": InputKind(data["input"]),
            "checks": tuple(check_from_dict(c) for c in data.get("checks", ())),
        }
    )


def check_from_dict(data: Mapping[str, Any]) -> Check:
    reason = data.get("reason")
    return Check(data["name"], bool(data["passed"]), Reason(reason) if reason else None)


def receipt_from_dict(data: Mapping[str, Any]) -> Receipt:
    def opt(enum: type[StrEnum], value: Any) -> Any:
        return enum(value) if value is not None else None

    return Receipt(
        **{
            **data,
            "checks": tuple(check_from_dict(c) for c in data.get("checks", ())),
            "risk": Risk(data["risk"]),
            "modality": opt(Modality, data.get("modality")),
            "input": opt(InputKind, data.get("input")),
            "first_yes": first_yes_from_dict(data.get("first_yes")),
            "second_yes": first_yes_from_dict(data.get("second_yes")),
            "choice": choice_from_dict(data.get("choice")),
            "passkey": PasskeyProof(**data["passkey"]) if data.get("passkey") else None,
            "grant": GrantUse(**data["grant"]) if data.get("grant") else None,
            "granted": granted_from_dict(data.get("granted")),
        }
    )


def granted_from_dict(data: Mapping[str, Any] | None) -> GrantMade | None:
    if data is None:
        return None
    return GrantMade(**{**data, "fixed": tuple(data["fixed"]), "free": tuple(data["free"])})


def choice_from_dict(data: Mapping[str, Any] | None) -> Choice | None:
    if data is None:
        return None
    return Choice(str(data["question"]), tuple(data["options"]), int(data["chosen"]))


def device_from_dict(data: Mapping[str, Any]) -> Device:
    return Device(**{**data, "kind": DeviceKind(data["kind"])})
