"""Synthetic atypical speech: seeded sox transforms of FSDD, decided with and without enrolment.

    # 1. write the transformed clips (deterministic from --seed) and their parameters
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/atypical.py make --out bench-out/atypical
    # 2. hear each transformed take once with tiny.en (cached), decide, print the table
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/atypical.py measure \\
        --out bench-out/atypical

The transforms imitate some features of dysarthric speech (slow rate, a shifted voice, breath
noise, slurred articulation). They are no substitute for recordings of people with dysarthria:
they keep the speaker's own timing within each word, their clear consonant order and their
consistency from take to take, which real atypical speech often lacks.

``measure`` decides, per transform, takes 3-6 of every digit of the chosen speakers on five
open cards (the choose stage): "one".."five" must choose their card, "zero" and "six".."nine"
must release nothing. Without enrolment it is the server's recogniser decision
(``decision.weigh`` on the cached hearing); with enrolment each speaker's templates are takes
0-2 of "one".."five" under the SAME transform (a user who speaks that way enrols that way), as
the recogniser's encoder frames (cached per transform), fused as the server fuses them
(``decision.fuse``, ``benchmarks/enrol.py``'s rows and tables), and again for a user who says
their speech is hard for recognisers.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shutil
import subprocess
import sys
import time
import wave
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import calibrate  # the hearing cache format and the server's hypothesis code
import enrol  # template rows
import fusion  # the fused tables
import numpy as np
import numpy.typing as npt

from voicegate.domain import Stage
from voicegate.errors import AudioRefused
from voicegate.voice import audio, calibration, consent
from voicegate.voice.hypotheses import LEXICONS, SPOKEN
from voicegate.voice.transcribe import Hearing, Utterance

CORPUS = calibrate.CORPUS / "fsdd"
RATE = 8000  # FSDD's rate, kept so a transformed clip is decoded like the original
PEAK_DB = -3.0  # every transformed clip is peak-normalised here (the effects change the level)
Params = dict[str, float]
Samples = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Transform:
    """One named transform: how its parameters are drawn and the sox effects they give."""

    name: str
    what: str
    draw: Callable[[np.random.Generator], Params]
    # The sox effects for drawn parameters; None when the transform is done in numpy.
    effects: Callable[[Params], list[str]] | None = None
    # The numpy transform of the samples, for what sox cannot do (noise following the speech).
    numpy: Callable[[Samples, Params, np.random.Generator], Samples] | None = None


def _breathy(x: Samples, p: Params, rng: np.random.Generator) -> Samples:
    """Aspiration noise that rises and falls with the speech, at ``hnr`` dB below it.

    White noise, tilted towards the highs by a first difference (breath is a hiss, not a hum),
    multiplied by the speech's amplitude envelope (|x| smoothed over ``smooth_ms``), so the noise
    is there while the voice is and gone in the pauses, as breath through a loose glottis is.
    """
    width = max(1, int(RATE * p["smooth_ms"] / 1000))
    envelope = np.convolve(np.abs(x), np.ones(width) / width, mode="same")
    noise = np.diff(rng.standard_normal(len(x) + 1)) * envelope
    level = math.sqrt(float(np.mean(x**2)) / max(float(np.mean(noise**2)), 1e-20))
    out: Samples = x + noise * level * 10 ** (-p["hnr"] / 20)
    return out


TRANSFORMS: dict[str, Transform] = {
    t.name: t
    for t in (
        Transform("none", "the original take, only peak-normalised", lambda rng: {}, lambda p: []),
        Transform(
            "slow",
            "rate slowed to 0.6-0.8 (sox tempo -s, pitch kept)",
            lambda rng: {"tempo": round(float(rng.uniform(0.6, 0.8)), 3)},
            lambda p: ["tempo", "-s", str(p["tempo"])],
        ),
        Transform(
            "pitch",
            "pitch and formants moved together by ±150-350 cents (sox pitch resamples and "
            "corrects the tempo, so the spectral envelope moves with f0)",
            lambda rng: {"cents": round(float(rng.choice([-1, 1]) * rng.uniform(150, 350)), 1)},
            lambda p: ["pitch", str(p["cents"])],
        ),
        Transform(
            "breathy",
            "aspiration noise shaped by the speech envelope, 3-9 dB below the voice (numpy)",
            lambda rng: {"hnr": round(float(rng.uniform(3, 9)), 2), "smooth_ms": 20.0},
            numpy=_breathy,
        ),
        Transform(
            "slurred",
            "low-pass 1.5-2 kHz (two 2-pole passes) and a short reverb that smears onsets "
            "(sox lowpass, reverb reverberance 30-60 %, room 20 %)",
            lambda rng: {
                "lowpass_hz": round(float(rng.uniform(1500, 2000))),
                "reverberance": round(float(rng.uniform(30, 60))),
            },
            lambda p: [
                "lowpass",
                str(p["lowpass_hz"]),
                "lowpass",
                str(p["lowpass_hz"]),
                "reverb",
                str(p["reverberance"]),
                "50",
                "20",
            ],
        ),
    )
}


def chosen(speakers: tuple[str, ...], takes: range) -> list[Path]:
    """The FSDD clips of ``speakers`` whose take number is in ``takes``, every digit."""
    out = []
    for path in sorted(CORPUS.glob("*.wav")):
        _, speaker, take = path.stem.split("_")
        if speaker in speakers and int(take) in takes:
            out.append(path)
    return out


def generator(seed: int, transform: str, clip: str) -> np.random.Generator:
    """The clip's own generator: the same seed, transform and clip always draw the same."""
    return np.random.default_rng([seed, zlib.crc32(transform.encode()), zlib.crc32(clip.encode())])


