"""The fused probability of a personal answer: its weights, fitted on real speech.

    .venv/bin/python benchmarks/calibrate.py hear --model tiny.en \
        --cache bench-out/hear-tiny-prompted-takes30.jsonl --fsdd-takes 30 --per-word 0
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/fusion.py \
        --cache bench-out/hear-tiny-prompted-takes30.jsonl

Per FSDD speaker, takes 0-2 of "one".."five" are enrolled and every other take is decided on
five open cards, through the server's own ``decision.weigh`` and ``decision.fuse``.

1. **The templates' likelihood ratio.** On the calibration split (``enrol.CALIBRATION``) only: a
   logistic regression of "the recogniser's winner is what was said" on the two template
   features ``fusion_evidence`` gives for that winner (log of the nearest other taught
   meaning's distance over the winner's own, below 0 when another card is nearer; log of the
   winner's radius over its distance), over every decided take whose winner is a taught card,
   at every distance and whatever the recogniser's probability (``--fit-set inside``: only
   those inside some taught meaning's radius, where the ratio is used; measured too one-sided
   to fit on, 1 wrong winner of 70). Newton's method with a small ridge (``RIDGE``). Less the
   log-odds of that set's base rate, it is the log of the likelihood ratio the templates give
   for the recogniser's winner. The fused log-odds are then the recogniser's log-odds plus that
   (Bayes' rule, the two taken as independent given what was said): ``combined``.
2. **No threshold of its own.** The fused probability is read against the card threshold the
   recogniser alone is held to (``Calibration.card``).
3. **The answer model agreeing** (``--answer-model bench-out/answer-model``, after
   ``training/answer_model.py features`` and ``fit``): every release must then have the answer
   model's agreement at its shipped threshold (``decision.agree``), as in the server, from the
   fold model that never heard the take's speaker. The server's rule 5 (``heard_cancel``, the
   sound's cancel where the words said nothing) is not applied: it releases nothing, and its cost
   on FSDD is measured by ``benchmarks/answer_fusion.py table`` (of takes 0-9, one "zero" heard
   "New." cancelled, at the threshold the other half of the speakers fitted).

Both splits are then reported, beside the recogniser alone, with what the templates changed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import enrol
import numpy as np

from voicegate.domain import Decision, Stage
from voicegate.voice import answer_model, calibration, decision
from voicegate.voice.taught import Taught, fusion_evidence

# The ridge on the weights: keeps Newton's method finite when a feature separates the
# calibration split perfectly (it barely moves the fit otherwise: 1e-2 against ~500 takes).
RIDGE = 1e-2
# The recogniser's probabilities a hard user's clear match is tried at.
ALONE_GRID = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5)
Weights = tuple[float, float, float, float]
Limits = tuple[float, float]
Row = enrol.Row
# Each take's answers on five cards by the answer model that never heard its speaker.
Heard = dict[str, dict[Decision, float]]
# The shipped calibration, with the shipped answer model's thresholds for ``decision.agree``.
_model = answer_model.load("tiny.en")
AGREEING = replace(calibration.of("tiny.en"), answers=_model.thresholds if _model else None)


def taught(row: Row, hard: bool) -> Taught:
    """What the server's pipeline hands ``fuse`` for a take of a user who enrolled all cards."""
    m, radius = row[4], row[5]
    return Taught(m.nearest, m.meaning is not None, hard, m.distances, radius)


def table(
    rows: list[Row],
    weights: Weights | None,
    hard: bool = False,
    limits: Limits | None = None,
    alone: float | None = None,
    heard: Heard | None = None,
) -> tuple[dict[str, Counter[str]], Counter[tuple[str, str]]]:
    """Outcome counts per speaker with the user's templates fused by ``weights`` (None: the
    recogniser alone, as for a user who taught nothing), and counts per deciding rule; ``hard``
    for users who said their speech is hard for recognisers, with ``alone`` as the
    recogniser's probability a clear match needs (None: the shipped one); ``heard``: each take's
    answers by the answer model, which must then agree (``decision.agree``), as in the server."""
    counts: dict[str, Counter[str]] = {}
    rules: Counter[tuple[str, str]] = Counter()
    for row in rows:
        t, v = row[0], fused(row, weights, hard, limits, alone)
        if heard is not None:
            v = decision.agree(v, heard[t.id], Stage.CHOOSE, AGREEING, enrol.CARDS)
        o = enrol.outcome(t.digit, v.decision)
        counts.setdefault(t.speaker, Counter())[o] += 1
        rules[(v.rule, o)] += 1
    return counts, rules


