"""voicegate: every write an agent makes waits for the user's own yes, by tap or voice.

The names below are the public API. Each loads on first use (PEP 562), so importing the package,
or any module inside it, loads nothing else: ``import voicegate.voice.consent`` loads neither the
gate nor a store, and ``import voicegate`` neither the recogniser nor the web stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from voicegate.canonical import args_hash, canonical_json
    from voicegate.domain import (
        Action,
        Decision,
        Device,
        DeviceKind,
        Evidence,
        PendingSet,
        Receipt,
        Risk,
        Stage,
        Status,
    )
    from voicegate.errors import (
        AudioRefused,
        ConfigError,
        DeviceRefused,
        ModelError,
        Refused,
        StoreUnavailable,
        TokenRefused,
        VoicegateError,
    )
    from voicegate.gate.core import ActionRequest, Gate, GatePolicy, Outcome
    from voicegate.reasons import NEXT_STEP, Kind, Reason
    from voicegate.receipts import verify_chain
    from voicegate.secrets import KeyRing, Secret
    from voicegate.store import open_store
    from voicegate.tokens import Claims, TokenCodec
    from voicegate.voice.consent import read_words

__all__ = [
    "NEXT_STEP",
    "Action",
    "ActionRequest",
    "AudioRefused",
    "Claims",
    "ConfigError",
    "Decision",
    "Device",
    "DeviceKind",
    "DeviceRefused",
    "Evidence",
    "Gate",
    "GatePolicy",
    "KeyRing",
    "Kind",
    "ModelError",
    "Outcome",
    "PendingSet",
    "Reason",
    "Receipt",
    "Refused",
    "Risk",
    "Secret",
    "Stage",
    "Status",
    "StoreUnavailable",
    "TokenCodec",
    "TokenRefused",
    "VoicegateError",
    "args_hash",
    "canonical_json",
    "open_store",
    "read_words",
    "verify_chain",
]

__version__ = "0.1.0"

# Where each public name is defined: the package hands it on from there when first asked.
_HOMES: dict[str, tuple[str, ...]] = {
    "voicegate.canonical": ("args_hash", "canonical_json"),
    "voicegate.domain": (
        "Action",
        "Decision",
        "Device",
        "DeviceKind",
        "Evidence",
        "PendingSet",
        "Receipt",
        "Risk",
        "Stage",
        "Status",
    ),
    "voicegate.errors": (
        "AudioRefused",
        "ConfigError",
        "DeviceRefused",
        "ModelError",
        "Refused",
        "StoreUnavailable",
        "TokenRefused",
        "VoicegateError",
    ),
    "voicegate.gate.core": ("ActionRequest", "Gate", "GatePolicy", "Outcome"),
    "voicegate.receipts": ("verify_chain",),
    "voicegate.reasons": ("NEXT_STEP", "Kind", "Reason"),
    "voicegate.secrets": ("KeyRing", "Secret"),
    "voicegate.store": ("open_store",),
    "voicegate.tokens": ("Claims", "TokenCodec"),
    "voicegate.voice.consent": ("read_words",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A public name, imported from its home on first use and kept here after."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'voicegate' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