def read(path: Path) -> Samples:
    """A 16-bit mono WAV's samples as floats in [-1, 1]."""
    with wave.open(str(path)) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise ValueError(f"{path}: not 16-bit mono")
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, dtype="<i2").astype(np.float64) / 32768.0


def write(path: Path, x: Samples) -> None:
    """Peak-normalise to ``PEAK_DB`` and write a 16-bit mono WAV at ``RATE``."""
    peak = float(np.max(np.abs(x))) or 1.0
    y = np.round(x / peak * 10 ** (PEAK_DB / 20) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(y.tobytes())


def apply(t: Transform, source: Path, target: Path, p: Params, rng: np.random.Generator) -> None:
    """Write ``source`` through transform ``t`` with parameters ``p`` to ``target``."""
    if t.numpy is not None:
        write(target, t.numpy(read(source), p, rng))
        return
    assert t.effects is not None
    # -D: no dither, so the output is the same bytes on every run; -V1: errors only.
    command = ["sox", "-D", "-V1", str(source), "-b", "16", "-c", "1", str(target)]
    subprocess.run([*command, *t.effects(p), "rate", str(RATE), "gain", "-n", str(PEAK_DB)],
                   check=True)  # fmt: skip


def make(args: argparse.Namespace) -> int:
    """Write every chosen clip through every transform, and a manifest of the parameters."""
    if shutil.which("sox") is None:
        print("sox is not installed", file=sys.stderr)
        return 2
    out = Path(args.out)
    clips = chosen(tuple(args.speakers), range(args.max_take + 1))
    manifest = []
    for t in TRANSFORMS.values():
        (out / t.name).mkdir(parents=True, exist_ok=True)
        for path in clips:
            rng = generator(args.seed, t.name, path.stem)
            p = t.draw(rng)
            apply(t, path, out / t.name / path.name, p, rng)
            manifest.append({"transform": t.name, "clip": path.stem, "params": p})
    (out / "manifest.json").write_text(json.dumps({
        "seed": args.seed,
        "transforms": {t.name: t.what for t in TRANSFORMS.values()},
        "clips": manifest,
    }, indent=1))  # fmt: skip
    print(f"{len(manifest)} clips ({len(clips)} x {len(TRANSFORMS)} transforms) in {out}")
    return 0


def hear(args: argparse.Namespace, names: list[str], decided: list[str]) -> float:
    """Hear every decided clip not yet cached, per transform; the seconds per clip heard."""
    out = Path(args.out)
    todo = []
    for name in names:
        cache = out / f"hear-{name}.jsonl"
        done = {json.loads(line)["id"] for line in cache.open()} if cache.exists() else set()
        todo += [(name, clip) for clip in decided if clip not in done]
    print(f"{len(todo)} clips to hear", file=sys.stderr)
    if not todo:
        return math.nan
    from voicegate.voice.whisper import FasterWhisperTranscriber

    transcriber = FasterWhisperTranscriber(args.model, threads=args.threads)
    # What the server scores on five open cards at the choose stage (``VoicePipeline``).
    rs = consent.readings(enrol.CARDS, Stage.CHOOSE, LEXICONS["en"])
    texts = tuple(r.text for r in rs)
    spoken = tuple(SPOKEN.get(r.lang, "en") for r in rs)
    started = time.perf_counter()
    for n, (name, clip) in enumerate(todo, 1):
        try:
            samples = audio.decode((out / name / f"{clip}.wav").read_bytes()).samples
        except AudioRefused as exc:  # refused at intake, as the server would
            h = Hearing("", "", 0.0, 0.0, refusal=exc.reason)
        else:
            utterance = Utterance(samples, ("en",), texts, spoken, question="card")
            h = transcriber.transcribe_many([utterance])[0]
        with (out / f"hear-{name}.jsonl").open("a") as lines:
            lines.write(json.dumps(calibrate.record(clip, h), ensure_ascii=False) + "\n")
        if n % 20 == 0:
            print(f"{n}/{len(todo)}", file=sys.stderr)
    return (time.perf_counter() - started) / len(todo)


def frames(args: argparse.Namespace, name: str, clips: list[str]) -> dict[str, np.ndarray]:
    """The templates' features of ``clips`` under transform ``name``: the recogniser's encoder
    frames (``Transcriber.frames``, what the server keeps and matches), cached per transform."""
    cache = Path(args.out) / f"frames-{name}-{args.model}.npz"
    have = dict(np.load(cache)) if cache.exists() else {}
    todo = [c for c in clips if c not in have]
    if todo:
        from voicegate.voice.whisper import FasterWhisperTranscriber

        transcriber = FasterWhisperTranscriber(args.model, threads=args.threads)
        for clip in todo:
            samples = audio.decode((Path(args.out) / name / f"{clip}.wav").read_bytes()).samples
            have[clip] = transcriber.frames(samples).astype(np.float16)
        np.savez_compressed(cache, **have)
    return {c: have[c].astype(np.float32) for c in clips}


def measure(args: argparse.Namespace) -> int:
    """Per transform: right, wrong cards and negatives released, without and with enrolment."""
    out = Path(args.out)
    names = args.transforms or list(TRANSFORMS)
    speakers = tuple(args.speakers)
    enrolled = range(args.enrol_takes)
    decided_takes = range(args.first_take, args.last_take + 1)
    if set(enrolled) & set(decided_takes):
        print("enrolment takes and decided takes overlap", file=sys.stderr)
        return 2
    decided = [p.stem for p in chosen(speakers, decided_takes)]
    missing = [f"{n}/{c}" for n in names for c in decided if not (out / n / f"{c}.wav").exists()]
    if missing:
        print(f"{len(missing)} clips not made (run make first), e.g. {missing[0]}", file=sys.stderr)
        return 2
    each = hear(args, names, decided)
    weights = calibration.of(args.model).fusion
    report: dict[str, object] = {
        "model": args.model,
        "speakers": list(speakers),
        "decided_takes": [decided_takes.start, decided_takes.stop - 1],
        "enrolment_takes": [0, args.enrol_takes - 1],
        "fusion_weights": weights,
        "machine": platform.processor() or platform.machine(),
        "seconds_per_hearing": each if math.isfinite(each) else None,
    }
    first, last = decided_takes.start, decided_takes.stop - 1
    print(f"\n{args.model}, five open cards; {', '.join(speakers)}; takes {first}-{last} "
          f"decided, 0-{args.enrol_takes - 1} of one..five enrolled")  # fmt: skip
    by = ", ".join(speakers)
    print(f"| transform | right, no enrolment ({by}) | wrong cards | negatives released | "
          f"right, enrolled ({by}) | wrong cards | negatives released | "
          f"right, enrolled and hard ({by}) | wrong cards | negatives released |")  # fmt: skip
    print("| --- |" + " ---: |" * 9)
    unsafe: list[str] = []
    transforms: dict[str, object] = {}
    for name in names:
        used = []
        for path in sorted((out / name).glob("*.wav")):
            digit, speaker, take = path.stem.split("_")
            wanted = int(take) in decided_takes or (1 <= int(digit) <= 5 and int(take) in enrolled)
            if speaker in speakers and wanted:
                used.append((path.stem, speaker, int(digit), int(take)))
        features = frames(args, name, [u[0] for u in used])
        takes = [enrol.Take(i, sp, d, k, features[i]) for i, sp, d, k in used]
        rows = enrol.fused_rows(enrol.nearest_table(takes, args.enrol_takes),
                                out / f"hear-{name}.jsonl")  # fmt: skip
        cells: list[str] = []
        block: dict[str, object] = {}
        for label, fitted, hard in (
            ("no enrolment", None, False),
            ("enrolled", weights, False),
            ("enrolled and hard", weights, True),
        ):
            decided_rows = outcomes(rows, fitted, hard)
            total = Counter(o for _, o, _ in decided_rows)
            positives = total["right"] + total["wrong"] + total["refused"]
            negatives = total["released"] + total["held"]
            flag = "**" if total["released"] else ""
            each_speaker = Counter(t.speaker for t, o, _ in decided_rows if o == "right")
            split = ", ".join(str(each_speaker[s]) for s in speakers)
            cells += [f"{total['right']}/{positives} ({split})", str(total["wrong"]),
                      f"{flag}{total['released']}/{negatives}{flag}"]  # fmt: skip
            block[label] = {
                "total": dict(total),
                "right_by_speaker": dict(each_speaker),
                "rules": dict(Counter(f"{r}:{o}" for _, o, r in decided_rows)),
                "released": [t.id for t, o, _ in decided_rows if o == "released"],
                "wrong": [t.id for t, o, _ in decided_rows if o == "wrong"],
            }
            unsafe += [f"{name} {t.id} ({label}, {r}: {o})"
                       for t, o, r in decided_rows if o in ("released", "wrong")]  # fmt: skip
        print(f"| {name} | " + " | ".join(cells) + " |")
        transforms[name] = block
    report["transforms"] = transforms
    heard = f"{each:.2f} s per new hearing" if math.isfinite(each) else "all hearings cached"
    print(f"\n{len(decided)} takes decided per transform; {heard}")
    print("negatives released or wrong cards: " + (", ".join(unsafe) if unsafe else "none"))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


Row = enrol.Row


def outcomes(
    rows: list[Row], weights: fusion.Weights | None, hard: bool = False
) -> list[tuple[enrol.Take, str, str]]:
    """Each take's outcome and deciding rule: the recogniser alone (``weights`` None) or fused,
    for a user who said their speech is hard for recognisers when ``hard``."""
    out = []
    for row in rows:
        _, rules = fusion.table([row], weights, hard)
        ((rule, outcome),) = rules
        out.append((row[0], outcome, rule))
    return out


def main() -> int:
    """Command line: make or measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in ("make", "measure"):
        p = sub.add_parser(command)
        p.add_argument("--out", required=True, help="the transformed clips' folder")
        p.add_argument("--speakers", nargs="+", default=["jackson", "nicolas"])
    m = sub.choices["make"]
    m.add_argument("--seed", type=int, default=20261214)
    m.add_argument("--max-take", type=int, default=6, help="takes 0..N of every digit")
    d = sub.choices["measure"]
    d.add_argument("--model", default="tiny.en")
    d.add_argument("--threads", type=int, default=1)
    d.add_argument("--transforms", nargs="+", choices=sorted(TRANSFORMS))
    d.add_argument("--enrol-takes", type=int, default=3, help="takes 0..N-1 of one..five")
    d.add_argument("--first-take", type=int, default=3)
    d.add_argument("--last-take", type=int, default=6)
    d.add_argument("--json", default=None)
    args = parser.parse_args()
    np.seterr(all="ignore")
    return make(args) if args.command == "make" else measure(args)


if __name__ == "__main__":
    sys.exit(main())
