"""Why the replay guard misses Opus at 8 kbit/s: what such a replay keeps of its original.

    .venv/bin/python benchmarks/replay_codec.py [--speakers jackson,theo] [--step 2]

Every ``step``-th take of each speaker is sent through Opus at 8 kbit/s in OGG and pink noise at
20 dB (as corpus case 0712 was made), decoded by the real intake, and compared with its
original; every pair of distinct takes of the same digit by the same speaker is compared the
same way (the new takes the guard must let through). For each comparison, on the guard's own
stored form (4 kHz, 300-1800 Hz, edge-trimmed; voicegate/voice/fingerprint.py):

- ``exact``: the guard's exact score (peak normalised cross-correlation);
- ``log_spectrum``, ``cube_root``: correlation of 32 ms spectrograms (10 ms hop, 312-1812 Hz)
  at the best lag, of log and cube-root magnitudes;
- ``fine``: the same for the harmonic fine structure (log spectrum less its 7-bin moving mean),
  weighted by frame energy: a replay keeps the pitch contour frame by frame;
- ``cover_06``, ``cover_08``: the share of loud 32 ms windows (within 25 dB of the loudest)
  whose correlation at the best lag, within 2 samples, reaches 0.6 or 0.8: a replay lines up
  from its first sound to its last, a new take mostly in its steady vowel.

It prints, per feature, the replays' lowest scores and the new takes' highest: a feature
separates the two where the first lies above the second. First, the exact score after each
part of the transformation alone (Opus at 8 and 12 kbit/s, the noise alone).

    .venv/bin/python benchmarks/replay_codec.py --aac 32k [--speakers ...] [--step ...]

prints instead what AAC at that bitrate keeps of a 48 kHz recording (as ``replay.aac`` makes
it): where its low-pass cuts white noise, and, band by band, how far under the speech its
noise lies in each take's round trip (aligned at the peak of the correlation, 32 ms spectra,
summed over all takes).
"""

from __future__ import annotations

import argparse
import io
import itertools
from pathlib import Path

import numpy as np
import numpy.typing as npt
import soundfile
from replay import aac, ffmpeg, opus_8k, pink, wav
from scipy.ndimage import uniform_filter1d
from scipy.signal import stft

from voicegate.voice.audio import SAMPLE_RATE, decode
from voicegate.voice.fingerprint import Print, _exact_many, _fft_size, features, load

ROOT = Path(__file__).resolve().parent.parent
Floats = npt.NDArray[np.float64]
FEATURES = ("exact", "log_spectrum", "cube_root", "fine", "cover_06", "cover_08")


def stored(samples: Floats) -> Print:
    """The guard's stored form of samples, through the real intake."""
    return load(features(decode(wav(samples, subtype="FLOAT"))))


def lag_of(a: Floats, b: Floats) -> int:
    """The lag at the correlation's peak: a[i + lag] lines up with b[i]."""
    size = _fft_size(len(a) + len(b) - 1)
    corr = np.fft.irfft(np.fft.rfft(a, size) * np.conj(np.fft.rfft(b, size)), size)
    k = int(np.argmax(corr))
    return k if k < len(a) else k - size


def weighted_corr(x: Floats, y: Floats, w: Floats | None = None) -> float:
    w = np.ones_like(x) if w is None else w
    x = x - (w * x).sum() / w.sum()
    y = y - (w * y).sum() / w.sum()
    return float((w * x * y).sum() / np.sqrt((w * x * x).sum() * (w * y * y).sum()))


def compare(pa: Print, pb: Print) -> list[float]:
    """Every feature of one pair (the order of ``FEATURES``)."""
    a, b = pa.wave.astype(np.float64), pb.wave.astype(np.float64)
    exact = float(_exact_many(pa.wave, [pb.wave])[0])
    lag = lag_of(a, b)
    i0, i1 = max(0, -lag), min(len(b), len(a) - lag)
    if i1 - i0 < 400:  # under 0.1 s in common: nothing to compare but the exact score
        return [exact, 0.0, 0.0, 0.0, 0.0, 0.0]
    sa, sb = (
        np.abs(stft(x, fs=4000, nperseg=128, noverlap=88, boundary=None, padded=False)[2][10:59])
        for x in (a[i0 + lag : i1 + lag], b[i0:i1])
    )
    la, lb = np.log(sa + 1e-3 * sa.max()), np.log(sb + 1e-3 * sb.max())
    fa, fb = la - uniform_filter1d(la, 7, axis=0), lb - uniform_filter1d(lb, 7, axis=0)
    energy = (sa**2).sum(0) + (sb**2).sum(0)
    weights = np.broadcast_to(energy / energy.max(), fa.shape)
    cover = windows(a, b, lag)
    return [
        exact,
        weighted_corr(la, lb),
        weighted_corr(sa ** (1 / 3), sb ** (1 / 3)),
        weighted_corr(fa, fb, weights),
        *cover,
    ]


