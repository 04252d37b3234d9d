"""voicegate: every write an agent makes waits for the user's own yes, by tap or voice.

The names below are the public API. Importing this package loads neither the recogniser nor
the web stack; those live in ``voicegate.voice.pipeline`` and ``voicegate.web.app``.
"""

from voicegate.canonical import args_hash, canonical_json
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
from voicegate.gate.core import ActionRequest, Gate, Outcome
from voicegate.gate.receipts import verify_chain
from voicegate.gate.types import (
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
from voicegate.reasons import NEXT_STEP, Kind, Reason
from voicegate.secrets import KeyRing, Secret
from voicegate.store import open_store
from voicegate.tokens import Claims, TokenCodec
from voicegate.voice.consent import decide

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
    "decide",
    "open_store",
    "verify_chain",
]

__version__ = "0.1.0"
