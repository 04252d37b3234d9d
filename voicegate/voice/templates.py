"""Personal answers: a user's own takes of each answer, and matching a new answer against them.

Pure maths on arrays. A template is the feature sequence of one enrolment take (never the
audio): the recogniser's own encoder frames over the take's speech (``encoder_frames``; Whisper's
encoder gives a 384- or 512-wide frame every 20 ms), tagged with the model that made them, so
a template of one model is never compared with frames of another. A recogniser with no encoder
(the scripted fake of the unit tests) gives MFCCs instead (``features``). A new answer is
compared with every template of its user by dynamic time warping (DTW), so a slow or drawn-out
"one" still lines up with a quick one. The match rule, per user:

1. **Nearest meaning.** Each meaning's distance is that of its nearest template. The nearest
   meaning wins only if it beats every other meaning of the user by ``MARGIN``.
2. **Rejection from the user's own takes.** The winner must also lie within that meaning's
   radius: the largest leave-one-out distance among its own takes (how far apart this user's
   genuine takes of it come), widened by ``SLACK``, and never beyond ``REACH`` of the distance
   to the nearest take of another meaning the user taught (past that it is as close to "other
   speech" as to the answer). Both distances come from the user's templates alone.

Anything else is no match, and a missing match never refuses an answer by itself: the
recogniser still decides (``voicegate.voice.decision``).

The constants were measured by ``benchmarks/enrol.py`` on tiny.en's encoder frames of the FSDD
calibration speakers (jackson, nicolas) and reported on the others (theo, yweweler); see
docs/voice-measurements.md, "Enrolment".
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from voicegate.domain import Decision

RATE = 16_000  # the clips of voicegate.voice.audio
FRAME = 400  # 25 ms analysis window, the usual speech frame
HOP = 160  # 10 ms hop
NFFT = 512
MELS = 26  # the classic MFCC filter bank size (HTK, python_speech_features)
COEFFS = 13  # c1..c13, c0 (loudness) dropped so a quieter take matches a louder one
LOW_HZ = 60.0
# The top of the filter bank: 4 kHz, so a narrow-band recording (FSDD is 8 kHz) and a 16 kHz one
# give the same features.
HIGH_HZ = 4000.0
TRIM_DB = 30.0  # frames this far below the loudest are edge silence
MIN_FRAMES = 5  # 50 ms: less than this is no speech to match
# Rule constants, chosen by ``benchmarks/enrol.py templates --frames ... --sweep`` on the
# calibration split (jackson, nicolas; tiny.en's encoder frames, 2026-12-03): the most right
# answers there with no wrong card and no negative released, one grid step inside the widest
# reach that releases nothing. REACH binds: 0.8 releases nothing there (380 right of 470) but
# 1.0 releases 36 (and the report split releases 4 at 0.8), so 0.7 (325 right, 0 released on
# either split); SLACK 1.5 and 2.0 and MARGIN 1.0 to 1.2 give the same there; 1.1 asks a tenth
# more than "nearest".
MARGIN = 1.1
SLACK = 1.5
REACH = 0.7
# Whisper's encoder frame: two 10 ms mel hops (voicegate.voice.transcribe).
ENCODER_HOP = 2 * HOP
# The stored form: magic, the length of the tag naming the features (the model), frames and
# coefficients; then the tag and the float16 values. VGT1 (MFCC, untagged) is no longer read.
MAGIC = b"VGT2"
_HEADER = struct.Struct("<4sBHH")

Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True, eq=False)
class Template:
    """One enrolment take of an answer: its meaning and its feature sequence."""

    meaning: Decision
    features: Matrix = field(repr=False)


@dataclass(frozen=True, slots=True)
class Radius:
    """How far from a meaning's takes an answer may lie and still be that meaning."""

    meaning: Decision
    radius: float
    # Where the radius came from: the widest leave-one-out distance, the nearest other meaning.
    spread: float
    nearest_other: float


