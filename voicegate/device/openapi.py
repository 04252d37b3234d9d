"""The device API as its OpenAPI document describes it: signed headers, the voice body, limits.

Only descriptions live here; ``routes`` does the work. The values a client must keep to (types,
rates, durations) mirror the audio decoder's, which the device API does not import (it needs
the audio stack); tests keep each pair equal.
"""

from __future__ import annotations

from typing import Any

from voicegate.device.models import RefusalOut
from voicegate.device.signing import (
    DEVICE_HEADER,
    NONCE_HEADER,
    PENDING_HEADER,
    SCHEME,
    TIMESTAMP_HEADER,
)
from voicegate.gate import grant_rules

__all__ = [
    "AUDIO_TYPES",
    "MAX_CHANNELS",
    "MAX_VOICE_SECONDS",
    "MIN_VOICE_SECONDS",
    "REFUSALS",
    "SAMPLE_RATES",
    "SIGNED",
    "VOICE_BODY",
    "voice_description",
]

# One per container the decoder reads: ``voice.audio.CONTENT_TYPES``, kept equal by a test.
AUDIO_TYPES = ("audio/wav", "audio/flac", "audio/ogg", "audio/webm", "audio/mp4")
# ``voice.audio.Limits``' bounds on one recording, kept equal by a test (that module needs the
# audio stack, which the device API does not import).
MIN_VOICE_SECONDS = 0.1
MAX_VOICE_SECONDS = 15.0
# ``voice.audio.MAX_CHANNELS`` and ``SOURCE_RATES`` (the rates it resamples from), kept equal by
# a test.
MAX_CHANNELS = 8
SAMPLE_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 88200, 96000)

REFUSALS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": RefusalOut, "description": "Refused: a reason code and the next step"},
    503: {"model": RefusalOut, "description": "The store is unreachable; nothing ran"},
}


def _header(name: str, description: str, *, required: bool) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": required,
        "description": description,
        "schema": {"type": "string"},
    }


# Sent with the signature (``auth.SIGNATURE_SCHEME``, the security scheme, says how to sign).
SIGNED_HEADERS = [
    _header(
        DEVICE_HEADER, f"The paired device's id; line 2 of the {SCHEME} string.", required=True
    ),
    _header(
        TIMESTAMP_HEADER,
        f"Whole Unix seconds on the server's clock; line 5 of the {SCHEME} string.",
        required=True,
    ),
]
SIGNED: dict[str, Any] = {"parameters": SIGNED_HEADERS}
# The voice route also reads these (or the form fields of the same name); they are
# covered by the signature, as is Content-Type, which picks the audio decoder.
_VOICE_HEADERS = [
    _header(
        PENDING_HEADER,
        f"The waiting set answered (else `pending_id`); line 8 of the {SCHEME} string.",
        required=False,
    ),
    _header(
        NONCE_HEADER,
        f"That set's nonce (else the `nonce` form field); line 9 of the {SCHEME} string.",
        required=False,
    ),
]
_SHOWN_QUERY = {
    "name": "shown",
    "in": "query",
    "required": False,
    "description": "The cards whose full text the device showed, as `1,3` (else the `shown` "
    "form field); a yes to a shortened card needs it. Signed with the path.",
    "schema": {"type": "string"},
}
_GRANT_USES_QUERY = {
    "name": "grant_uses",
    "in": "query",
    "required": False,
    "description": 'How many times a spoken grant ("yes, for ten minutes") allows the same '
    "(else the `grant_uses` form field; without either, 5 or the operator's bound, whichever is "
    "less). Signed with the path.",
    "schema": {"type": "integer", "minimum": 1, "maximum": grant_rules.MOST_USES},
}
VOICE_BODY: dict[str, Any] = {
    "parameters": [*SIGNED_HEADERS, *_VOICE_HEADERS, _SHOWN_QUERY, _GRANT_USES_QUERY],
    "requestBody": {
        "required": True,
        "description": "The recording as the raw body (its own Content-Type, which the "
        "signature covers), or multipart with an `audio` file part and optional `pending_id` "
        "and `nonce` fields.",
        "content": {
            **{t: {"schema": {"type": "string", "format": "binary"}} for t in AUDIO_TYPES},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "audio": {"type": "string", "format": "binary"},
                        "pending_id": {"type": "string"},
                        "nonce": {"type": "string"},
                        "shown": {"type": "string"},
                        "grant_uses": {"type": "string"},
                    },
                    "required": ["audio"],
                }
            },
        },
    },
}


def voice_description(max_bytes: int) -> str:
    """The voice route's OpenAPI description, with the limits a recording must keep to."""
    types = ", ".join(f"`{t}`" for t in AUDIO_TYPES)
    rates = ", ".join(str(r) for r in SAMPLE_RATES)
    return (
        "Answer by voice: the server transcribes the recording and decides what it means.\n\n"
        f"Accepted types: {types} (WAV, FLAC, OGG/Opus, WebM/Opus, MP4/AAC), as the raw body "
        "or as the `audio` part of a multipart body, sampled at one of these rates (Hz): "
        f"{rates}, in 1 to {MAX_CHANNELS} channels. At most "
        f"{max_bytes} bytes (a larger body answers 413) and "
        f"{MIN_VOICE_SECONDS:g} to {MAX_VOICE_SECONDS:g} seconds of sound; anything else, or a "
        "silent, clipped or undecodable recording, is refused with a reason code. Only a "
        "device paired as a voice device may speak. The answer says what was heard, the "
        "decision and, on refusal, what to say instead."
    )
