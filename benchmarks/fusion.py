"""The fused probability of a personal answer: its weights, fitted on real speech.

    .venv/bin/python benchmarks/calibrate.py hear --model tiny.en \
        --cache bench-out/hear-tiny-prompted.jsonl --fsdd-takes 50 --per-word 0
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/enrol.py fused \
        --cache bench-out/hear-tiny-prompted.jsonl

Per FSDD speaker, takes 0-2 of "one".."five" are enrolled and every other take is decided on
five open cards, through the server's own ``decision.decide`` and ``decision.fuse``.

1. **The templates' likelihood ratio.** On the calibration split (``enrol.CALIBRATION``) only: a
   logistic regression of "the templates' nearest card is what was said" on the two template
   features of ``decision.fusion_evidence`` (log runner-up / distance, log radius / distance),
   over every decided take whose templates name a nearest card, whatever the recogniser heard.
   Newton's method with a small ridge (``RIDGE``). Less the log-odds of that set's base rate,
   it is the log of the likelihood ratio the templates give.
   The fused log-odds are then the recogniser's log-odds plus that (Bayes' rule, the two taken
   as independent): ``combined``.
2. **No threshold of its own.** The fused probability is read against the card threshold the
   recogniser alone is held to (``Calibration.card``).

Both splits are then reported, beside the recogniser alone.
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

from voicegate.gate.types import Stage
from voicegate.voice import calibration, decision

# The ridge on the weights: keeps Newton's method finite when a feature separates the
# calibration split perfectly (it barely moves the fit otherwise: 1e-2 against ~500 takes).
RIDGE = 1e-2
Weights = tuple[float, float, float, float]
Row = enrol.Row


def taught(m: enrol.templates.Match, hard: bool) -> decision.Taught:
    """What the server's pipeline hands ``fuse`` for a take of a user who enrolled all cards."""
    return decision.Taught(
        m.nearest, m.meaning is not None, hard, m.closest, frozenset(enrol.wanted_cards),
        m.distance, m.runner_up, m.radius,
    )  # fmt: skip


def table(
    rows: list[Row], weights: Weights | None, hard: bool = False
) -> tuple[dict[str, Counter[str]], Counter[tuple[str, str]]]:
    """Outcome counts per speaker with the user's templates fused by ``weights`` (None: the
    recogniser alone, as for a user who taught nothing), and counts per deciding rule."""
    cal = replace(calibration.of("tiny.en"), fusion=weights)  # the shipped fusion_limits
    counts: dict[str, Counter[str]] = {}
    rules: Counter[tuple[str, str]] = Counter()
    for t, said, hyps, v, m in rows:
        if weights is not None:
            v = decision.fuse(v, hyps, said, taught(m, hard), Stage.CHOOSE, cal, enrol.CARDS)
        o = enrol.outcome(t.digit, v.decision)
        counts.setdefault(t.speaker, Counter())[o] += 1
        rules[(v.rule, o)] += 1
    return counts, rules


def evidence(rows: list[Row]) -> tuple[np.ndarray, np.ndarray]:
    """The templates' fitting set, calibration split only: for every decided take whose
    templates name a nearest meaning, its two template features (after a column of ones) and
    whether that meaning is what was said. The recogniser plays no part in it."""
    xs, ys = [], []
    for t, _said, _hyps, _v, m in rows:
        if t.speaker not in enrol.CALIBRATION or m.nearest is None:
            continue
        e = decision.fusion_evidence(0.5, taught(m, hard=False))
        if e is None:
            continue
        xs.append((1.0, e[1], e[2]))
        ys.append(1.0 if m.nearest == enrol.wanted(t.digit) else 0.0)
    return np.array(xs), np.array(ys)


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
    takes = enrol.load()
    rows = enrol.fused_rows(enrol.nearest_table(takes, args.takes), Path(args.cache))
    print(f"{len(rows)} decided takes heard by the recogniser", file=sys.stderr)
    x, y = evidence(rows)
    a, b, c = fit_weights(x, y)
    weights = combined((a, b, c), float(y.mean()))
    limits = (round(float(x[:, 1].max()), 3), round(float(x[:, 2].max()), 3))
    print(f"largest margin and radius features fitted on: {limits}")
    print(f"templates fitted on {enrol.CALIBRATION}, {len(y)} takes ({int(y.sum())} said the "
          f"nearest card): {(a, b, c)}; fused weights {weights}")  # fmt: skip
    shipped = calibration.of("tiny.en").fusion
    if shipped != weights:
        print(f"the shipped weights differ: {shipped}")
    report: dict[str, object] = {"weights": weights, "fitting_takes": len(y)}
    for title, w in (
        ("recogniser alone (no enrolment)", None),
        (f"fused, {args.takes} takes enrolled, weights {weights}", weights),
    ):
        counts, rules = table(rows, w)
        enrol.print_table(title, counts)
        print("rules:", dict(sorted(rules.items())))
        report[title] = {k: dict(v) for k, v in counts.items()}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0