@dataclass(frozen=True, slots=True)
class Match:
    """The template verdict on one answer; ``meaning`` is None when nothing matched clearly."""

    meaning: Decision | None
    # The nearest meaning when it beats every other by the margin, inside the radius or not.
    nearest: Decision | None
    distance: float
    runner_up: float
    radius: float
    # "matched", "no_templates", "too_short", "ambiguous" (margin), "far" (outside the radius)
    rule: str
    # The nearest template's meaning by any margin; None without templates or speech.
    closest: Decision | None = None
    # Every taught meaning's distance (to its nearest template): what the fusion weighs.
    distances: Mapping[Decision, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Enrolment:
    """Everything a user taught: the templates, their radii, and the "hard for recognisers" flag.

    The radii are computed once, when the templates change (``enrol``), not per answer.
    """

    templates: tuple[Template, ...]
    radii: Mapping[Decision, Radius]
    hard: bool = False


def enrol(templates: Sequence[Template], hard: bool = False) -> Enrolment:
    """A user's enrolment from their templates."""
    return Enrolment(tuple(templates), radii(templates), hard)


def speech(samples: npt.NDArray[np.float32]) -> tuple[int, int] | None:
    """The clip's speech in samples, [start, end): from the first to the last 25 ms frame
    (10 ms hop) within ``TRIM_DB`` of the loudest, the edge silence left out. None when that is
    under ``MIN_FRAMES`` frames: no speech to match."""
    x = np.asarray(samples, dtype=np.float64)
    if len(x) < FRAME:
        return None
    power = _power(x).sum(axis=1)
    energy = 10 * np.log10(power + 1e-12)
    loud = np.flatnonzero(energy > energy.max() - TRIM_DB)
    if not power.max() > 0.0 or loud[-1] - loud[0] + 1 < MIN_FRAMES:  # digital silence: none
        return None
    return int(loud[0]) * HOP, int(loud[-1]) * HOP + FRAME


def encoder_frames(
    encoded: npt.NDArray[np.float32], samples: npt.NDArray[np.float32], lead: int
) -> Matrix:
    """The encoder frames over the speech of ``samples``, heard after ``lead`` samples of quiet:
    a template's features, or an answer's. Empty when the clip holds no speech to match."""
    span = speech(samples)
    if span is None:
        return np.zeros((0, encoded.shape[-1]), dtype=np.float32)
    first = (lead + span[0]) // ENCODER_HOP
    last = -(-(lead + span[1]) // ENCODER_HOP)
    return np.asarray(encoded[first:last], dtype=np.float32)


def features(samples: npt.NDArray[np.float32]) -> Matrix:
    """The MFCC sequence (frames × ``COEFFS``) of 16 kHz mono samples, edge silence trimmed:
    the features of a recogniser with no encoder (the scripted fake), and the comparison of
    ``benchmarks/enrol_features.py``.

    Each coefficient has its mean over the take removed, so the microphone's colouring cancels.
    A clip with no speech to match (``speech``) gives an empty sequence.
    """
    span = speech(samples)
    if span is None:
        return np.zeros((0, COEFFS), dtype=np.float32)
    x = np.asarray(samples, dtype=np.float64)
    power = _power(x)[span[0] // HOP : (span[1] - FRAME) // HOP + 1]
    logmel = np.log(power @ _FILTERS.T + 1e-10)
    cepstra = logmel @ _DCT.T
    cepstra -= cepstra.mean(axis=0)
    return cepstra.astype(np.float32)


def _power(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The power spectrum of each 25 ms frame (10 ms hop), after pre-emphasis (the usual 0.97)."""
    x = np.append(x[0], x[1:] - 0.97 * x[:-1])
    count = 1 + (len(x) - FRAME) // HOP
    index = np.arange(FRAME)[None, :] + HOP * np.arange(count)[:, None]
    out: npt.NDArray[np.float64] = np.abs(np.fft.rfft(x[index] * np.hamming(FRAME), NFFT)) ** 2
    return out / NFFT


def distance(a: Matrix, b: Matrix) -> float:
    """The DTW distance of two sequences: the cheapest alignment's summed frame distance over
    the lengths of both (steps right, down and diagonal, each weighted 1)."""
    if len(a) == 0 or len(b) == 0:
        return float("inf")
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    # |x - y|^2 = |x|^2 + |y|^2 - 2 x.y: one matrix product, not a frames × frames × width array
    # (encoder frames are 384 or 512 wide).
    squared = (x * x).sum(axis=1)[:, None] + (y * y).sum(axis=1)[None, :] - 2.0 * (x @ y.T)
    cost = np.sqrt(np.maximum(squared, 0.0))
    # Row by row: D[i, j] = c[i, j] + min(D[i-1, j-1], D[i-1, j], D[i, j-1]). Within a row the
    # left dependency x_j = min(m_j, x_{j-1}) + c_j unrolls to S_j + min_{k<=j}(m_k - S_{k-1}),
    # S the running sum of c: one accumulate per row instead of a loop over columns.
    row = np.cumsum(cost[0])
    for i in range(1, len(a)):
        above = np.minimum(row, np.concatenate(([np.inf], row[:-1])))
        running = np.cumsum(cost[i])
        before = np.concatenate(([0.0], running[:-1]))
        row = running + np.minimum.accumulate(above - before)
    return float(row[-1] / (len(a) + len(b)))


def radii(
    templates: Sequence[Template], slack: float = SLACK, reach: float = REACH
) -> dict[Decision, Radius]:
    """Each taught meaning's radius, from the user's own templates (module docstring, rule 2).

    A meaning with a single take has no leave-one-out spread and gets no radius: it never
    matches until it has two.
    """
    out: dict[Decision, Radius] = {}
    meanings = list(dict.fromkeys(t.meaning for t in templates))
    table = np.array([[distance(a.features, b.features) for b in templates] for a in templates])
    for meaning in meanings:
        own = [i for i, t in enumerate(templates) if t.meaning == meaning]
        rest = [i for i, t in enumerate(templates) if t.meaning != meaning]
        if len(own) < 2:
            continue
        spread = max(min(table[i, j] for j in own if j != i) for i in own)
        nearest_other = min((table[i, j] for i in own for j in rest), default=float("inf"))
        radius = min(spread * slack, nearest_other * reach)
        out[meaning] = Radius(meaning, float(radius), float(spread), float(nearest_other))
    return out


def match(
    query: Matrix,
    templates: Sequence[Template],
    calibrated: dict[Decision, Radius],
    margin: float = MARGIN,
) -> Match:
    """The meaning of one answer by the user's templates (module docstring, rules 1 and 2)."""
    if not templates:
        return Match(None, None, float("inf"), float("inf"), 0.0, "no_templates")
    if len(query) == 0:
        return Match(None, None, float("inf"), float("inf"), 0.0, "too_short")
    nearest: dict[Decision, float] = {}
    for t in templates:
        if t.features.shape[1] != query.shape[1]:
            continue  # features of another kind than the answer's: never compared
        d = distance(query, t.features)
        nearest[t.meaning] = min(d, nearest.get(t.meaning, float("inf")))
    return judge(nearest, calibrated, margin)


def judge(
    nearest: dict[Decision, float], calibrated: dict[Decision, Radius], margin: float = MARGIN
) -> Match:
    """Rules 1 and 2 on each meaning's nearest-template distance."""
    if not nearest:
        return Match(None, None, float("inf"), float("inf"), 0.0, "no_templates")
    ranked = sorted(nearest, key=lambda m: nearest[m])
    best = ranked[0]
    d1 = nearest[best]
    d2 = nearest[ranked[1]] if len(ranked) > 1 else float("inf")
    r = calibrated.get(best)
    radius = r.radius if r is not None else 0.0
    distances = dict(nearest)
    if not d1 * margin < d2:
        return Match(None, None, d1, d2, radius, "ambiguous", best, distances)
    if r is None or not d1 <= radius:
        return Match(None, best, d1, d2, radius, "far", best, distances)
    return Match(best, best, d1, d2, radius, "matched", best, distances)


def encode(matrix: Matrix, kind: str) -> bytes:
    """The stored form of one template's features, tagged with ``kind``, the model that made
    them (float16: about 38 kB per second of tiny.en's encoder frames)."""
    frames, coeffs = matrix.shape
    tag = kind.encode()
    if not 0 < len(tag) < 256:
        raise ValueError("a model name is 1 to 255 bytes")
    return _HEADER.pack(MAGIC, len(tag), frames, coeffs) + tag + matrix.astype("<f2").tobytes()


def decode(data: bytes, kind: str) -> Matrix:
    """Stored features back to a matrix; ``ValueError`` when they are not in this format or
    were made by another model than ``kind``."""
    if len(data) < _HEADER.size:
        raise ValueError("template features too short")
    magic, size, frames, coeffs = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("not template features of this version")
    tag = data[_HEADER.size : _HEADER.size + size]
    body = data[_HEADER.size + size :]
    if tag != kind.encode():
        raise ValueError(f"template features of another model, not {kind}")
    if frames == 0 or coeffs == 0 or len(body) != 2 * frames * coeffs:
        raise ValueError("template features of the wrong size")
    values = np.frombuffer(body, dtype="<f2").astype(np.float32)
    if not np.isfinite(values).all():
        raise ValueError("template features are not finite")
    return values.reshape(frames, coeffs)


def _mel(hz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return 2595.0 * np.log10(1.0 + hz / 700.0)


def _filters() -> npt.NDArray[np.float64]:
    """Triangular mel filters over the FFT bins, ``LOW_HZ`` to ``HIGH_HZ``."""
    edges_mel = np.linspace(_mel(np.array(LOW_HZ)), _mel(np.array(HIGH_HZ)), MELS + 2)
    edges = 700.0 * (10 ** (edges_mel / 2595.0) - 1.0)
    bins = np.fft.rfftfreq(NFFT, 1.0 / RATE)
    out = np.zeros((MELS, len(bins)))
    for m in range(MELS):
        low, mid, high = edges[m], edges[m + 1], edges[m + 2]
        rising = (bins - low) / (mid - low)
        falling = (high - bins) / (high - mid)
        out[m] = np.clip(np.minimum(rising, falling), 0.0, None)
    return out


def _dct() -> npt.NDArray[np.float64]:
    """DCT-II rows 1..COEFFS over the mel bands (orthonormal scaling)."""
    n = np.arange(MELS)
    k = np.arange(1, COEFFS + 1)[:, None]
    out: npt.NDArray[np.float64] = math.sqrt(2.0 / MELS) * np.cos(
        np.pi * k * (2 * n + 1) / (2 * MELS)
    )
    return out


_FILTERS = _filters()
_DCT = _dct()
