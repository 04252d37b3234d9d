"""Today's rule, the answer model alone, and the two fused: side by side on the same real clips.

    # the recogniser's hearings of the corpus (benchmarks/calibrate.py) and of the held-out near
    # misses that training/answer_model.py wrote, at both questions
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/calibrate.py hear --model tiny.en \\
        --fsdd-takes 10 --cache bench-out/hear-tiny.jsonl
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/answer_fusion.py hear \\
        --cache bench-out/hear-nearmiss.jsonl
    # the thresholds of the shipped rule, then the table (the answer model's out-of-fold
    # probabilities: training/answer_model.py fit)
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/answer_fusion.py fit \\
        --cache bench-out/hear-tiny.jsonl
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/answer_fusion.py table \\
        --cache bench-out/hear-tiny.jsonl --near bench-out/hear-nearmiss.jsonl
    # "both" at each threshold, corpus and near-miss words in two halves (not a fit)
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/answer_fusion.py sweep \\
        --cache bench-out/hear-tiny.jsonl --near bench-out/hear-nearmiss.jsonl

Every step reads the training run in ``bench-out/answer-model`` (``training/answer_model.py
--out``) unless its ``--dir`` names another, so runs of other recipes compare on the same
hearings. ``fit`` writes tiny.en's record in the package: the weights there must be that run's
(``training/answer_model.py fit`` puts them there; restore the shipped ones with git after).

Each corpus clip is decided with the answer model that never heard its speaker (its fold's), at
the threshold fitted on the other half of the folds; a held-out near miss with the shipped model
and its shipped thresholds (no model heard those words). The rules:

- **decoder**: today's (``decision.weigh``), the answer model not asked;
- **model**: the answer model alone (its likeliest answer, at its threshold);
- **both**: shipped (``decision.agree``): a release of today's rule stands only where the answer
  model's likeliest answer is the same, at its threshold;
- **lift**: as both, and where today's rule was only unsure (its winner under its threshold,
  unsupported, no answer) the answer model's release stands unless the transcript says
  another answer or the likeliest hypothesis is a refusal of meaning (measured, not shipped);
- **cancel**: shipped, "both" and then ``decision.heard_cancel``: where the words said nothing,
  the answer model's cancel at its ``cancel`` threshold decides.

``fit`` writes the thresholds of "both" into the answer model's record: for each question, the
lowest step from 0.5 at which one half of the folds (FSDD's jackson and nicolas with the
speech_commands speakers 0 and 1; the rest) releases nothing wrongly, fitted on each half, the
higher shipped, so every reported figure is at a threshold the other half fitted. With ``--add
LABEL`` (a retrain's out-of-fold probabilities in place) its fits join the shipped record's and
the highest of all stands: another run's fold models never heard the speaker either. The
``cancel`` threshold (rule 5, ``decision.heard_cancel``) is per half the lowest step from 0.5 at
which the sound cancels no clip that was not a "no" or "stop"; ``--question cancel`` fits only it,
its fits joining the record's (with ``--add``, under that label).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from calibrate import hear_one, load, readings, record

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind
from voicegate.voice import answer_model as am
from voicegate.voice import calibration, consent, decision
from voicegate.voice.hypotheses import LEXICONS, SPOKEN, hypotheses, read_transcript
from voicegate.voice.transcribe import Hearing

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-out" / "answer-model"
RECORD = ROOT / "voicegate/voice/answer_models/tiny.en.json"
RULES = ("decoder", "model", "both", "lift", "cancel")
_NOTHING = Decision(Kind.REFUSE)
NEAR_CONFIGS = ((1, Stage.CHOOSE), (1, Stage.FINAL), (2, Stage.CHOOSE), (3, Stage.CHOOSE),
                (4, Stage.CHOOSE), (5, Stage.CHOOSE))  # fmt: skip


def hear(args: argparse.Namespace) -> int:
    """The recogniser's hearing of every held-out near miss, at a card and at a yes question."""
    from voicegate.voice.whisper import FasterWhisperTranscriber

    transcriber = FasterWhisperTranscriber("tiny.en", threads=args.threads)
    union = {r.text: r for rs in readings(("en",)).values() for r in rs}
    texts = tuple(union)
    spoken = tuple(SPOKEN[union[t].lang] for t in texts)
    cache = Path(args.cache)
    done = (
        {json.loads(line)["id"] for line in cache.read_text().splitlines()}
        if cache.exists()
        else set()
    )
    with cache.open("a") as out:
        for wav in sorted((Path(args.dir) / "heldout").glob("*.wav")):
            for question in ("card", "yes"):
                key = f"{question}/{wav.stem}"
                if key in done:
                    continue
                h = hear_one(transcriber, wav, ("en",), texts, spoken, question)
                out.write(json.dumps(record(key, h), ensure_ascii=False) + "\n")
                out.flush()
    return 0


