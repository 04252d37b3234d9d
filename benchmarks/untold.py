"""Do near misses keep their share when the recogniser is not told the question?

    .venv/bin/python benchmarks/untold.py --out bench-out/untold.jsonl     # hear (resumable)
    .venv/bin/python benchmarks/untold.py --out bench-out/untold.jsonl --report

Told the card question (``calibration.PROMPTS``; the table in docs/voice-measurements.md, "Weak
spots", was measured when it was "One, two, three, four, five."), tiny.en hears some synthetic
"tooth"s and "tool"s of the English corpus as a clean "Two." (its four false releases). This
scores, for each clip and each card whose number has near misses in the lexicon ("tooth",
"tool", "true" for two; "tree" for three; "fife" for five), the card's own readings and its near
misses twice, told and untold, and prints the near misses' share of the two together. A veto on
that share would stop a sound-alike only where real answers of the same number give it less: the
report lists, for a few shares, how many real FSDD takes of "two", "three" and "five" (all four
speakers, all 50 takes) reach it, beside the corpus's English sound-alike cases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

import ctranslate2
import numpy as np

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind, Reason
from voicegate.voice import audio, calibration, consent, lexicon, windows
from voicegate.voice.prompts import Prompt, spelled
from voicegate.voice.transcribe import HOP, WINDOW_FRAMES, lead_in
from voicegate.voice.whisper import SCORE_TAIL_FRAMES, FasterWhisperTranscriber

ROOT = Path(__file__).resolve().parents[1]
FSDD = Path(os.environ.get("VOICEGATE_CORPUS", ROOT.parent / "shared" / "corpus")) / "fsdd"
MANIFEST = ROOT / "fixtures" / "audio" / "corpus" / "manifest.jsonl"
CARDS = 5
SHARES = (0.04, 0.05, 0.085, 0.2, 0.5)
# The corpus sound-alikes the shipped decision releases (docs/eval.md), and a near miss that
# sets the card threshold (docs/voice.md, "Calibration").
RELEASED = ("0283", "0285", "0514", "0656", "0806")


def groups() -> dict[int, tuple[list[str], list[str]]]:
    """Card -> (its own readings, its near misses), for the cards whose number has any."""
    near_of = lexicon.load("en").sound_alikes
    own: dict[int, list[str]] = defaultdict(list)
    near: dict[int, list[str]] = defaultdict(list)
    for r in consent.readings(CARDS, Stage.CHOOSE, ("en",)):
        if r.decision.kind is Kind.CHOOSE and r.decision.card is not None:
            own[r.decision.card].append(r.text)
        elif r.decision == Decision(Kind.REFUSE, reason=Reason.SOUND_ALIKE):
            near[near_of[r.text]].append(r.text)
    return {card: (own[card], near[card]) for card in sorted(near)}


def clips() -> list[tuple[str, Path, tuple[int, ...]]]:
    """(id, path, cards to score): the English sound-alike cases, then FSDD 2, 3 and 5."""
    out = []
    for line in MANIFEST.open():
        case = json.loads(line)
        if case["class"] == "sound_alike" and case["lang"] == "en":
            cards = tuple(c for c in (2, 3, 5) if c <= case["cards"])
            out.append((case["id"][:4], MANIFEST.parent / case["audio"], cards))
    for path in sorted(FSDD.glob("[235]_*.wav")):
        out.append((path.stem, path, (int(path.stem[0]),)))
    return out


def hear(out: Path) -> None:
    """Score every clip not yet in ``out``."""
    t = FasterWhisperTranscriber("tiny.en", threads=2)
    told = calibration.prompt("tiny.en", "card", "en")
    prompts = {
        "untold": Prompt(t._tokens, False, "en"),
        "told": Prompt(t._tokens, False, "en", told),
    }
    done = {json.loads(line)["id"] for line in out.open()} if out.exists() else set()
    readings = groups()
    with out.open("a") as sink:
        for clip_id, path, cards in clips():
            if clip_id in done:
                continue
            samples = audio.decode(path.read_bytes()).samples
            mel = t._mel(samples)
            feats = np.ascontiguousarray(windows.fit(mel, WINDOW_FRAMES)[None])
            full = np.asarray(
                t._model.encode(ctranslate2.StorageView.from_array(feats), to_cpu=True)
            )
            frames = (lead_in(samples) + len(samples)) // HOP // 2 + SCORE_TAIL_FRAMES
            keep = min(full.shape[1], frames)  # as the recogniser keeps them
            row: dict[str, object] = {"id": clip_id}
            for card in cards:
                own, near = readings[card]
                for name, tok in prompts.items():
                    seqs = [tok.encode(" " + spelled(x, "Two.")) for x in own + near]
                    s = t._forced(full, [0] * len(seqs), keep, tok, seqs)
                    o, n = np.logaddexp.reduce(s[: len(own)]), np.logaddexp.reduce(s[len(own) :])
                    row[f"{name}{card}"] = round(float(np.exp(n - np.logaddexp(o, n))), 4)
            sink.write(json.dumps(row) + "\n")
            sink.flush()


def report(out: Path) -> None:
    """How many clips reach each near-miss share, untold, per FSDD speaker and digit."""
    rows = [json.loads(line) for line in out.open()]
    by: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if "_" in r["id"]:
            digit, speaker, _ = r["id"].split("_")
            by[f"FSDD {digit} {speaker}"].append(r[f"untold{digit}"])
    heads = " | ".join(f"≥ {s}" for s in SHARES)
    print(f"| clips | n | highest | {heads} |\n| --- |" + " ---: |" * (len(SHARES) + 2))
    for key in sorted(by):
        v = by[key]
        counts = " | ".join(str(sum(x >= s for x in v)) for s in SHARES)
        print(f"| {key} | {len(v)} | {max(v):.3f} | {counts} |")
    corpus = {r["id"]: r for r in rows if "_" not in r["id"]}
    shares = [r["untold2"] for r in corpus.values() if "untold2" in r]
    counts = " | ".join(str(sum(x >= s for x in shares)) for s in SHARES)
    print(f"| corpus sound-alikes, card 2 | {len(shares)} | {max(shares):.3f} | {counts} |")
    for clip_id in RELEASED:
        r = corpus[clip_id]
        print(f"corpus {clip_id}: two's near misses {r['told2']} told, {r['untold2']} untold")


def main() -> int:
    """Command line: hear (resumable) and report, or report only."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if not args.report:
        hear(args.out)
    report(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
