"""Replay fingerprint: refuse a recording that was accepted before, even after re-encoding.

A replay is the same recording uploaded again, perhaps resampled, louder or quieter, padded
with silence, trimmed, mixed with noise, sign-flipped or sent through a lossy codec. None of
these change the waveform's fine structure, so the test is the peak of the magnitude of the
normalised cross-correlation over all lags between two band-passed (300–1800 Hz),
energy-trimmed, 4 kHz waveforms: the magnitude, because a copy with its sign flipped sounds the
same and correlates at -1. A new take of the same word by the same voice never lines up sample
for sample and stays well below the threshold.

A codec at a low bitrate (AAC at 24–32 kbit/s from a 44.1 or 48 kHz recording) leaves its
quantisation noise only 6–12 dB under the speech in this band (``benchmarks/replay_codec.py
--aac``), which takes the exact score of some replays under its threshold. That noise follows
the spectrum (the codec hides it under the loud parts), while a new take matches its original
mostly in the loud low harmonics of the same vowel. So the ``WHITE_CANDIDATES`` best of the
exact stage are correlated again with both spectral envelopes flattened halfway (``_whiten``):
a codec replay keeps most of its score there, a new take loses more, and ``WHITE_THRESHOLD`` is
a reuse.

To check one upload against thousands of stored ones, a coarse stage first correlates the 100 Hz
energy envelopes of four sub-bands of all of them at once (one batched FFT); only the best
``SHORTLIST`` go on to the exact waveform correlation. An exact hash of the decoded samples
catches identical bytes before either stage.

A speed, pitch or tempo change breaks the sample-for-sample match, so when the exact stage
finds nothing, the shortlist is ranked again for a rate change (``rescaled.rank``: the query's
loudest windows at sixteen scales against each waveform, the best 4), and those 4 are scored by
``voicegate.voice.rescaled`` around the scale the ranking found (time-scaled versions of the
query against each, window by window: the mean correlation and the share of near-exact
windows on the best path, either at its threshold a reuse).

What this cannot catch (a recording played through a loudspeaker into the microphone, a change
of more than about 15 %, a new synthetic voice) is covered elsewhere: see docs/voice.md,
"Replay fingerprint".
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.ndimage import uniform_filter1d
from scipy.signal import butter, resample_poly, sosfilt

from voicegate.domain import StoredFingerprint
from voicegate.errors import AudioRefused
from voicegate.reasons import Reason
from voicegate.store.base import FingerprintStore
from voicegate.voice import rescaled
from voicegate.voice.audio import SAMPLE_RATE, Clip

RATE = 4000
HOP = 80  # 20 ms at 4 kHz: the frame for edge trimming
TRIM_DB = 25.0  # frames this far below the loudest are edge silence
# Calibrated on the spoken-digit corpus (docs/voice.md): new takes of the same digit by the same
# speaker stay below it in 99.9 % of pairs; replays after every listed transformation score above.
THRESHOLD = 0.92
# The whitened score (``_whiten``): the highest of the fit speakers' (jackson, theo) pairs of
# distinct takes that the exact score leaves under its threshold scored 0.852; the next round
# value above it (docs/voice-measurements.md, "Replay fingerprint").
WHITE_THRESHOLD = 0.86
# Magnitudes divided by the envelope to this power (flattened halfway), the envelope a moving
# average this wide: the first setting tried; sharper ones that the fit speakers preferred
# flagged 19-55 more new takes of the report speakers (docs/voice-measurements.md, "Replay
# fingerprint").
WHITE_POWER = 0.5
WHITE_SMOOTH = 150.0  # Hz
SHORTLIST = 100
# The whitened score is taken for the candidates whose exact score is highest: a codec replay's
# original scores 0.795 or more there (Opus at 8 kbit/s with noise, the lowest of
# benchmarks/replay.py's rows), which about 1 % of new takes reach (their 99th percentile is
# 0.811), so it stands among the first of a user's 49 other takes of the same word.
WHITE_CANDIDATES = 10
UPSAMPLE = 4  # the exact stage resolves lags to 1/16 000 s
MAGIC = b"VGF1"
_HEADER = struct.Struct("<4s32sIf")  # magic, sha256 of the samples, length, int8 scale
_BAND = butter(4, [300.0, 1800.0], btype="bandpass", fs=RATE, output="sos")
ENV_HOP = 40  # 10 ms at 4 kHz: one envelope value
_SUBBANDS = [
    butter(2, [low, high], btype="bandpass", fs=RATE, output="sos")
    for low, high in ((300.0, 600.0), (600.0, 1000.0), (1000.0, 1400.0), (1400.0, 1800.0))
]

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True, eq=False)
class Print:
    """The decoded replay features of one recording."""

    digest: bytes
    wave: Vector = field(repr=False)
    envelope: npt.NDArray[np.float32] = field(repr=False)


def features(clip: Clip) -> bytes:
    """The stored form of a clip's replay features (about 4 kB per second of speech)."""
    digest = hashlib.sha256(np.asarray(clip.samples, dtype=np.float32).tobytes()).digest()
    wave = _wave(clip.samples)
    peak = float(np.abs(wave).max()) if len(wave) else 0.0
    scale = peak / 127.0 if peak > 0.0 else 1.0
    q = np.clip(np.round(wave / scale), -127, 127).astype(np.int8)
    return _HEADER.pack(MAGIC, digest, len(q), scale) + q.tobytes()