def verdicts(
    h: Hearing,
    probs: np.ndarray[Any, Any],
    cards: int,
    stage: Stage,
    need: float,
    cancel: float = math.inf,
) -> dict[str, Decision]:
    """Each rule's decision for one clip at one question; ``cancel``: the threshold at which the
    sound may cancel (rule 5, "cancel": "both" and ``decision.heard_cancel``)."""
    cal = calibration.Calibration(
        **{
            **_fields(calibration.of("tiny.en")),
            "answers": {calibration.question(stage, cards): need, decision.CANCEL_KEY: cancel},
        }
    )
    transcript = read_transcript(h.text, cards, stage)
    meanings = am.meanings(probs, cards, stage)
    said = max(meanings, key=lambda m: meanings[m])
    sure = said.releases and meanings[said] >= need
    # Alone, the model also cancels and waits, at the same threshold.
    model = said if said.kind in decision.ANSWERS and meanings[said] >= need else _NOTHING
    if h.refusal is not None:
        v = decision.refused_by_recogniser(h.refusal, transcript)
        heard = decision.heard_cancel(v, meanings, transcript, cal).decision
        return {"decoder": v.decision, "model": model, "both": v.decision, "lift": v.decision,
                "cancel": heard}  # fmt: skip
    rs = consent.readings(cards, stage, tuple(LEXICONS["en"]))
    scored = hypotheses(rs, h, cards, stage)
    v = decision.weigh(scored, transcript, stage, cal, cards)
    agreed = decision.agree(v, meanings, stage, cal, cards)
    both = agreed.decision
    lift = both
    if sure and v.rule in (
        decision.Rule.UNCLEAR,
        decision.Rule.UNSUPPORTED,
        decision.Rule.NO_ANSWER,
    ):
        finite = [x for x in scored if math.isfinite(x.score)]
        vetoed = decision._meaning(decision._likeliest(finite, cal.prior(stage, cards)))
        other = transcript.kind in decision.ANSWERS and transcript != said
        lift = v.decision if vetoed or other else said
    likeliest = decision.likeliest(scored, cal, stage, cards)
    heard = decision.heard_cancel(agreed, meanings, transcript, cal, likeliest).decision
    return {"decoder": v.decision, "model": model, "both": both, "lift": lift, "cancel": heard}


def _fields(cal: calibration.Calibration) -> dict[str, Any]:
    return {name: getattr(cal, name) for name in cal.__slots__}


def outcome(want: Decision, got: Decision) -> str:
    """right, refused (a right answer not taken), wrong (a wrong release) or held."""
    if want.kind is Kind.REFUSE:
        return "wrong" if got.releases else "held"
    if got == want or (want.kind is Kind.CANCEL and got.kind is Kind.CANCEL):
        return "right"
    return "wrong" if got.releases else "refused"


def expected(label: str, cards: int, stage: Stage) -> Decision:
    onehot = np.eye(len(am.CLASSES))[am.CLASSES.index(label)]
    p = am.meanings(onehot, cards, stage)
    return max(p, key=lambda m: p[m])


HALVES = {"folds 0-1": (0, 1), "folds 2-3": (2, 3)}
OTHER_HALF = {0: "folds 2-3", 1: "folds 2-3", 2: "folds 0-1", 3: "folds 0-1"}
GRID = [round(0.5 + 0.005 * i, 3) for i in range(100)]
# What ``fit`` fits: the answer model's threshold for each question, and for the sound's cancel.
QUESTIONS = ("card", "yes", decision.CANCEL_KEY)


def run(folder: Path) -> tuple[list[dict[str, Any]], dict[str, np.ndarray[Any, Any]]]:
    """A training run's clips (``items.jsonl``) and its models' probabilities (``oof.npz``)."""
    rows = [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]
    with np.load(folder / "oof.npz") as f:
        return rows, dict(f)


def cases(
    cache: Path, folder: Path = OUT
) -> list[tuple[dict[str, Any], np.ndarray[Any, Any], Hearing, int, Stage]]:
    """Every corpus clip as recorded with its hearing and out-of-fold probabilities, at each
    question it is decided at: FSDD among five cards, speech_commands on one card and at a
    final card (as ``benchmarks/calibrate.py`` decides them); ``folder``: the training run's."""
    rows, z = run(folder)
    oof = z["oof"]
    hearings = load(cache)
    out = []
    for i, r in enumerate(rows):
        h = hearings.get(r["id"].split("/", 1)[1])
        if r["copy"] != 0 or r["source"] not in ("fsdd", "sc") or h is None:
            continue
        fsdd = r["source"] == "fsdd"
        for cards, stage in [(5, Stage.CHOOSE)] if fsdd else [(1, Stage.CHOOSE), (1, Stage.FINAL)]:
            out.append((r, oof[i], h, cards, stage))
    return out


