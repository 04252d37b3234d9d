"""The card prompt: the English corpus's choices among cards heard under each candidate prompt.

    .venv/bin/python benchmarks/prompts.py hear --out bench-out/prompts   # resumable, ~5 min each
    .venv/bin/python benchmarks/prompts.py report --out bench-out/prompts

tiny.en is told the question before an answer to a choice among cards (``calibration.PROMPTS``,
Whisper's previous text). This hears the corpus's English and no-language cases that choose
among cards (``card_grid.cases``) once per candidate prompt, one cache a prompt, and decides
them with the server's own code at the shipped prior and each card threshold: genuine answers
right, releases of cases that must release nothing (replays apart: the replay guard refuses
them first), and the refusal cases the recogniser is nearest to releasing (the likeliest answer
is a release, at 0.5 or more; sound-alikes and replays left out), which is where a prompt that
teaches the decoder to expect an answer shows first. "heard" counts the cases the recogniser
heard (the rest were refused before it, at intake). Real speech (FSDD) is heard with
``calibrate.py hear`` under the chosen prompt; docs/voice-measurements.md, "One clip, one
encoder pass", has both.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from calibrate import CARD_GRID
from card_grid import MODEL, hear_into, prepare

from voicegate.reasons import Kind
from voicegate.voice import calibration, decision

# Each candidate: a short name (its cache file) and the text; "not" ships (calibration.PROMPTS).
CANDIDATES = {
    "numbers": "One, two, three, four, five.",
    "ordinals": "One, two, three, four, five. The first one, the second one, the third one.",
    "words": "One, two, three, four, five. First, second, third.",
    "ordinals-first": "The first one, the second one, the third one, four, five.",
    "not": "One, two, three, four, five. The first one, not the second one.",
    "ordinals-not": "One, two, three, four, five. The first one, the second one. Not three.",
    "three-ordinals-not": (
        "One, two, three, four, five. The first one, the second one, the third one. Not three."
    ),
    "second-not": "One, two, three, four, five. The second one, not the third one.",
}


def _told(text: str) -> None:
    """Make tiny.en's card question ``text`` for this process."""
    calibration.PROMPTS = {MODEL: {"card": {"en": text}}}


def hear(args: argparse.Namespace) -> int:
    """Hear every case under each candidate (or ``--only`` one) not yet in its cache."""
    from voicegate.voice.whisper import FasterWhisperTranscriber

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    transcriber = FasterWhisperTranscriber(MODEL, threads=args.threads)
    for name, text in CANDIDATES.items():
        if not args.only or name in args.only:
            _told(text)
            hear_into(transcriber, out / f"{name}.jsonl")
    return 0


def report(args: argparse.Namespace) -> int:
    """A row per candidate heard: right and wrongly released at each threshold, and margins."""
    base = calibration.of(MODEL)
    print(f"prior {base.other}; genuine right (released wrongly) at card threshold; cases heard")
    print("| prompt | " + " | ".join(str(t) for t in CARD_GRID) + " | nearest refusals | heard |")
    print("| --- | " + " | ".join("---:" for _ in CARD_GRID) + " | --- | ---: |")
    for name in CANDIDATES:
        path = Path(args.out) / f"{name}.jsonl"
        if not path.exists():
            continue
        verdicts = [
            (c, h.text, hyps, said) for c, h, said, hyps in prepare(path) if h.refusal is None
        ]
        cells = []
        for need in CARD_GRID:
            cal = replace(base, card=need)
            right = wrong = 0
            for case, _, hyps, said in verdicts:
                got = decision.weigh(hyps, said, case.stage, cal, case.cards).decision
                if case.expect.kind is not Kind.REFUSE:
                    right += got == case.expect
                    wrong += got.releases and got != case.expect
                elif case.label != "replay":
                    wrong += got.releases
            cells.append(f"{right} ({wrong})")
        near = []
        for case, text, hyps, said in verdicts:
            v = decision.weigh(hyps, said, case.stage, base, case.cards)
            shown = case.label not in ("replay", "sound_alike")
            refusal = case.expect.kind is Kind.REFUSE and shown
            releasing = v.winner is not None and v.winner.releases and v.probability >= 0.5
            if refusal and releasing:
                near.append(f"{case.id[:4]} {case.label} {text!r} {v.probability:.3f}")
        nearest = "; ".join(near) or "none"
        print(f"| {name} | " + " | ".join(cells) + f" | {nearest} | {len(verdicts)} |")
    return 0


def main() -> int:
    """Command line: hear the candidates, or report them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    h = sub.add_parser("hear")
    h.add_argument("--out", required=True, help="a folder: one cache per candidate")
    h.add_argument("--threads", type=int, default=2)
    h.add_argument("--only", action="append", choices=sorted(CANDIDATES))
    r = sub.add_parser("report")
    r.add_argument("--out", required=True, help="the folder hear wrote")
    args = parser.parse_args()
    return hear(args) if args.command == "hear" else report(args)


if __name__ == "__main__":
    sys.exit(main())