def load(data: bytes) -> Print:
    """Decode stored features; ``ValueError`` when they are not in this format."""
    if len(data) < _HEADER.size:
        raise ValueError("features too short")
    magic, digest, n, scale = _HEADER.unpack_from(data)
    if magic != MAGIC or len(data) != _HEADER.size + n or not math.isfinite(scale):
        raise ValueError("not replay features of this version")
    wave = np.frombuffer(data, dtype=np.int8, offset=_HEADER.size).astype(np.float32)
    norm = float(np.linalg.norm(wave))
    wave = wave / norm if norm > 0.0 else wave
    return Print(digest=digest, wave=wave, envelope=_envelope(wave))


def similarity(a: bytes | Print, b: bytes | Print) -> float:
    """How alike two recordings are: 1.0 for the same one, below ``THRESHOLD`` for new takes."""
    pa = a if isinstance(a, Print) else load(a)
    pb = b if isinstance(b, Print) else load(b)
    if pa.digest == pb.digest:
        return 1.0
    return _exact(pa.wave, pb.wave)


def whitened_similarity(a: bytes | Print, b: bytes | Print) -> float:
    """``similarity`` with both spectral envelopes flattened halfway: below
    ``WHITE_THRESHOLD`` for new takes, above it for low-bitrate codec replays."""
    pa = a if isinstance(a, Print) else load(a)
    pb = b if isinstance(b, Print) else load(b)
    if pa.digest == pb.digest:
        return 1.0
    return _exact(_whiten(pa.wave), _whiten(pb.wave))


