"""The running parts one server shares: the store, the gate, the voice pipeline, the clock.

The HTTP and MCP adapters take one ``Services`` and read what they need from it, so a test can
build a server around a memory store and a moved clock, and ``serve`` around SQLite and Whisper.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from voicegate.gate.core import Gate
from voicegate.limits import BODY_TIMEOUT, PairingLimits, RateLimits
from voicegate.observe import Events
from voicegate.store.base import Store

if TYPE_CHECKING:
    from voicegate.voice.pipeline import VoicePipeline

# 2 MiB holds far more than the longest answer the audio checks accept (Opus at 32 kbit/s is
# about 4 KiB a second), yet stops a runaway upload before it is read into memory.
MAX_VOICE_BYTES = 2 * 1024 * 1024
# Every other device request is a small JSON object.
MAX_JSON_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class Settings:
    """Operator choices the adapters need; none of them is a secret."""

    public_url: str = "http://127.0.0.1:8800"
    max_voice_bytes: int = MAX_VOICE_BYTES
    max_json_bytes: int = MAX_JSON_BYTES
    # How far a device's signed timestamp may be from the server clock, in seconds.
    signature_window: float = 60.0
    rate_limits: RateLimits = field(default_factory=RateLimits)
    pairing_limits: PairingLimits = field(default_factory=PairingLimits)
    # Voice uploads one process holds at once (the pipeline's own queue holds 16 by default).
    max_voice_in_flight: int = 16
    # Seconds a device request's whole body may take to arrive (``BODY_TIMEOUT``).
    body_timeout: float = BODY_TIMEOUT
    # The VAPID public key devices subscribe with (``voicegate.notify.vapid``); "" when the
    # operator turned Web Push off.
    push_public_key: str = ""


@dataclass(slots=True)
class Services:
    """Everything one server process shares between its routes."""

    store: Store
    gate: Gate
    voice: VoicePipeline | None = None
    clock: Callable[[], float] = time.time
    settings: Settings = field(default_factory=Settings)
    events: Events = field(default_factory=Events)
