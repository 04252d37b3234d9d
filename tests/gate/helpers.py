"""A gate on the memory store with a movable clock and a counting upstream, for gate tests."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from voicegate.clock import ManualClock
from voicegate.domain import (
    Decision,
    Device,
    DeviceKind,
    Evidence,
    InputKind,
    Modality,
    PendingSet,
    Risk,
)
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.reasons import Kind
from voicegate.secrets import KeyRing, generate_secret
from voicegate.store.base import Store


@dataclass
class Upstream:
    """Counts every write it runs; ``fail`` makes the next calls raise."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fail: bool = False

    async def __call__(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        if self.fail:
            raise RuntimeError("upstream is down")
        self.calls.append((tool, dict(arguments)))
        return {"ok": True, "tool": tool}


def keys() -> KeyRing:
    return KeyRing([("k1", generate_secret())])


def make_gate(store: Store, clock: ManualClock, upstream: Upstream) -> Gate:
    return Gate(
        store,
        executor=upstream,
        policy=GatePolicy(is_write=lambda tool: tool.startswith(("write_", "delete_", "send_"))),
        receipt_keys=keys(),
        clock=clock,
    )


async def pair(store: Store, user: str = "u1", kind: DeviceKind = DeviceKind.VOICE) -> Device:
    device = Device(
        id="d_" + secrets.token_hex(4),
        user=user,
        kind=kind,
        public_key="not-used-by-the-gate",
        algorithm="ES256",
        created_at=0.0,
    )
    await store.devices.add(device)
    return device


def actions(n: int) -> list[ActionRequest]:
    return [
        ActionRequest("write_note", {"name": f"note{i}", "text": "milk"}) for i in range(1, n + 1)
    ]


def evidence(
    pending: PendingSet,
    device: Device,
    clock: ManualClock,
    kind: Kind,
    card: int | None = None,
    *,
    modality: Modality = Modality.TAP,
    nonce: str | None = None,
    evidence_id: str | None = None,
) -> Evidence:
    return Evidence(
        id=evidence_id or secrets.token_hex(8),
        pending_id=pending.id,
        nonce=pending.nonce if nonce is None else nonce,
        device_id=device.id,
        user=device.user,
        modality=modality,
        input=InputKind.VOICE if modality is Modality.VOICE else InputKind.TOUCH,
        decision=Decision(kind, card),
        created_at=clock(),
    )


__all__ = ["ManualClock", "Risk", "Upstream", "actions", "evidence", "make_gate", "pair"]