def windows(a: Floats, b: Floats, lag: int, size: int = 128, hop: int = 64) -> list[float]:
    """Shares of b's loud windows that line up with a at the lag (within 2 samples)."""
    best, energy = [], []
    for s in range(max(0, -lag), min(len(b), len(a) - lag) - size + 1, hop):
        wb = b[s : s + size]
        top = -1.0
        for d in range(-2, 3):
            i = s + lag + d
            if i >= 0 and i + size <= len(a):
                wa = a[i : i + size]
                top = max(top, float(wa @ wb / (np.linalg.norm(wa) * np.linalg.norm(wb) + 1e-12)))
        best.append(top)
        energy.append(float(wb @ wb))
    if not best:
        return [0.0, 0.0]
    c, e = np.array(best), np.array(energy)
    loud = e >= e.max() * 10 ** (-25 / 10)
    return [float((c[loud] >= 0.6).mean()), float((c[loud] >= 0.8).mean())]


BANDS = (0, 150, 300, 500, 750, 1000, 1250, 1500, 1800, 2200, 3000, 4000, 6000, 8000)  # Hz


def codec_bands(samples: dict[str, npt.NDArray[np.float32]], bitrate: str) -> None:
    """What AAC at ``bitrate`` keeps: its low-pass on white noise, its noise band by band."""
    noise = np.random.default_rng(0).standard_normal(2 * 48000) * 0.1
    out, _ = soundfile.read(io.BytesIO(aac(noise, bitrate, rate=48000)))
    power = np.abs(np.fft.rfft(out)) ** 2
    freqs = np.fft.rfftfreq(len(out), 1 / 48000)
    khz = np.array([power[(freqs >= k * 1000) & (freqs < (k + 1) * 1000)].sum() for k in range(24)])
    level = 10 * np.log10(khz / khz[:4].mean())
    print(f"AAC {bitrate} from 48 kHz: white noise 20 dB down from {np.argmax(level < -20)} kHz")
    speech = np.zeros(len(BANDS) - 1)
    error = np.zeros(len(BANDS) - 1)
    for heard in samples.values():
        x = heard.astype(np.float64)
        y = decode(aac(x, bitrate)).samples.astype(np.float64)
        lag = lag_of(y, x)
        y = np.roll(np.pad(y, (0, max(len(x) - len(y), 0))), -lag)[: len(x)]
        y *= float(y @ x) / float(y @ y)  # the codec's gain is no difference
        f, _, sx = stft(x, SAMPLE_RATE, nperseg=512)
        _, _, sy = stft(y, SAMPLE_RATE, nperseg=512)
        for i, (low, high) in enumerate(itertools.pairwise(BANDS)):
            band = (f >= low) & (f < high)
            speech[i] += float((np.abs(sx[band]) ** 2).sum())
            error[i] += float((np.abs(sy[band] - sx[band]) ** 2).sum())
    print(f"speech over the codec's noise, {len(samples)} takes (band: dB):")
    for (low, high), s, e in zip(itertools.pairwise(BANDS), speech, error, strict=True):
        print(f"  {low}-{high} Hz: {10 * np.log10(s / e):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared/corpus/fsdd")
    parser.add_argument("--speakers", default="jackson,theo")
    parser.add_argument("--step", type=int, default=2, help="every n-th take of each digit")
    parser.add_argument("--aac", help="what AAC at this bitrate keeps (e.g. 32k), nothing else")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    names = [
        f"{digit}_{speaker}_{take}"
        for speaker in args.speakers.split(",")
        for digit in range(10)
        for take in range(0, 50, args.step)
    ]
    samples = {n: decode((args.corpus / f"{n}.wav").read_bytes()).samples for n in names}
    if args.aac:
        codec_bands(samples, args.aac)
        return
    prints = {n: load(features(decode((args.corpus / f"{n}.wav").read_bytes()))) for n in names}

    parts: dict[str, list[float]] = {"opus 8k": [], "opus 12k": [], "pink 20 dB": []}
    replays = []
    for n in names:
        x = samples[n].astype(np.float64)
        coded = opus_8k(x)
        opus12 = ffmpeg(wav(x), "-c:a", "libopus", "-b:a", "12k", "-f", "ogg")
        for part, y in (
            ("opus 8k", coded),
            ("opus 12k", decode(opus12).samples.astype(np.float64)),
            ("pink 20 dB", pink(x, 20, rng)),
        ):
            parts[part].append(float(_exact_many(stored(y).wave, [prints[n].wave])[0]))
        replays.append(compare(stored(pink(coded, 20, rng)), prints[n]))
    new_takes = [
        compare(prints[a], prints[b])
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if a.split("_")[:2] == b.split("_")[:2]
    ]
    print(f"{len(names)} takes of {args.speakers}; exact score of each part alone:")
    for part, scores in parts.items():
        under = sum(s < 0.92 for s in scores)
        print(f"  {part:11s} lowest {min(scores):.3f}, under 0.92: {under}/{len(scores)}")
    rep, new = np.array(replays), np.array(new_takes)
    print(f"Opus 8 kbit/s + pink 20 dB replays ({len(rep)}) against new takes ({len(new)} pairs):")
    for j, name in enumerate(FEATURES):
        print(
            f"  {name:12s} replays lowest {rep[:, j].min():.3f}, 1st percentile "
            f"{np.percentile(rep[:, j], 1):.3f}, median {np.median(rep[:, j]):.3f} | new takes "
            f"highest {new[:, j].max():.3f}, 99.9th percentile {np.percentile(new[:, j], 99.9):.3f}"
        )


if __name__ == "__main__":
    main()