def fit(args: argparse.Namespace) -> int:
    """The thresholds of "both", by question and half; the higher of the halves shipped."""
    every = cases(Path(args.cache), Path(args.dir))
    record = json.loads(RECORD.read_text())
    fits: dict[str, dict[str, float]] = {}
    for question in args.questions or QUESTIONS:
        fits[question] = {}
        for half, folds in HALVES.items():
            if question == decision.CANCEL_KEY:
                mine = [c for c in every if c[0]["fold"] in folds]
                fits[question][half] = next(
                    (t for t in GRID if not any(_cancelled(c, t) for c in mine)), 1.0
                )
                continue
            mine = [c for c in every if c[0]["fold"] in folds
                    and calibration.question(c[4], c[3]) == question]  # fmt: skip
            fits[question][half] = next(
                (t for t in GRID if not any(_wrong(c, t) for c in mine)), 1.0
            )
    path = RECORD
    if args.add or args.questions:
        # Another run's fold models stand in for the shipped weights as well as their own run's:
        # their fits join the record's under the run's label, and the highest of all stands.
        label = f", {args.add}" if args.add else ""
        for question, halves in fits.items():
            for half, need in halves.items():
                record["fits"].setdefault(question, {})[f"{half}{label}"] = need
        flags = "".join(f" --question {q}" for q in args.questions or ())
        record["fit_source"] += f"; and{flags} --add {args.add!r} (another run's fold models)"
    else:
        record["fits"] = fits
        record["fit_source"] = f"benchmarks/answer_fusion.py fit --cache {args.cache}"
    record["thresholds"] = {q: max(h.values()) for q, h in record["fits"].items()}
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({"fits": fits, "thresholds": record["thresholds"]}, indent=2))
    return 0


def _half(fits: dict[str, float], half: str) -> float:
    """A half's fit in the record: this recipe's own run's, or where only other runs fitted that
    question, the highest of theirs (infinity, never, where none did)."""
    if half in fits:
        return fits[half]
    return max((v for k, v in fits.items() if k.startswith(f"{half},")), default=math.inf)


def _cancels(want: Decision, got: Decision) -> bool:
    """A cancel of a clip that was not one (counted beside ``outcome``: a cancel releases
    nothing, so it is also refused or held there)."""
    return got.kind is Kind.CANCEL and want.kind is not Kind.CANCEL


def _cancelled(case: tuple[Any, ...], cancel: float) -> bool:
    """The sound cancelled (rule 5) a clip that was not a cancel. Independent of "both"'s
    thresholds: the sound cancels only where no release was in question."""
    r, probs, h, cards, stage = case
    got = verdicts(h, probs, cards, stage, 0.5, cancel)
    return (
        got["cancel"] != got["both"] and expected(r["label"], cards, stage).kind is not Kind.CANCEL
    )


def _wrong(case: tuple[Any, ...], need: float) -> bool:
    r, probs, h, cards, stage = case
    got = verdicts(h, probs, cards, stage, need)["both"]
    return outcome(expected(r["label"], cards, stage), got) == "wrong"


def table(args: argparse.Namespace) -> int:
    """Right, refused and wrong releases of each rule on each set."""
    rows, z = run(Path(args.dir))
    record_ = json.loads(RECORD.read_text())
    fits = record_["fits"]
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r, probs, h, cards, stage in cases(Path(args.cache), Path(args.dir)):
        need = _half(fits[calibration.question(stage, cards)], OTHER_HALF[r["fold"]])
        cancel = _half(fits.get(decision.CANCEL_KEY, {}), OTHER_HALF[r["fold"]])
        want = expected(r["label"], cards, stage)
        for rule, got in verdicts(h, probs, cards, stage, need, cancel).items():
            counts[(_set(r, cards, stage), rule)][outcome(want, got)] += 1
            counts[(_set(r, cards, stage), rule)]["cancelled"] += _cancels(want, got)
    if args.near:
        near = load(Path(args.near))
        held = [int(k) for k in z["held"]]
        for k, i in enumerate(held):
            r = rows[i]
            name = r["id"].split("/", 1)[1]
            for cards, stage in NEAR_CONFIGS:
                q = calibration.question(stage, cards)
                near_h = near.get(f"{q}/{name}")
                if near_h is None:
                    continue
                need = record_["thresholds"][q]
                cancel = record_["thresholds"].get(decision.CANCEL_KEY, math.inf)
                for rule, got in verdicts(
                    near_h, z["final"][k], cards, stage, need, cancel
                ).items():
                    tally = counts[(f"held-out near misses, {q}", rule)]
                    tally[outcome(Decision(Kind.REFUSE), got)] += 1
                    tally["cancelled"] += _cancels(Decision(Kind.REFUSE), got)
    sets = sorted({s for s, _ in counts})
    print("| set | " + " | ".join(f"{r}: right / refused / wrong" for r in RULES) + " |")
    print("| --- |" + " ---: |" * len(RULES))
    for s in sets:
        cells = []
        for rule in RULES:
            c = counts[(s, rule)]
            answered = c["right"] + c["refused"]
            cell = (
                f"{c['right']} / {c['refused']} / {c['wrong']}"
                if answered
                else f"held {c['held']} / {c['wrong']}"
            )
            cells.append(cell + (f" (cancelled {c['cancelled']})" if c["cancelled"] else ""))
        print(f"| {s} | " + " | ".join(cells) + " |")
    return 0


