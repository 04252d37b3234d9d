"""Measure the replay fingerprint on the spoken-digit corpus; print the log's table.

The table is in docs/voice-measurements.md, "Replay fingerprint".

    .venv/bin/python benchmarks/replay.py [--quick] [--corpus ../shared/corpus/fsdd]

Every replay goes through the real intake (``decode`` on the bytes) and is checked against the
library of its speaker's 500 takes, the original among them, so the coarse shortlist has to find
it among 49 other takes of the same digit. False flags of the exact stage (its plain and its
whitened score) are counted over every pair of distinct takes of the same digit by the same
speaker. ``--quick`` uses every tenth clip.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import io
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import soundfile
from scipy.signal import resample_poly

from voicegate.errors import AudioRefused
from voicegate.voice.audio import SAMPLE_RATE, decode, from_samples
from voicegate.voice.fingerprint import (
    THRESHOLD,
    WHITE_THRESHOLD,
    Library,
    features,
    load,
    similarity,
    whitened_similarity,
)

ROOT = Path(__file__).resolve().parent.parent
Floats = npt.NDArray[np.float64]
Transform = Callable[[Floats, np.random.Generator], bytes]


def wav(x: Floats, rate: int = SAMPLE_RATE, subtype: str = "PCM_16") -> bytes:
    buf = io.BytesIO()
    soundfile.write(buf, x, rate, format="WAV", subtype=subtype)
    return buf.getvalue()


def ffmpeg(data: bytes, *args: str) -> bytes:
    cmd = ["ffmpeg", "-loglevel", "error", "-i", "pipe:0", *args, "pipe:1"]
    return subprocess.run(cmd, input=data, capture_output=True, check=True).stdout


def noisy(x: Floats, snr_db: float, rng: np.random.Generator) -> Floats:
    n = rng.standard_normal(len(x))
    n *= np.sqrt(np.mean(x**2) / np.mean(n**2)) / 10 ** (snr_db / 20)
    return x + n


def pink(x: Floats, snr_db: float, rng: np.random.Generator) -> Floats:
    """Pink noise at ``snr_db`` below the speech (samples above 2 % of the peak), as the
    adversarial corpus adds it (fixtures/audio/corpus/sound.py)."""
    spectrum = np.fft.rfft(rng.standard_normal(len(x)))
    spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
    n = np.fft.irfft(spectrum, len(x))
    speech = x[np.abs(x) > 0.02 * float(np.abs(x).max())]
    level = float(np.sqrt(np.mean(speech**2))) if speech.size else 0.01
    return x + n / float(np.sqrt(np.mean(n**2))) * level / 10 ** (snr_db / 20)


def opus_8k(x: Floats) -> Floats:
    """A round trip through Opus at 8 kbit/s in OGG, as the adversarial corpus makes it."""
    out = ffmpeg(wav(x), "-c:a", "libopus", "-b:a", "8k", "-f", "ogg")
    return decode(out).samples.astype(np.float64)


def aac(x: Floats, bitrate: str, rate: int = SAMPLE_RATE) -> bytes:
    """``x`` (at ``rate``) as a 48 kHz recording, as a browser makes it, through AAC in MP4 and
    decoded back to WAV, as ``ffmpeg -i in.wav -c:a aac -b:a 32k out.m4a`` and
    ``ffmpeg -i out.m4a out.wav`` do (through files: MP4 cannot be written to a pipe)."""
    with tempfile.TemporaryDirectory() as folder:
        source, coded, back = (Path(folder) / name for name in ("in.wav", "out.m4a", "out.wav"))
        source.write_bytes(wav(resample_poly(x, 48000, rate) if rate != 48000 else x, 48000))
        encode = ["-i", str(source), "-c:a", "aac", "-b:a", bitrate, str(coded)]
        for args in (encode, ["-i", str(coded), str(back)]):
            subprocess.run(["ffmpeg", "-loglevel", "error", *args], check=True, capture_output=True)
        return back.read_bytes()


def trim(x: Floats, share: float) -> Floats:
    cut = int(len(x) * share / 2)
    return x[cut : len(x) - cut]


TRANSFORMS: dict[str, Transform] = {
    "resample to 44.1 kHz": lambda x, r: wav(resample_poly(x, 441, 160), 44100),
    "resample to 8 kHz": lambda x, r: wav(resample_poly(x, 1, 2), 8000),
    "gain +6 dB (float WAV)": lambda x, r: wav(x * 2.0, subtype="FLOAT"),
    "gain -6 dB": lambda x, r: wav(x * 0.5),
    "noise 30 dB SNR": lambda x, r: wav(noisy(x, 30, r), subtype="FLOAT"),
    "noise 20 dB SNR": lambda x, r: wav(noisy(x, 20, r), subtype="FLOAT"),
    "noise 10 dB SNR": lambda x, r: wav(noisy(x, 10, r), subtype="FLOAT"),
    "pad 0.5 s silence each side": lambda x, r: wav(np.r_[np.zeros(8000), x, np.zeros(8000)]),
    "trim 10 % (5 % each end)": lambda x, r: wav(trim(x, 0.10)),
    "trim 20 % (10 % each end)": lambda x, r: wav(trim(x, 0.20)),
    "mp3 64 kbit/s round trip": lambda x, r: ffmpeg(
        ffmpeg(wav(x), "-c:a", "libmp3lame", "-b:a", "64k", "-f", "mp3"), "-f", "wav"
    ),
    "opus 24 kbit/s (OGG upload)": lambda x, r: ffmpeg(
        wav(x), "-c:a", "libopus", "-b:a", "24k", "-f", "ogg"
    ),
    "opus 16 kbit/s (WebM upload)": lambda x, r: ffmpeg(
        wav(x), "-c:a", "libopus", "-b:a", "16k", "-f", "webm"
    ),
    "opus 8 kbit/s, then pink noise 20 dB SNR": lambda x, r: wav(
        pink(opus_8k(x), 20, r), subtype="FLOAT"
    ),
    "sign flipped (as sox vol -1)": lambda x, r: wav(-x),
    "AAC 24 kbit/s in MP4, from 48 kHz": lambda x, r: aac(x, "24k"),
    "AAC 32 kbit/s in MP4, from 48 kHz": lambda x, r: aac(x, "32k"),
    "AAC 48 kbit/s in MP4, from 48 kHz": lambda x, r: aac(x, "48k"),
    "resample +5 % (a speed change)": lambda x, r: wav(resample_poly(x, 20, 21)),
    "resample -5 % (a speed change)": lambda x, r: wav(resample_poly(x, 21, 20)),
}


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    nproc = len(os.sched_getaffinity(0))
    return f"nproc {nproc}, {model}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every tenth clip only")
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus" / "fsdd")
    parser.add_argument("--only", default="", help="run only transformations naming this")
    args = parser.parse_args()
    step = 10 if args.quick else 1
    rng = np.random.default_rng(20240601)

    files = sorted(args.corpus.glob("*.wav"))
    clips = {f.stem: decode(f.read_bytes()).samples.astype(np.float64) for f in files}
    prints = {k: load(features_of(v)) for k, v in clips.items()}
    print(f"# {len(clips)} clips decoded; threshold {THRESHOLD}")

    by_speaker: dict[str, Library] = collections.defaultdict(Library)
    groups: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for key, item in prints.items():
        digit, speaker, _ = key.split("_")
        by_speaker[speaker].add(key, item)
        groups[(digit, speaker)].append(key)

    pairs = [
        (prints[a], prints[b])
        for keys in groups.values()
        for i, a in enumerate(keys)
        for b in keys[i + 1 :]
    ]
    neg = np.array([similarity(a, b) for a, b in pairs])
    flat = np.array([whitened_similarity(a, b) for a, b in pairs])
    flagged = int(np.sum(neg >= THRESHOLD))
    either = int(np.sum((neg >= THRESHOLD) | (flat >= WHITE_THRESHOLD)))
    print(f"\nHard negatives: {len(neg)} pairs of distinct takes, same speaker and digit")
    print(f"false flags at {THRESHOLD}: {flagged} ({100 * flagged / len(neg):.3f} %)")
    print(
        f"false flags at {THRESHOLD} or whitened {WHITE_THRESHOLD}: {either} "
        f"({100 * either / len(neg):.3f} %)"
    )
    for name, v in (("similarity", neg), ("whitened", flat)):
        print(
            f"{name} percentiles 50/99/99.9/max: "
            + " / ".join(f"{x:.3f}" for x in np.percentile(v, [50, 99, 99.9, 100]))
        )

    chosen = sorted(clips)[::step]
    print(f"\nReplays of {len(chosen)} clips, each checked against its speaker's 500 takes\n")
    print("| transformation | refused as reused | refused at intake | passed | min score |")
    print("| --- | --- | --- | --- | --- |")
    for name, make in TRANSFORMS.items():
        if args.only not in name:
            continue
        reused = intake = passed = 0
        low = 1.0
        for key in chosen:
            try:
                clip = decode(make(clips[key], rng))
            except AudioRefused:
                intake += 1
                continue
            query = load(features(clip))
            library = by_speaker[key.split("_")[1]]
            low = min(low, similarity(query, prints[key]))
            if library.match(query) is not None:
                reused += 1
            else:
                passed += 1
        n = len(chosen)
        print(
            f"| {name} | {100 * reused / n:.1f} % | {100 * intake / n:.1f} % "
            f"| {passed} of {n} | {low:.3f} |"
        )

    print("\nCheck time against one user's stored clips (median of 50 checks, ms)\n")
    print("| stored clips | features(clip) | library.match |")
    print("| --- | --- | --- |")
    pool = list(clips.values())
    for size in (100, 1000, 10000):
        library = Library()
        for i in range(size):
            x = pool[i % len(pool)]
            shifted = np.roll(noisy(x, 40, rng), int(rng.integers(0, len(x))))
            library.add(str(i), load(features_of(shifted)))
        queries = [pool[int(rng.integers(0, len(pool)))][::-1].copy() for _ in range(50)]
        feat_ms: list[float] = []
        match_ms: list[float] = []
        for q in queries:
            t0 = time.perf_counter()
            item = load(features_of(q))
            t1 = time.perf_counter()
            library.match(item)
            t2 = time.perf_counter()
            feat_ms.append(1000 * (t1 - t0))
            match_ms.append(1000 * (t2 - t1))
        print(
            f"| {size:,} | {statistics.median(feat_ms):.1f} | {statistics.median(match_ms):.1f} |"
        )
    print(f"\n{datetime.date.today()}, {machine()}")
    return 0


def features_of(x: npt.NDArray[np.floating[Any]]) -> bytes:
    """Features of samples that are already 16 kHz."""
    return features(from_samples(x, SAMPLE_RATE))


if __name__ == "__main__":
    raise SystemExit(main())
