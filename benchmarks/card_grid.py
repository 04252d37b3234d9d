"""The English corpus's choices among cards, heard once, decided at each prior and card threshold.

    .venv/bin/python benchmarks/card_grid.py hear --cache bench-out/en-cards.jsonl   # resumable
    .venv/bin/python benchmarks/card_grid.py decide --cache bench-out/en-cards.jsonl

The prior of "anything else" (``Calibration.other``) and the card threshold act only where the
user chooses among two or more cards, so this hears just those cases of the corpus's English
and no-language cases with tiny.en, as the English server asks them (the card prompt, every
reading), and decides each with the server's own code (``hypotheses.hypotheses``,
``decision.weigh``) at every setting of the grid: genuine answers right, and releases of the
cases that must release nothing, by class. Replays are counted apart: the replay guard refuses
them before the recogniser (docs/eval.md), and it is not run here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from calibrate import CARD_GRID, hear_one, load, record

from voicegate.domain import Decision
from voicegate.reasons import Kind
from voicegate.voice import calibration, consent, decision
from voicegate.voice.hypotheses import hypotheses, read_transcript
from voicegate.voice.transcribe import Hearing, Transcriber
from voicegate_lab.eval import manifest
from voicegate_lab.eval.manifest import Case

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "audio" / "corpus"
MODEL = "tiny.en"
PRIORS = (-3.0, -4.0, -5.0)


def cases() -> list[Case]:
    """The English and no-language cases that ask which of two or more cards."""
    return [
        c
        for c in manifest.load(CORPUS / "manifest.jsonl")
        if c.lang in ("en", "none")
        and not c.enrol
        and calibration.question(c.stage, c.cards) == "card"
    ]


def hear(args: argparse.Namespace) -> int:
    """Hear every case not yet in the cache."""
    from voicegate.voice.whisper import FasterWhisperTranscriber

    hear_into(FasterWhisperTranscriber(MODEL, threads=args.threads), Path(args.cache))
    return 0


def hear_into(transcriber: Transcriber, cache: Path) -> None:
    """Hear every case not yet in ``cache`` as the English server asks it, appending each."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["id"] for line in cache.open()} if cache.exists() else set()
    with cache.open("a") as out:
        for case in cases():
            if case.id in done:
                continue
            texts = tuple(r.text for r in consent.readings(case.cards, case.stage, ("en",)))
            spoken = ("en",) * len(texts)
            h = hear_one(transcriber, case.path, ("en",), texts, spoken, "card")
            out.write(json.dumps(record(case.id, h)) + "\n")
            out.flush()


def prepare(cache: Path) -> list[tuple[Case, Hearing, Decision, list[decision.Hypothesis]]]:
    """Each cached case with its hearing, what the grammar reads its best transcript as, and
    its scored hypotheses: everything ``decision.weigh`` needs but the calibration."""
    heard = load(cache)
    prepared = []
    for case in cases():
        h = heard.get(case.id)
        if h is None:
            continue
        rs = consent.readings(case.cards, case.stage, ("en",))
        said = read_transcript(h.text, case.cards, case.stage)
        prepared.append((case, h, said, hypotheses(rs, h, case.cards, case.stage)))
    return prepared


def decide(args: argparse.Namespace) -> int:
    """Decide every cached case at each setting; print a row a setting."""
    base = calibration.of(MODEL)
    prepared = prepare(Path(args.cache))
    genuine = sum(c.expect.kind is not Kind.REFUSE for c, *_ in prepared)
    print(f"{len(prepared)} cases; shipped prior {base.other}, card {base.card}")
    print("| prior | card | genuine right | released wrongly (not replays) | replays released |")
    print("| ---: | ---: | ---: | --- | ---: |")
    for prior in PRIORS:
        for need in CARD_GRID:
            cal = replace(base, card=need, other=prior)
            counts: Counter[str] = Counter()
            wrong: list[str] = []
            for case, h, said, hyps in prepared:
                if h.refusal is not None:
                    continue
                got = decision.weigh(hyps, said, case.stage, cal, case.cards).decision
                if case.expect.kind is not Kind.REFUSE:
                    counts["right"] += got == case.expect
                    if got.releases and got != case.expect:
                        wrong.append(case.id[:4])
                elif got.releases:
                    counts["replays"] += case.label == "replay"
                    if case.label != "replay":
                        wrong.append(case.id[:4])
            shown = ", ".join(wrong) or "none"
            print(f"| {prior} | {need} | {counts['right']} of {genuine} | {len(wrong)}: {shown} "
                  f"| {counts['replays']} |")  # fmt: skip
    return 0


def main() -> int:
    """Command line: hear the cases once, or decide them at every setting."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("hear", "decide"):
        p = sub.add_parser(name)
        p.add_argument("--cache", required=True)
        p.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    return hear(args) if args.command == "hear" else decide(args)


if __name__ == "__main__":
    sys.exit(main())
