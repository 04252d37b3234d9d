"""voicegate: every write an agent makes waits for the user's own yes, by tap or voice."""

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
from voicegate.reasons import Kind, Reason

__all__ = [
    "AudioRefused",
    "ConfigError",
    "DeviceRefused",
    "Kind",
    "ModelError",
    "Reason",
    "Refused",
    "StoreUnavailable",
    "TokenRefused",
    "VoicegateError",
]

__version__ = "0.1.0"
