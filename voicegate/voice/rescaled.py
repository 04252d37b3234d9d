"""Replays through a speed, pitch or tempo change: the second stage of the replay fingerprint.

``sox speed`` resamples (every frequency and the duration scale by one factor); ``sox pitch``
and ``sox tempo`` cut the recording into segments of about 80 ms and overlap-add them at a new
spacing (WSOLA), with a resampling for pitch. Either way, after the frequencies are scaled back,
every stretch of a few tens of milliseconds of the replay is a copy of a stretch of the
original, and consecutive stretches sit at nearly consecutive places in it. A new take of the
same word never lines up that closely for long.

So the score of a query against one stored recording is:

1. Both waveforms are band-passed again to 360-1600 Hz with a zero-phase filter, the band both
   keep for a change of up to about ±10 % (300-1800 Hz scaled by 0.9-1.11 keeps 333-1620 Hz).
   At the ends of the search below (scaled by 0.861-1.184: 355-1550 Hz) the rescaled query
   lacks the band's top 50 Hz; docs/voice.md gives how many such replays are refused.
2. The query is resampled by each of ``SCALES`` (1 % apart through 1.0, 0.861-1.184: a speed
   change of 0.845-1.161, a little past ±15 %), ranked by the ``QUICK`` loudest windows alone;
   the best two are refined in ``FINE`` steps (0.125 %); the three best get step 4. Both
   waveforms went through the fingerprint's causal 300-1800 Hz band-pass, the upload at its
   own, scaled frequencies, so each rescaled query has that filter's phase put right
   (``_unphase``): at a change of 15 % it kept replays under the thresholds at their exact
   scale. For the ranking of the scales, the query is band-passed and put right once for the
   nearest of ``CENTRES`` before it is rescaled, not once per scale.
3. The query is cut into 32 ms windows every 16 ms; each window's normalised correlation with
   the stored waveform is taken at every lag and every half lag, and interpolated between
   those. Whole lags alone are too coarse for a band reaching 1.6 kHz at 4 kHz: read at its
   exact scale, a speed replay's mean was 0.997 on the sample and 0.924 half a sample off.
4. A path through the windows picks one lag each: the next window's lag follows the last one
   within ``TIGHT`` samples for free, or jumps up to ``JUMP`` samples (a WSOLA seam) at a cost
   of ``PENALTY`` window weights. Two paths are taken, at the best scale: one for the
   energy-weighted mean correlation (``Score.mean``, at whole lags, as its threshold was
   fitted), one for the energy-weighted share of near-exact windows (``Score.close``: a
   window counts 0 at a correlation of ``NEAR`` or less, rising linearly to 1 at 1.0).

Why two: a new take of the same vowel by the same voice correlates well window by window
(0.9 and more), so its mean can come close to a replay's; but only a copy has many windows that
line up almost exactly. A WSOLA change (pitch, tempo) keeps most windows exact between its
seams, so its mean drops while its share of near-exact windows stays high. A speed change is
read back through linear interpolation, which caps every window a little below 1.0, so the mean
finds it better. A score is a reuse when either reaches its threshold (``Score.reaches``).

The thresholds (``THRESHOLD``, ``CLOSE_THRESHOLD``) were fitted on the speakers jackson and
theo of the spoken-digit corpus and are reported on nicolas and yweweler
(benchmarks/replay_rate.py, docs/voice.md "Replay fingerprint"). The window, path and scale
constants were chosen by hand from small samples of all four speakers, before that split;
``NEAR`` was chosen on jackson and theo alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import fft
from scipy.ndimage import maximum_filter1d
from scipy.signal import butter, resample_poly, sosfilt, sosfilt_zi, sosfreqz

Floats = npt.NDArray[np.float64]
Singles = npt.NDArray[np.float32]

RATE = 4000  # the fingerprint's sample rate (fingerprint.RATE)
COMMON = (360.0, 1600.0)  # Hz (step 1)
# The band-pass the stored waveform and the upload went through (``fingerprint._BAND``): causal,
# so its phase, read at the scaled frequencies of a rate change, is undone (``_unphase``).
STORED_BAND = butter(4, [300.0, 1800.0], btype="bandpass", fs=RATE, output="sos")
_COMMON = butter(6, COMMON, btype="bandpass", fs=RATE, output="sos")
_ZI = sosfilt_zi(_COMMON)
PAD = 64  # samples of odd extension each side of the zero-phase filter (16 ms)
# 1 % apart through 1.0 (a codec replay that the exact stage missed has no rate change), from
# 0.861 to 1.184: a speed change s is undone at the scale 1 / s, so 0.845-1.161.
SCALES = 1.01 ** np.arange(-15, 18)
FINE = tuple(k * 0.00125 for k in (-4, -3, -2, -1, 1, 2, 3, 4))  # around a coarse scale
REFINE = 2  # coarse scales refined
WINDOW = 128  # 32 ms at 4 kHz: several pitch periods, shorter than a WSOLA segment
HOP = 64
TIGHT = 2  # samples a window's lag may drift from the last one's, free
JUMP = 32  # samples of a WSOLA seam: sox searches ±7.3 ms, 29 samples at 4 kHz
PENALTY = 0.25  # window weights one seam costs
QUICK = 8  # loudest windows that rank the scales before the full path
PATHS = 3  # best-ranked scales that get the full path
THRESHOLD = 0.95  # Score.mean
# Score.close: the highest pair of distinct takes of the fit speakers scored 0.7005 (half of the
# pairs of jackson and theo, docs/voice-measurements.md; 0.693 before the half lags); the next
# round value above it.
CLOSE_THRESHOLD = 0.71
NEAR = 0.9  # window correlation from which a window starts to count as near-exact
UP = 4  # the query is oversampled this much once, then read at each scale
CANDIDATES = 4  # shortlisted recordings given the full score, ranked by ``rank``
RANK_SCALES = 1.022 ** np.arange(-7, 9)  # 2.2 % apart through 1.0, 0.859-1.190
RANK_WINDOWS = 4  # loudest windows per scale in that ranking
# A replay's scale lies within half a ranking step (1.1 %) of the nearest of ``RANK_SCALES``,
# and the ranking may prefer the next one: ``score`` searches 1.5 steps either side of it (7 of
# ``SCALES``, not 33: the scale search was half a score's time).
AROUND = 1.5 * math.log(1.022)
# The scale search reads the query band-passed before it is rescaled, to the common band as the
# nearest of these scales will move it: at most 7.6 % off for any of ``SCALES`` (1.184 / 1.1).
# With the band unmoved, 18 % off at the ends, the loudest windows of a `speed 0.85` replay
# matched no better at its own scale than at others (docs/voice-measurements.md, "Replay
# fingerprint").
CENTRES = (1 / 1.1, 1.0, 1.1)
_CENTRED = {
    c: butter(6, [COMMON[0] / c, COMMON[1] / c], btype="bandpass", fs=RATE, output="sos")
    for c in CENTRES
}
_ZIS = {c: sosfilt_zi(sos) for c, sos in _CENTRED.items()}


@dataclass(frozen=True, slots=True)
class Score:
    """How well a query lines up with one stored recording after a rate change."""

    mean: float  # energy-weighted mean window correlation on the best path
    close: float  # energy-weighted share of near-exact windows on the best path

    def reaches(self, threshold: float, close_threshold: float | None) -> bool:
        """Whether this is a reuse: either part at its threshold (None: the mean alone)."""
        if self.mean >= threshold:
            return True
        return close_threshold is not None and self.close >= close_threshold


NOTHING = Score(0.0, 0.0)


def prepare(wave: npt.NDArray[np.float32]) -> Floats:
    """The stored waveform in the common band, as every comparison here reads it."""
    return _band(np.asarray(wave, dtype=np.float64))


def _band(x: Floats, sos: Floats = _COMMON, zi: Floats = _ZI) -> Floats:
    """``x`` in the common band (or the band of ``sos``, whose start state is ``zi``),
    zero-phase: scipy's ``sosfiltfilt`` with its start state computed once, not on every call
    (it was half the cost of a score)."""
    if len(x) <= 3 * WINDOW:
        return x
    ext = np.concatenate([2 * x[0] - x[PAD:0:-1], x, 2 * x[-1] - x[-2 : -PAD - 2 : -1]])
    y, _ = sosfilt(sos, ext, zi=zi * ext[0])
    y = y[::-1]
    y, _ = sosfilt(sos, y, zi=zi * y[0])
    return np.asarray(y[::-1][PAD:-PAD], dtype=np.float64)


def rank(query: npt.NDArray[np.float32], stored: list[Floats], k: int) -> list[tuple[int, float]]:
    """The ``k`` prepared waveforms that the query's loudest windows match best at one of
    ``RANK_SCALES``, each as its index and that scale: a cheaper ``score`` that keeps the
    original among the first few, and tells ``score`` where to look. The windows' spectra are
    taken once for each FFT size, not once for each waveform."""
    if len(query) < 2 * WINDOW or not stored:
        return []
    fine = resample_poly(np.asarray(query, dtype=np.float64), UP, 1)
    picked: list[Floats] = []
    weights: list[Floats] = []
    scales: list[float] = []
    for r in RANK_SCALES:
        x = _rescaled(fine, float(r))
        if len(x) < WINDOW:
            continue
        frames, energy = _windows(x)
        loud = np.argsort(energy)[-RANK_WINDOWS:]
        picked.append(frames[loud])
        weights.append(energy[loud] / energy[loud].sum())
        scales.append(float(r))
    if not picked:
        return []
    frames = np.concatenate(picked)
    found = np.zeros(len(stored))
    where = np.ones(len(stored))
    spectra: dict[int, npt.NDArray[np.complex64]] = {}  # the windows' spectra, by FFT size
    for i, wave in enumerate(stored):
        if len(wave) < WINDOW:
            continue
        target = _Stored(wave)
        if target.size not in spectra:
            spectra[target.size] = _spectra(frames, target.size)
        peaks = _peaks(_correlations(frames, target, spectra[target.size]))
        start = 0
        for w, r in zip(weights, scales, strict=True):
            here = float((peaks[start : start + len(w)] * w).sum())
            if here > found[i]:
                found[i], where[i] = here, r
            start += len(w)
    return [(int(i), float(where[i])) for i in np.argsort(-found)[:k]]


class _Stored:
    """One prepared stored waveform: its padded spectrum and the energy under every lag, on
    the half-sample grid that ``_correlations`` reads (index ``2 * k`` is lag ``k``)."""

    def __init__(self, stored: Floats) -> None:
        padded = np.concatenate([np.zeros(WINDOW), stored, np.zeros(WINDOW)])
        self.size = 1 << (len(padded) + WINDOW - 1).bit_length()
        self.lags = len(stored) + WINDOW + 1
        self.spectrum = fft.rfft(padded.astype(np.float32), self.size)
        energy = np.concatenate([[0.0], np.cumsum(padded**2)])
        local = np.sqrt(np.maximum(energy[WINDOW:] - energy[:-WINDOW], 0.0))[: self.lags]
        self.floor = 1e-3 * np.sqrt(energy[-1])
        halves = np.empty(2 * self.lags)
        halves[0::2] = local
        halves[1::2] = 0.5 * (local + np.append(local[1:], local[-1]))
        # One over the energy under each lag, 0 where the stored waveform is silent.
        self.inverse = np.where(halves > self.floor, 1.0 / np.maximum(halves, self.floor), 0.0)
        self.inverse = self.inverse.astype(np.float32)


def score(query: npt.NDArray[np.float32], stored: Floats, near: float | None = None) -> Score:
    """How well ``query`` lines up with the prepared ``stored`` waveform after a rate change
    (``near``: the scale ``rank`` found; only ``SCALES`` within ``AROUND`` of it are searched)."""
    if len(query) < 2 * WINDOW or len(stored) < WINDOW:
        return NOTHING
    wave = np.asarray(query, dtype=np.float64)
    fine = resample_poly(wave, UP, 1)
    # The scales are ranked on the query band-passed before it is rescaled, once for each of
    # ``CENTRES``: the filter on every rescaled copy was a quarter of a score's time.
    banded = {
        c: resample_poly(_band(_unphase(wave, c, 1.0), sos, _ZIS[c]), UP, 1)
        for c, sos in _CENTRED.items()
    }
    target = _Stored(stored)
    coarse = [float(r) for r in SCALES if near is None or abs(math.log(r / near)) <= AROUND]
    best = sorted(zip(_quick(banded, coarse, target), coarse, strict=True), reverse=True)
    best = best[:REFINE]
    fine_scales = sorted({r * (1 + f) for _, r in best for f in FINE})
    refined = zip(_quick(banded, fine_scales, target), fine_scales, strict=True)
    # The loudest windows alone can prefer a wrong scale by a hair: the path decides among three.
    tops = sorted([*best, *refined], reverse=True)[:PATHS]
    paths = [_path(_rescaled(fine, r), target) for _, r in tops]
    return Score(max(p[0] for p in paths), max(p[1] for p in paths))


def _rescaled(fine: Floats, r: float, band: bool = True) -> Floats:
    """The query (given ``UP`` times oversampled) with its frequencies times ``r``.

    Linear interpolation of the oversampled waveform (at 16 kHz the band below 1.8 kHz comes
    through within a few per cent, far cheaper than a polyphase filter per scale), then the
    stored band's phase put right (``_unphase``) and the common band, so energy the stored
    waveform cannot have is not counted (``band=False``: the caller band-passed the query
    already, and put its phase right for a scale near ``r``).
    """
    n = int((len(fine) / UP - 1) / r)
    at = np.arange(n) * (r * UP)
    x = np.interp(at, np.arange(len(fine)), fine)
    return _band(_unphase(x, 1.0, 1 / r)) if band else np.asarray(x, dtype=np.float64)


def _unphase(x: Floats, a: float, b: float) -> Floats:
    """``x`` with the phase of ``STORED_BAND`` at ``b`` times each frequency replaced by its
    phase at ``a`` times it.

    The upload went through that causal band-pass at its own frequencies, the stored waveform
    at the original ones. After a speed change s, read back at the original frequencies
    (``a = 1``, ``b = s``), the two differ by the filter's phase at f and at s f: at s = 0.85,
    near its edges, by a large part of a cycle, which kept a replay's windows under 0.95 even
    at its exact scale (docs/voice-measurements.md, "Replay fingerprint"). Before the
    rescaling, for a scale near ``c``, ``a = c`` and ``b = 1``.
    """
    if a == b or len(x) == 0:
        return x
    size = 1 << (len(x) + 4 * WINDOW - 1).bit_length()  # room for the filter's ringing
    freqs = np.asarray(np.fft.rfftfreq(size, 1 / RATE), dtype=np.float64)
    turn = np.exp(1j * (_phase(freqs * a) - _phase(freqs * b)))
    return np.asarray(fft.irfft(fft.rfft(x, size) * turn, size)[: len(x)], dtype=np.float64)


# The phase of ``STORED_BAND``, unwrapped, every 0.5 Hz up to the Nyquist frequency: read by
# interpolation, as working it out for every call was a sixth of the rate stage's time.
_GRID = np.linspace(0.0, RATE / 2, RATE + 1)
_PHASE = np.unwrap(np.angle(sosfreqz(STORED_BAND, worN=_GRID, fs=RATE)[1]))


def _phase(freqs: Floats) -> Floats:
    """The phase of ``STORED_BAND`` at ``freqs`` (Hz; past the Nyquist frequency, its value
    there)."""
    return np.asarray(np.interp(freqs, _GRID, _PHASE), dtype=np.float64)


def _windows(x: Floats) -> tuple[Floats, Floats]:
    n = (len(x) - WINDOW) // HOP + 1
    frames = np.lib.stride_tricks.sliding_window_view(x, WINDOW)[::HOP][:n]
    return frames, np.sqrt((frames**2).sum(axis=1)) + 1e-12


def _correlations(
    frames: Floats, target: _Stored, spectra: npt.NDArray[np.complex64] | None = None
) -> Singles:
    """Normalised correlation of each window with the stored waveform at every lag and every
    half lag (index ``2 * k`` is lag ``k``, ``2 * k + 1`` lag ``k + 1/2``).

    The half lags come from the same spectrum read back at twice the length, exact for a band
    below 2 kHz. A parabola through whole lags alone underestimates a peak that lies between
    them (module docstring, step 3), and which fraction of a sample a replay lands on is
    chance. ``spectra``: the windows' spectra at ``target.size``, when the caller has them.
    """
    if spectra is None:
        spectra = _spectra(frames, target.size)
    norm = np.sqrt(np.maximum((frames**2).sum(axis=1), 1e-24))
    corr = fft.irfft(np.conj(spectra) * target.spectrum, 2 * target.size, axis=1)
    out = corr[:, : 2 * target.lags] * target.inverse[None, :]
    out *= (2.0 / norm[:, None]).astype(np.float32)
    return np.asarray(out, np.float32)


def _spectra(frames: Floats, size: int) -> npt.NDArray[np.complex64]:
    """The windows' spectra in single precision: the correlations need three digits, and
    single-precision transforms take about half the time (scipy's, on this machine)."""
    return np.asarray(fft.rfft(frames.astype(np.float32), size, axis=1), np.complex64)


def _whole(out: Singles) -> Floats:
    """Every whole lag's correlation raised to the peak between samples, where one lies there:
    the height of the parabola through its whole-lag neighbours."""
    left, right = np.roll(out, 1, axis=1), np.roll(out, -1, axis=1)
    return np.asarray(np.clip(_parabola(left, out, right), 0.0, 1.0), dtype=np.float64)


def _refined(out: Singles) -> Floats:
    """For every whole lag, the highest correlation within half a sample of it: each point of
    the half-lag grid raised to the peak of the parabola through its neighbours, where one
    lies there, and the best of the three points nearest the lag kept."""
    left, right = np.roll(out, 1, axis=1), np.roll(out, -1, axis=1)
    raised = np.clip(_parabola(left, out, right), 0.0, 1.0)
    before = np.concatenate([raised[:, :1], raised[:, 1:-1:2]], axis=1)
    return np.asarray(np.maximum(np.maximum(raised[:, 0::2], raised[:, 1::2]), before), np.float64)


def _parabola(left: Singles, mid: Singles, right: Singles) -> Singles:
    curve = left - 2 * mid + right
    safe = np.where(curve < 0, curve, -1.0)
    shift = np.where(curve < 0, 0.5 * (left - right) / safe, 0.0)
    return np.where(np.abs(shift) <= 0.5, mid - 0.25 * (left - right) * shift, mid)


def _peaks(out: Singles) -> Floats:
    """Each row's highest correlation, refined between samples (``_refined`` at the peak)."""
    k = np.argmax(out, axis=1)
    rows = np.arange(len(out))
    last = out.shape[1] - 1
    left, right = out[rows, np.maximum(k - 1, 0)], out[rows, np.minimum(k + 1, last)]
    return np.asarray(np.clip(_parabola(left, out[rows, k], right), 0.0, 1.0), dtype=np.float64)


def _centre(r: float) -> float:
    """The one of ``CENTRES`` nearest to the scale ``r`` (in ratio)."""
    return min(CENTRES, key=lambda c: abs(math.log(r / c)))


def _quick(banded: dict[float, Floats], scales: list[float], target: _Stored) -> list[float]:
    """For each scale: the energy-weighted best correlation of the ``QUICK`` loudest windows
    of the oversampled query, band-passed for the nearest of ``CENTRES``, lags unconstrained.
    All scales go through one batched FFT."""
    picked: list[Floats] = []
    weights: list[Floats] = []
    for r in scales:
        x = _rescaled(banded[_centre(r)], r, band=False)
        if len(x) < WINDOW:
            picked.append(np.zeros((1, WINDOW)))
            weights.append(np.ones(1))
            continue
        frames, energy = _windows(x)
        loud = np.argsort(energy)[-QUICK:]
        picked.append(frames[loud])
        weights.append(energy[loud] / energy[loud].sum())
    best = _peaks(_correlations(np.concatenate(picked), target))
    out: list[float] = []
    start = 0
    for w in weights:
        out.append(float((best[start : start + len(w)] * w).sum()))
        start += len(w)
    return out


def _path(x: Floats, target: _Stored) -> tuple[float, float]:
    """The mean correlation and the near-exact share on their best paths (module docstring)."""
    if len(x) < WINDOW:
        return 0.0, 0.0
    frames, energy = _windows(x)
    halves = _correlations(frames, target)
    weight = energy / energy.sum()
    # The mean reads whole lags, as its threshold was fitted: half lags raise new takes of the
    # same word too (yweweler's "six", takes 49 and 26: 0.949 to 0.952), and the mean is what
    # a new take comes close on. The share reads half lags: a copy's windows reach 1.0 there.
    whole = _whole(halves[:, 0::2])
    close = np.clip((_refined(halves) - NEAR) / (1.0 - NEAR), 0.0, 1.0)
    return _best_path(whole, weight), _best_path(close, weight)


def _best_path(corr: Floats, weight: Floats) -> float:
    """The highest weighted sum of ``corr`` along a path of lags (windows x lags)."""
    cost = PENALTY / len(weight)
    best = weight[0] * corr[0]
    # A path that runs past the end of the stored recording (the upload was trimmed longer)
    # ends there with what it has gathered.
    ended = 0.0
    for i in range(1, len(weight)):
        ended = max(ended, float(best[-HOP:].max()))
        prev = np.zeros_like(best)
        prev[HOP:] = best[:-HOP]
        tight = maximum_filter1d(prev, 2 * TIGHT + 1, mode="constant", cval=0.0)
        seam = maximum_filter1d(prev, 2 * JUMP + 1, mode="constant", cval=0.0) - cost
        best = weight[i] * corr[i] + np.maximum(tight, seam)
    return float(min(max(best.max(), ended), 1.0))
