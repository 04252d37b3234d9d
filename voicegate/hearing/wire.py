"""The two messages between a gate and a recogniser worker, as bytes: pure, no NATS here.

An utterance goes out as ``b"VGU1"``, the length of a JSON head, the head (its id, the model
that must hear it, the deadline after which nobody waits for it, its languages, the readings to
score and the question), then the samples as little-endian float32. A hearing comes back as
``b"VGH1"``, the length of a JSON head, the head (the utterance's id, the worker, the hearing's
fields or an error), then the template features as float32. Neither carries a nonce, a device
or a user: a worker only hears.

Binary samples, not JSON numbers: the longest clip the gate decodes (15 s at 16 kHz, 960,000
bytes) then fits NATS's default 1 MiB message. Anything malformed is a ``WireError``.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voicegate.reasons import Reason
from voicegate.voice.transcribe import Heard, Hearing, Samples, Utterance

UTTERANCE = b"VGU1"
HEARING = b"VGH1"
_LENGTH = struct.Struct("<4sI")  # magic, length of the JSON head
_FLOAT = np.dtype("<f4")


class WireError(ValueError):
    """A message that is not one this module writes."""


@dataclass(frozen=True, slots=True)
class Job:
    """One utterance to hear: what a worker needs, and nothing that decides a release."""

    id: str
    model: str
    deadline: float  # seconds since the epoch; after it the gate no longer waits
    utterance: Utterance


@dataclass(frozen=True, slots=True)
class Reply:
    """What came back for job ``id``: its hearing, or why a worker could not hear it."""

    id: str
    worker: str
    hearing: Hearing | None
    error: str = ""


def pack_job(job: Job) -> bytes:
    """The message for ``job``."""
    u = job.utterance
    head = {
        "id": job.id,
        "model": job.model,
        "deadline": job.deadline,
        "languages": list(u.languages),
        "candidates": list(u.candidates),
        "candidate_languages": list(u.candidate_languages),
        "question": u.question,
    }
    samples = np.ascontiguousarray(u.samples, dtype=_FLOAT)
    return _pack(UTTERANCE, head, samples.tobytes())


def unpack_job(data: bytes) -> Job:
    """The job in ``data``; ``WireError`` when it is not one."""
    head, body = _unpack(UTTERANCE, data)
    if len(body) % _FLOAT.itemsize:
        raise WireError("the samples are not whole float32 values")
    samples: Samples = np.frombuffer(body, dtype=_FLOAT).astype(np.float32)
    utterance = Utterance(
        samples,
        _strings(head, "languages"),
        _strings(head, "candidates"),
        _strings(head, "candidate_languages"),
        question=_text(head, "question"),
    )
    return Job(_text(head, "id"), _text(head, "model"), _number(head, "deadline"), utterance)


def pack_reply(reply: Reply) -> bytes:
    """The reply for one job."""
    head: dict[str, Any] = {"id": reply.id, "worker": reply.worker, "error": reply.error}
    frames = b""
    h = reply.hearing
    if h is not None:
        head["hearing"] = {
            "text": h.text,
            "language": h.language,
            "no_speech_prob": h.no_speech_prob,
            "avg_logprob": h.avg_logprob,
            "scores": [[text, _finite(score)] for text, score in h.scores],
            "hypotheses": [[x.text, x.language, _finite(x.score), x.reading] for x in h.hypotheses],
            "timings_ms": dict(h.timings_ms),
            "refusal": None if h.refusal is None else h.refusal.value,
            "answers": None if h.answers is None else list(h.answers),
            "frames": None if h.frames is None else list(h.frames.shape),
        }
        if h.frames is not None:
            frames = np.ascontiguousarray(h.frames, dtype=_FLOAT).tobytes()
    return _pack(HEARING, head, frames)


def unpack_reply(data: bytes) -> Reply:
    """The reply in ``data``; ``WireError`` when it is not one."""
    head, body = _unpack(HEARING, data)
    raw = head.get("hearing")
    hearing = None
    if raw is not None:
        if not isinstance(raw, dict):
            raise WireError("the hearing is not an object")
        try:
            hearing = _hearing(raw, body)
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"the hearing is malformed: {exc}") from None
    return Reply(_text(head, "id"), _text(head, "worker"), hearing, _text(head, "error"))


def _hearing(raw: dict[str, Any], body: bytes) -> Hearing:
    shape = raw["frames"]
    frames: npt.NDArray[np.float32] | None = None
    if shape is not None:
        rows, cols = (int(n) for n in shape)
        if rows * cols * _FLOAT.itemsize != len(body):
            raise ValueError("the frames do not fill their shape")
        frames = np.frombuffer(body, dtype=_FLOAT).astype(np.float32).reshape(rows, cols)
    answers = raw["answers"]
    return Hearing(
        text=str(raw["text"]),
        language=str(raw["language"]),
        no_speech_prob=float(raw["no_speech_prob"]),
        avg_logprob=float(raw["avg_logprob"]),
        scores=tuple((str(t), _score(s)) for t, s in raw["scores"]),
        hypotheses=tuple(
            Heard(str(t), str(lang), _score(s), None if r is None else str(r))
            for t, lang, s, r in raw["hypotheses"]
        ),
        timings_ms={str(k): float(v) for k, v in dict(raw["timings_ms"]).items()},
        refusal=None if raw["refusal"] is None else Reason(raw["refusal"]),
        frames=frames,
        answers=None if answers is None else tuple(float(p) for p in answers),
    )


def _finite(score: float) -> float | None:
    # A log-probability of -inf (a reading the model cannot produce) has no JSON number.
    return score if math.isfinite(score) else None


def _score(value: Any) -> float:
    return float("-inf") if value is None else float(value)


def _pack(magic: bytes, head: dict[str, Any], body: bytes) -> bytes:
    text = json.dumps(head, ensure_ascii=False, allow_nan=False).encode()
    return _LENGTH.pack(magic, len(text)) + text + body


def _unpack(magic: bytes, data: bytes) -> tuple[dict[str, Any], bytes]:
    if len(data) < _LENGTH.size:
        raise WireError("too short to be a message")
    found, length = _LENGTH.unpack_from(data)
    if found != magic:
        raise WireError(f"not a {magic.decode()} message")
    end = _LENGTH.size + length
    if end > len(data):
        raise WireError("the head runs past the message")
    try:
        head = json.loads(data[_LENGTH.size : end])
    except (UnicodeDecodeError, ValueError):
        raise WireError("the head is not JSON") from None
    if not isinstance(head, dict):
        raise WireError("the head is not an object")
    return head, data[end:]


def _text(head: dict[str, Any], key: str) -> str:
    value = head.get(key, "")
    if not isinstance(value, str):
        raise WireError(f"{key} is not text")
    return value


def _number(head: dict[str, Any], key: str) -> float:
    value = head.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireError(f"{key} is not a number")
    return float(value)


def _strings(head: dict[str, Any], key: str) -> tuple[str, ...]:
    value = head.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WireError(f"{key} is not a list of text")
    return tuple(value)