SWEEP = (0.5, 0.6, 0.7, 0.725, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999)


def sweep(args: argparse.Namespace) -> int:
    """ "both" at each threshold of ``SWEEP``, by question: the corpus clips' right answers and
    wrong releases (out of fold) beside the held-out near misses released, each near-miss word
    half apart (a seeded half of the words, ``--seed``), so a threshold chosen on one half of the
    words can be reported on the other. With ``--lift``, "both" stays at the record's thresholds
    and the sweep is of the threshold at which "lift" adds the answer model's release."""
    rows, z = run(Path(args.dir))
    shipped = json.loads(RECORD.read_text())
    every = cases(Path(args.cache), Path(args.dir))
    near = load(Path(args.near))
    held = [int(k) for k in z["held"]]
    words = sorted({rows[i]["text"] for i in held})
    rng = np.random.default_rng(args.seed)
    half_a = set(rng.permutation(words)[: len(words) // 2].tolist())

    def decided(h: Hearing, probs: np.ndarray[Any, Any], cards: int, stage: Stage,
                need: float) -> Decision:  # fmt: skip
        if not args.lift:
            return verdicts(h, probs, cards, stage, need)["both"]
        both = verdicts(
            h, probs, cards, stage, shipped["thresholds"][calibration.question(stage, cards)]
        )["both"]
        at = verdicts(h, probs, cards, stage, need)
        return at["lift"] if at["lift"] != at["both"] else both

    print(f"near-miss words: {len(words)}; half A: {sorted(half_a)}")
    print(
        "| question | threshold | corpus right | corpus refused | corpus wrong | near A | near B |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for question in ("card", "yes"):
        mine = [c for c in every if calibration.question(c[4], c[3]) == question]
        for need in SWEEP:
            c: Counter[str] = Counter()
            for r, probs, h, cards, stage in mine:
                got = decided(h, probs, cards, stage, need)
                c[outcome(expected(r["label"], cards, stage), got)] += 1
            released: Counter[str] = Counter()
            for k, i in enumerate(held):
                name = rows[i]["id"].split("/", 1)[1]
                half = "A" if rows[i]["text"] in half_a else "B"
                for cards, stage in NEAR_CONFIGS:
                    near_h = near.get(f"{question}/{name}")
                    if near_h is None or calibration.question(stage, cards) != question:
                        continue
                    released[half] += decided(near_h, z["final"][k], cards, stage, need).releases
            print(
                f"| {question} | {need} | {c['right']} | {c['refused']} | {c['wrong']} "
                f"| {released['A']} | {released['B']} |"
            )
    return 0


def _set(r: dict[str, Any], cards: int, stage: Stage) -> str:
    where = "final" if stage is Stage.FINAL else f"{cards} card{'s' if cards > 1 else ''}"
    if r["source"] == "fsdd":
        return f"fsdd {r['speaker']} ({where})"
    word = r["text"]
    group = word if word in ("yes", "no", "stop") else "other words"
    split = "0-1" if r["fold"] in (0, 1) else "2-3"
    return f"sc {group}, folds {split} ({where})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    h = sub.add_parser("hear")
    h.add_argument("--cache", required=True)
    h.add_argument("--threads", type=int, default=2)
    f = sub.add_parser("fit")
    f.add_argument("--cache", required=True)
    f.add_argument(
        "--add", default="", help="keep the record's fits and add this run's under this label"
    )
    f.add_argument(
        "--question", action="append", dest="questions", choices=QUESTIONS,
        help="fit only this question again, keeping the record's other fits",
    )  # fmt: skip
    t = sub.add_parser("table")
    t.add_argument("--cache", required=True)
    t.add_argument("--near", default=None)
    w = sub.add_parser("sweep")
    w.add_argument("--cache", required=True)
    w.add_argument("--near", required=True)
    w.add_argument("--seed", type=int, default=20261206)
    w.add_argument("--lift", action="store_true", help="sweep the threshold of lift, not both")
    for p in (h, f, t, w):
        p.add_argument("--dir", default=str(OUT), help="the training run's folder (--out)")
    args = parser.parse_args()
    return {"hear": hear, "fit": fit, "table": table, "sweep": sweep}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
