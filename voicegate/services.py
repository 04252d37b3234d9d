"""The running parts one server shares: the store, the gate, the voice pipeline, the clock and
the configuration, passed whole.

The HTTP and MCP adapters take one ``Services`` and read what they need from it, so a test can
build a server around a memory store and a moved clock, and ``serve`` around SQLite and Whisper.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from voicegate.gate.core import Gate
from voicegate.observe import Events
from voicegate.settings import ServerConfig
from voicegate.store.base import Store

if TYPE_CHECKING:
    from voicegate.voice.pipeline import VoicePipeline


@dataclass(slots=True)
class Services:
    """Everything one server process shares between its routes."""

    store: Store
    gate: Gate
    voice: VoicePipeline | None = None
    clock: Callable[[], float] = time.time
    config: ServerConfig = field(default_factory=ServerConfig)
    events: Events = field(default_factory=Events)
    # The VAPID public key devices subscribe with (``voicegate.notify.vapid``), made from
    # ``config.vapid_key`` or a key of this process; "" when the operator turned Web Push off.
    push_key: str = ""
