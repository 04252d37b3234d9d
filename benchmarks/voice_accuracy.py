"""Choose-card accuracy and speed of the recogniser on the spoken-digit corpus.

    .venv/bin/python benchmarks/voice_accuracy.py [--per-speaker 30] [--negatives 10]
        [--model tiny.en] [--threads 2] [--p1-runs 15] [--json bench-out/voice.json]

For each of the four FSDD speakers it takes ``--per-speaker`` takes of "one".."five" (five
cards open) and ``--negatives`` takes of "zero", "six".."nine" (no card may be chosen), then
compares two ways of deciding: the grammar on the free transcript alone ("free decoding") and
the full closed-vocabulary check ("closed vocabulary"). A wrong release is a card other than
the spoken one, or any card for a negative. Then P1: the whole decision for a 1 s clip against
a bare faster-whisper ``WhisperModel.transcribe`` of the same clip with the same model, run
alternately, median after warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile as sf

from voicegate.gate.types import Stage
from voicegate.voice import audio, consent, models, vocab
from voicegate.voice.pipeline import VoicePipeline, scored_readings
from voicegate.voice.transcribe import FasterWhisperTranscriber

ROOT = Path(__file__).resolve().parents[1]
FSDD = Path(os.environ.get("VOICEGATE_CORPUS", ROOT.parent / "shared" / "corpus")) / "fsdd"
SPEAKERS = ("jackson", "nicolas", "theo", "yweweler")
CARDS = 5


def sample(per_speaker: int, negatives: int, seed: int) -> list[tuple[int, str, int]]:
    """(digit, speaker, take) triples: positives spread evenly over one..five, then negatives."""
    rng = random.Random(seed)
    out = []
    for speaker in SPEAKERS:
        per_digit = max(1, per_speaker // 5)
        for d in range(1, 6):
            out += [(d, speaker, t) for t in rng.sample(range(50), per_digit)]
        others = [(d, t) for d in (0, 6, 7, 8, 9) for t in range(50)]
        out += [(d, speaker, t) for d, t in rng.sample(others, negatives)]
    return out


def accuracy(t: FasterWhisperTranscriber, items: list[tuple[int, str, int]]) -> dict[str, object]:
    """Free decoding versus the closed-vocabulary check, per speaker, with step timings."""
    readings = consent.readings(CARDS, Stage.CHOOSE, ("en",))
    texts = tuple(r.text for r in readings)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    steps: dict[str, list[float]] = defaultdict(list)
    wrong: list[str] = []
    rules: Counter[str] = Counter()  # the vocab.check rule behind each closed release
    for digit, speaker, take in items:
        name = f"{digit}_{speaker}_{take}"
        t0 = time.perf_counter()
        clip = audio.decode((FSDD / f"{name}.wav").read_bytes())
        steps["decode"].append((time.perf_counter() - t0) * 1000)
        hearing = t.transcribe(clip.samples, candidates=texts)
        for k, v in hearing.timings_ms.items():
            steps[k].append(v)
        t1 = time.perf_counter()
        free = consent.decide(hearing.text, CARDS, Stage.CHOOSE)
        if hearing.refusal is not None:
            closed = consent.refuse(hearing.refusal)
        else:
            scored = scored_readings(readings, hearing.scores)
            verdict = vocab.check(free, scored, hearing.text, confidence=hearing.avg_logprob)
            closed = verdict.decision
            if closed.releases:
                rules[verdict.rule] += 1
        steps["grammar"].append((time.perf_counter() - t1) * 1000)
        c = counts[speaker]
        if 1 <= digit <= 5:
            c["positives"] += 1
            for way, d in (("free", free), ("closed", closed)):
                c[f"{way}_right"] += d.releases and d.card == digit
                if d.releases and d.card != digit:
                    c[f"{way}_wrong"] += 1
                    wrong.append(f"{way}: {name} heard {hearing.text!r} -> {d}")
        else:
            c["negatives"] += 1
            for way, d in (("free", free), ("closed", closed)):
                if d.releases:
                    c[f"{way}_negative_released"] += 1
                    wrong.append(f"{way}: {name} heard {hearing.text!r} -> {d}")
    total: Counter[str] = Counter()
    for c in counts.values():
        total.update(c)
    return {
        "per_speaker": {s: dict(c) for s, c in counts.items()},
        "total": dict(total),
        "closed_releases_by_rule": dict(rules),
        "median_ms": {k: round(statistics.median(v), 1) for k, v in steps.items()},
        "wrong": wrong,
    }


def one_second_clip() -> bytes:
    """A real take of "two", padded with low noise to exactly 1 s, as 16 kHz WAV bytes."""
    clip = audio.decode((FSDD / "2_theo_10.wav").read_bytes())
    x = np.zeros(16_000, dtype=np.float32)
    n = min(len(clip.samples), 16_000)
    start = (16_000 - n) // 2
    x[start : start + n] = clip.samples[:n]
    x += 0.0005 * np.random.default_rng(0).standard_normal(16_000).astype(np.float32)
    out = io.BytesIO()
    sf.write(out, x, 16_000, format="WAV", subtype="PCM_16")
    return out.getvalue()


def p1(t: FasterWhisperTranscriber, name: str, threads: int, runs: int) -> dict[str, float]:
    """Median ms: whole decision vs bare WhisperModel.transcribe (beam 5 default and beam 1)."""
    from faster_whisper import WhisperModel

    data = one_second_clip()
    samples = audio.decode(data).samples
    bare = WhisperModel(
        str(models.ensure(name)), device=t.device, compute_type=t.compute_type, cpu_threads=threads
    )
    pipeline = VoicePipeline(t, None)

    def whole() -> None:
        asyncio.run(pipeline.decide(data, user="bench", cards=CARDS, stage=Stage.CHOOSE))

    def plain(beam: int) -> None:
        segments, _ = bare.transcribe(samples, language="en", beam_size=beam)
        list(segments)

    runners: dict[str, Callable[[], None]] = {
        "voicegate_decision": whole,
        "faster_whisper_transcribe_beam5": lambda: plain(5),
        "faster_whisper_transcribe_beam1": lambda: plain(1),
    }
    times: dict[str, list[float]] = defaultdict(list)
    for i in range(runs + 3):
        for key, fn in runners.items():
            t0 = time.perf_counter()
            fn()
            if i >= 3:  # warm-up
                times[key].append((time.perf_counter() - t0) * 1000)
    return {k: round(statistics.median(v), 1) for k, v in times.items()}


def main() -> int:
    """Run the measurement and print it (and write JSON when asked)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-speaker", type=int, default=30)
    parser.add_argument("--negatives", type=int, default=10)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--p1-runs", type=int, default=15)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    t = FasterWhisperTranscriber(args.model, device="cpu", threads=args.threads)
    report: dict[str, object] = {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs visible, {args.threads} threads, "
        f"{platform.processor() or platform.platform()}",
        "model": f"{args.model} {t.device} {t.compute_type}",
        "accuracy": accuracy(t, sample(args.per_speaker, args.negatives, args.seed)),
        "p1_median_ms": p1(t, args.model, args.threads, args.p1_runs),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