def _wave(samples: npt.NDArray[np.float32]) -> Vector:
    """Band-passed, edge-trimmed, unit-energy 4 kHz waveform."""
    y = sosfilt(_BAND, resample_poly(samples.astype(np.float64), 1, SAMPLE_RATE // RATE))
    n = len(y) // HOP
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    frames = np.sqrt(np.mean(y[: n * HOP].reshape(n, HOP) ** 2, axis=1))
    loud = np.nonzero(frames >= frames.max() * 10 ** (-TRIM_DB / 20))[0]
    y = y[loud[0] * HOP : (loud[-1] + 1) * HOP]
    norm = float(np.linalg.norm(y))
    return np.asarray(y / norm if norm > 0.0 else y, dtype=np.float32)


def _envelope(wave: Vector) -> npt.NDArray[np.float32]:
    """Mean-removed 100 Hz energy envelopes of four sub-bands (bands × frames), unit norm."""
    n = max(len(wave) // ENV_HOP, 1)
    padded = np.zeros(n * ENV_HOP, dtype=np.float64)
    padded[: min(len(wave), n * ENV_HOP)] = wave[: n * ENV_HOP]
    env = np.empty((len(_SUBBANDS), n))
    for i, sos in enumerate(_SUBBANDS):
        band = sosfilt(sos, padded)
        env[i] = np.sqrt(np.mean(band.reshape(n, ENV_HOP) ** 2, axis=1))
    env -= env.mean(axis=1, keepdims=True)
    norm = float(np.linalg.norm(env))
    return np.asarray(env / norm if norm > 0.0 else env, dtype=np.float32)


def _fft_size(n: int) -> int:
    return 1 << max(n - 1, 1).bit_length()


def _exact(a: Vector, b: Vector) -> float:
    """Peak normalised cross-correlation of two waveforms (see ``_exact_many``)."""
    return float(_exact_many(a, [b])[0])


def _exact_many(a: Vector, others: list[Vector]) -> npt.NDArray[np.float64]:
    """Peak magnitude of the normalised cross-correlation of ``a`` with each of ``others``, in
    one batched FFT.

    The score is re-normalised over the overlap at the peak lag, so a trimmed copy scores as high
    as the whole one; the lag is still chosen by the raw correlation, which favours long
    overlaps, so a short chance match at an edge cannot win. The magnitude, because a copy with
    its sign flipped is the same recording (on the spoken-digit corpus, a new take's most
    negative peak is lower than its most positive one: docs/voice-measurements.md).
    """
    scores = np.zeros(len(others))
    if len(a) == 0 or not others:
        return scores
    longest = max(len(b) for b in others)
    size = _fft_size(len(a) + longest - 1)
    block = np.zeros((len(others), longest), dtype=np.float32)
    for r, b in enumerate(others):
        block[r, : len(b)] = b
    spectra = np.fft.rfft(a, size)[None, :] * np.conj(np.fft.rfft(block, size))
    # Zero-padding the spectrum interpolates the correlation between 4 kHz samples: a copy that
    # was cut or padded by a number of samples not divisible by four lines up only in between.
    corr = np.fft.irfft(spectra, size * UPSAMPLE) * UPSAMPLE
    energy_a = np.concatenate([[0.0], np.cumsum(a.astype(np.float64) ** 2)])
    for r, b in enumerate(others):
        k = int(np.argmax(np.abs(corr[r])))
        peak = abs(float(corr[r, k]))
        fine = k if k < len(a) * UPSAMPLE else k - size * UPSAMPLE
        lag = round(fine / UPSAMPLE)  # a[i + lag] lines up with b[i]
        i0, i1 = max(0, -lag), min(len(b), len(a) - lag)
        if i1 <= i0 or peak <= 0.0:
            continue
        ea = energy_a[i1 + lag] - energy_a[i0 + lag]
        eb = float(np.dot(b[i0:i1], b[i0:i1]))
        if ea > 0.0 and eb > 0.0:
            scores[r] = min(peak / math.sqrt(ea * eb), 1.0)
    return scores


def _whiten(wave: Vector) -> Vector:
    """The waveform with its spectral envelope flattened halfway, unit energy.

    Each magnitude is divided by the square root (``WHITE_POWER``) of its ``WHITE_SMOOTH``-wide
    moving average of power, the phases kept. A codec's quantisation noise follows the
    envelope, so a codec replay loses little of its score here; a new take of the same vowel,
    which matches mostly in its loudest harmonics, loses more (module docstring).
    """
    if len(wave) == 0:
        return wave
    size = _fft_size(len(wave) + 2 * HOP)  # room for the filter's spread past the ends
    spectrum = np.fft.rfft(wave.astype(np.float64), size)
    width = max(round(WHITE_SMOOTH * size / RATE), 1)
    envelope = np.sqrt(uniform_filter1d(np.abs(spectrum) ** 2, width))
    floor = 1e-9 * float(envelope.max()) if envelope.size else 0.0
    flat = np.fft.irfft(spectrum / np.maximum(envelope, floor) ** WHITE_POWER, size)[: len(wave)]
    norm = float(np.linalg.norm(flat))
    return np.asarray(flat / norm if norm > 0.0 else flat, dtype=np.float32)


class Library:
    """The replay features of one user's recordings, searchable in one batched pass."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.prints: list[Print] = []
        self._digests: dict[bytes, str] = {}
        # Envelopes grouped by power-of-two length class, with cached spectra per FFT size.
        self._rows: dict[int, list[int]] = {}
        self._spectra: dict[tuple[int, int], npt.NDArray[np.complex64]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, fingerprint_id: str, item: Print) -> None:
        """Remember one recording's features."""
        index = len(self.ids)
        self.ids.append(fingerprint_id)
        self.prints.append(item)
        self._digests.setdefault(item.digest, fingerprint_id)
        self._rows.setdefault(_fft_size(item.envelope.shape[1]), []).append(index)

    def match(
        self,
        query: Print,
        threshold: float = THRESHOLD,
        rate_threshold: float | None = rescaled.THRESHOLD,
        close_threshold: float | None = rescaled.CLOSE_THRESHOLD,
        white_threshold: float | None = WHITE_THRESHOLD,
    ) -> tuple[str, float, str] | None:
        """The stored recording this one replays, its score and the stage (``exact``,
        ``whitened``, ``rate``) that found it, or None. ``white_threshold=None`` skips the
        whitened score, ``rate_threshold=None`` the rate stage; ``close_threshold=None`` judges
        the rate stage by the mean correlation alone."""
        if query.digest in self._digests:
            return self._digests[query.digest], 1.0, "exact"
        candidates = self.shortlist(query)
        if not candidates:
            return None
        waves = [self.prints[i].wave for i in candidates]
        scores = _exact_many(query.wave, waves)
        top = int(np.argmax(scores))
        if scores[top] >= threshold:
            return self.ids[candidates[top]], float(scores[top]), "exact"
        if white_threshold is not None:
            best = [int(i) for i in np.argsort(-scores)[:WHITE_CANDIDATES]]
            flat = _exact_many(_whiten(query.wave), [_whiten(waves[i]) for i in best])
            top = int(np.argmax(flat))
            if flat[top] >= white_threshold:
                return self.ids[candidates[best[top]]], float(flat[top]), "whitened"
        if rate_threshold is None:
            return None
        for index, found in self.rate_scores(query, candidates):
            if found.reaches(rate_threshold, close_threshold):
                return self.ids[index], found.mean, "rate"
        return None

    def rate_scores(
        self, query: Print, candidates: list[int]
    ) -> Iterator[tuple[int, rescaled.Score]]:
        """The rate stage's scores of the best-ranked of ``candidates``, best-ranked first.

        Every candidate is ranked on its waveform (``rescaled.rank``): 100 takes of the same
        word by the same voice have envelopes too alike to rank a replay's original among the
        first few by them (docs/voice.md, "the rate stage").
        """
        # Prepared on each use, not kept: 0.2 ms each, and memory stays one int8 per sample.
        prepared = [rescaled.prepare(self.prints[i].wave) for i in candidates]
        for pick, scale in rescaled.rank(query.wave, prepared, rescaled.CANDIDATES):
            yield candidates[pick], rescaled.score(query.wave, prepared[pick], scale)

    def shortlist(self, query: Print, size: int = SHORTLIST) -> list[int]:
        """Indices of the ``size`` stored recordings whose envelopes line up best with the query."""
        if len(self.ids) <= size:
            return list(range(len(self.ids)))
        indices: list[npt.NDArray[np.intp]] = []
        scores: list[npt.NDArray[np.float32]] = []
        for length, rows in self._rows.items():
            nfft = _fft_size(query.envelope.shape[1] + length - 1)
            spectra = self._spectra_for(length, nfft)
            q = np.conj(np.fft.rfft(query.envelope, nfft, axis=1)).astype(np.complex64)
            # Summing the band spectra before the inverse FFT sums the band correlations.
            corr = np.fft.irfft(np.einsum("rbf,bf->rf", spectra, q), nfft, axis=1)
            scores.append(corr.max(axis=1).astype(np.float32))
            indices.append(np.asarray(rows, dtype=np.intp))
        all_scores = np.concatenate(scores)
        all_indices = np.concatenate(indices)
        top = np.argpartition(-all_scores, size - 1)[:size]
        return [int(i) for i in all_indices[top]]

    def _spectra_for(self, length: int, nfft: int) -> npt.NDArray[np.complex64]:
        rows = self._rows[length]
        cached = self._spectra.get((length, nfft))
        have = 0 if cached is None else len(cached)
        if have < len(rows):
            block = np.zeros((len(rows) - have, len(_SUBBANDS), length), dtype=np.float32)
            for r, index in enumerate(rows[have:]):
                env = self.prints[index].envelope
                block[r, :, : env.shape[1]] = env
            fresh = np.fft.rfft(block, nfft, axis=2).astype(np.complex64)
            cached = fresh if cached is None else np.concatenate([cached, fresh])
            self._spectra[(length, nfft)] = cached
        assert cached is not None
        return cached


@dataclass(slots=True)
class _UserCache:
    library: Library = field(default_factory=Library)
    seen: set[str] = field(default_factory=set)
    synced_to: float = -math.inf
    built_at: float = 0.0


class ReplayGuard:
    """Refuses a recording this user already sent, across replicas sharing one store."""

    def __init__(
        self,
        store: FingerprintStore,
        *,
        retention: float = 30 * 24 * 3600.0,  # 30 days, in seconds
        threshold: float = THRESHOLD,
        rate_threshold: float | None = rescaled.THRESHOLD,
        close_threshold: float | None = rescaled.CLOSE_THRESHOLD,
        white_threshold: float | None = WHITE_THRESHOLD,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.retention = retention
        self.threshold = threshold
        self.rate_threshold = rate_threshold
        self.close_threshold = close_threshold
        self.white_threshold = white_threshold
        self.clock = clock
        self._users: dict[str, _UserCache] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def check_and_remember(self, user: str, clip: Clip) -> str:
        """Remember the clip and return its id; raise ``AudioRefused(AUDIO_REUSED)`` on reuse.

        The features and the match run in a worker thread, so a user with a long history does
        not hold up other requests; the user's lock keeps the match and the add in one step.
        """
        data = await asyncio.to_thread(features, clip)
        query = load(data)
        lock = self._locks.setdefault(user, asyncio.Lock())
        async with lock:
            cache = await self._refresh(user)
            found = await asyncio.to_thread(
                cache.library.match,
                query,
                self.threshold,
                self.rate_threshold,
                self.close_threshold,
                self.white_threshold,
            )
            if found is not None:
                raise AudioRefused(Reason.AUDIO_REUSED)
            fingerprint_id = uuid.uuid4().hex
            now = self.clock()
            await self.store.add(
                StoredFingerprint(id=fingerprint_id, user=user, created_at=now, data=data)
            )
            cache.library.add(fingerprint_id, query)
            cache.seen.add(fingerprint_id)
            return fingerprint_id

    async def _refresh(self, user: str) -> _UserCache:
        """Bring this user's cache up to date with rows any replica added since the last look."""
        now = self.clock()
        horizon = now - self.retention
        cache = self._users.get(user)
        if cache is None or now - cache.built_at > self.retention:
            # After a retention period the cache holds rows the store has forgotten: rebuild it
            # from the store, which bounds memory to one retention period of this user's uploads.
            cache = _UserCache(built_at=now)
            self._users[user] = cache
        since = max(cache.synced_to, horizon)
        rows = await self.store.since(user, since)
        for row in rows:
            if row.id in cache.seen or row.created_at < horizon:
                continue
            try:
                item = load(row.data)
            except ValueError:
                continue  # features of another version: ignore rather than refuse everyone
            cache.library.add(row.id, item)
            cache.seen.add(row.id)
        # Rows stamped by another replica's slightly earlier clock may still arrive; look back.
        if rows:
            cache.synced_to = max(cache.synced_to, max(r.created_at for r in rows) - 60.0)
        return cache