def fused(
    row: Row,
    weights: Weights | None,
    hard: bool = False,
    limits: Limits | None = None,
    alone: float | None = None,
) -> decision.Ruling:
    """The ruling of one take: the recogniser's alone (``weights`` None) or fused, with the
    feature ``limits`` and ``alone`` given (None: the shipped ones)."""
    if weights is None:
        return row[3]
    shipped = calibration.of("tiny.en")
    cal = replace(
        shipped,
        fusion=weights,
        fusion_limits=limits or shipped.fusion_limits,
        alone=shipped.alone if alone is None else alone,
    )
    said, hyps, v = row[1], row[2], row[3]
    return decision.fuse(v, hyps, said, taught(row, hard), Stage.CHOOSE, cal, enrol.CARDS)


def answers_of(folder: Path) -> Heard:
    """Each FSDD take's answers on five cards by the answer model that never heard its speaker
    (``enrol.unheard``), as the server hands them to ``decision.agree``."""
    return {
        take: answer_model.meanings(p, enrol.CARDS, Stage.CHOOSE)
        for take, (_, p) in enrol.unheard(folder, "tiny.en").items()
    }


def evidence(rows: list[Row], anywhere: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The templates' fitting set, calibration split only: for every decided take whose
    recogniser's winner is a taught card (``anywhere`` False: only where the templates say
    anything about it, inside some taught meaning's radius), the two template features for that
    card (after a column of ones) and whether it is what was said."""
    xs, ys = [], []
    for row in rows:
        t, v = row[0], row[3]
        if t.speaker not in enrol.CALIBRATION or v.winner is None or not v.winner.releases:
            continue
        e = fusion_evidence(0.5, taught(row, hard=False), v.winner, anywhere)
        if e is None:
            continue
        xs.append((1.0, e[1], e[2]))
        ys.append(1.0 if v.winner == enrol.wanted(t.digit) else 0.0)
    return np.array(xs), np.array(ys)


def changes(rows: list[Row], weights: Weights, limits: Limits) -> Counter[tuple[str, str, str]]:
    """Per take whose outcome the templates changed: (alone, fused, the fused rule)."""
    out: Counter[tuple[str, str, str]] = Counter()
    for row in rows:
        alone = enrol.outcome(row[0].digit, row[3].decision)
        v = fused(row, weights, limits=limits)
        with_templates = enrol.outcome(row[0].digit, v.decision)
        if alone != with_templates:
            out[(alone, with_templates, v.rule)] += 1
    return out


def vetoed(rows: list[Row], heard: Heard) -> Counter[tuple[int, str]]:
    """The takes whose release by the recogniser alone the answer model refuses: per digit,
    whether the model's likeliest answer is that card under its threshold ("same"), no answer
    ("nothing") or another card."""
    out: Counter[tuple[int, str]] = Counter()
    for row in rows:
        t, v = row[0], row[3]
        if not v.decision.releases:
            continue
        ruling = decision.agree(v, heard[t.id], Stage.CHOOSE, AGREEING, enrol.CARDS)
        if ruling.rule is not decision.Rule.ANSWER_MODEL:
            continue
        answers = heard[t.id]
        top = max(answers, key=lambda d: answers[d])
        kind = "same" if top == v.decision else "nothing" if not top.releases else "another card"
        out[(t.digit, kind)] += 1
    return out


def combined(template_weights: tuple[float, float, float], prior: float) -> Weights:
    """Bayes' rule in log-odds: the recogniser's log-odds (weight 1) plus the templates'
    likelihood ratio, which is their fitted log-odds less the log-odds of the fitting set's
    base rate."""
    a, b, c = template_weights
    return round(a - math.log(prior / (1.0 - prior)), 3), 1.0, b, c


def fit_weights(x: np.ndarray, y: np.ndarray, iterations: int = 100) -> tuple[float, ...]:
    """Logistic regression by Newton's method with the ridge ``RIDGE``."""
    w = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 0.5 * (1.0 + np.tanh(x @ w / 2.0))
        gradient = x.T @ (p - y) + RIDGE * w
        hessian = x.T @ (x * (p * (1.0 - p))[:, None]) + RIDGE * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return tuple(round(float(v), 3) for v in w)


def run(args: argparse.Namespace) -> int:
    """Fit the templates' likelihood ratio on the calibration split; report every speaker."""
    takes = enrol.load(frames=args.frames)
    rows = enrol.fused_rows(enrol.nearest_table(takes, args.takes), Path(args.cache))
    print(f"{len(rows)} decided takes heard by the recogniser", file=sys.stderr)
    x, y = evidence(rows, args.fit_set == "taught")
    a, b, c = fit_weights(x, y)
    weights = combined((a, b, c), float(y.mean()))
    limits = (round(float(x[:, 1].max()), 3), round(float(x[:, 2].max()), 3))
    print(f"largest margin and radius features fitted on: {limits}")
    print(f"templates fitted on {enrol.CALIBRATION}, {len(y)} takes ({int(y.sum())} said the "
          f"recogniser's winner): {(a, b, c)}; fused weights {weights}")  # fmt: skip
    shipped = calibration.of("tiny.en")
    differ = (shipped.fusion, shipped.fusion_limits) != (weights, limits)
    if differ:
        print(f"the shipped weights differ: {shipped.fusion}, limits {shipped.fusion_limits}")
    report: dict[str, object] = {"weights": weights, "limits": limits, "fitting_takes": len(y)}
    runs: list[tuple[str, Weights | None, Limits | None]] = [
        ("recogniser alone (no enrolment)", None, limits),
        (f"fused, {args.takes} takes enrolled, weights {weights}", weights, limits),
    ]
    if shipped.fusion is not None and differ:
        title = f"fused, {args.takes} takes enrolled, shipped weights {shipped.fusion}"
        runs.append((title, shipped.fusion, shipped.fusion_limits))
    heard = answers_of(Path(args.answer_model)) if args.answer_model else None
    for title, w, lim in runs:
        if heard is not None:
            title += ", the answer model agreeing (the server's decision)"
        counts, rules = table(rows, w, limits=lim, heard=heard)
        enrol.print_table(title, counts)
        print("rules:", dict(sorted(rules.items())))
        report[title] = {k: dict(v) for k, v in counts.items()}
    print("\n\"hard for recognisers\": a clear match decides alone where the recogniser gives "
          "its meaning at least `alone` (fitted weights)")  # fmt: skip
    print("| alone | calibration right | wrong | released | report right | wrong | released |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for alone in ALONE_GRID:
        counts, _ = table(rows, weights, hard=True, limits=limits, alone=alone, heard=heard)
        cal = sum((counts[k] for k in counts if k in enrol.CALIBRATION), Counter())
        rep = sum((counts[k] for k in counts if k not in enrol.CALIBRATION), Counter())
        print(f"| {alone} | {cal['right']} | {cal['wrong']} | {cal['released']} | "
              f"{rep['right']} | {rep['wrong']} | {rep['released']} |")  # fmt: skip
    counts, rules = table(rows, weights, hard=True, limits=limits, heard=heard)
    enrol.print_table(f"hard for recognisers, shipped alone {shipped.alone}", counts)
    print("rules:", dict(sorted(rules.items())))
    report["hard"] = {k: dict(v) for k, v in counts.items()}
    if heard is not None:
        print("refused by the answer model, no enrolment (digit, its likeliest answer):",
              dict(sorted(vetoed(rows, heard).items())))  # fmt: skip
    changed = changes(rows, weights, limits)
    print("changed by the templates (alone -> fused, rule):", dict(sorted(changed.items())))
    report["changed"] = {" ".join(k): n for k, n in sorted(changed.items())}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def main() -> int:
    """Command line: fit the templates' likelihood ratio and report it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--takes", type=int, default=3, help="enrolment takes per answer")
    parser.add_argument("--cache", required=True, help="benchmarks/calibrate.py hear output")
    parser.add_argument(
        "--fit-set",
        choices=("taught", "inside"),
        default="taught",
        help="fit on every taught winner, or only those inside a radius",
    )
    parser.add_argument("--json", default=None)
    parser.add_argument("--frames", help="encoder frames (enrol.py frames); else MFCC")
    parser.add_argument("--answer-model", help="training/answer_model.py's --out after fit: "
                        "its fold models must agree with each release")  # fmt: skip
    args = parser.parse_args()
    np.seterr(all="ignore")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
