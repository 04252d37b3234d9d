"""Held-out near misses under "both": the shipped answer model, one retrained model, each fold
model, and the fold models averaged (an ensemble), at the same thresholds.

    # after training/answer_model.py features [--more] and fit, and the near misses' hearings
    # (benchmarks/answer_fusion.py hear --cache bench-out/hear-nearmiss.jsonl)
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/answer_ensemble.py \\
        --near bench-out/hear-nearmiss.jsonl --card 0.725 --yes 0.5

The same words and the same hearings for every model: only the answer model's probabilities
change. "shipped" is the model in ``voicegate/voice/answer_models/`` as it stands (fit writes its
new weights there: restore them with git before reading "shipped"); "retrained", "fold k" and
"folds averaged" are the arrays ``fit`` wrote to ``oof.npz``. No model heard these words.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from answer_fusion import NEAR_CONFIGS, OUT, verdicts
from calibrate import load

from voicegate.voice import answer_model as am
from voicegate.voice import calibration
from voicegate.voice.calibration import Question
from voicegate.voice.transcribe import Hearing


def released(
    probs: np.ndarray[Any, Any],
    names: list[tuple[str, str]],
    near: dict[str, Hearing],
    need: dict[Question, float],
) -> tuple[Counter[Question], Counter[str]]:
    """Near misses "both" releases, by question, and the words released."""
    by_question: Counter[Question] = Counter()
    words: Counter[str] = Counter()
    for p, (name, text) in zip(probs, names, strict=True):
        for cards, stage in NEAR_CONFIGS:
            q = calibration.question(stage, cards)
            heard = near.get(f"{q}/{name}")
            if heard is not None and verdicts(heard, p, cards, stage, need[q])["both"].releases:
                by_question[q] += 1
                words[text] += 1
    return by_question, words


def main() -> int:
    """Command line: one table row per model."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--near", required=True, help="benchmarks/answer_fusion.py hear output")
    parser.add_argument("--card", type=float, required=True, help="the card question's threshold")
    parser.add_argument("--yes", type=float, required=True, help="the yes question's threshold")
    args = parser.parse_args()
    rows = [json.loads(line) for line in (OUT / "items.jsonl").read_text().splitlines()]
    with np.load(OUT / "oof.npz") as f:
        z = dict(f)
    held = [int(i) for i in z["held"]]
    names = [(str(rows[i]["id"]).split("/", 1)[1], str(rows[i]["text"])) for i in held]
    with np.load(OUT / "features.npz") as f:
        frames, offsets = f["frames"], f["offsets"]
    shipped = am.load("tiny.en")
    if shipped is None:
        raise SystemExit("no shipped answer model for tiny.en")
    clips = [frames[offsets[i] : offsets[i + 1]].astype(np.float32) for i in held]
    folds = [z[k] for k in sorted(z) if k.startswith("fold")]
    models: list[tuple[str, np.ndarray[Any, Any]]] = [
        ("shipped", np.stack([shipped.probabilities(c) for c in clips])),
        ("retrained", z["final"]),
        *((f"fold {k}", f) for k, f in enumerate(folds)),
        ("folds averaged", np.mean(folds, axis=0)),
    ]
    near = load(Path(args.near))
    need = {Question.CARD: args.card, Question.YES: args.yes}
    print(f"{len(held)} held-out near-miss clips, {len({t for _, t in names})} words; "
          f"thresholds card {args.card}, yes {args.yes}")  # fmt: skip
    print("| model | released at a card | at a yes | words released most |")
    print("| --- | ---: | ---: | --- |")
    for title, probs in models:
        counts, words = released(probs, names, near, need)
        top = ", ".join(f"{w} {n}" for w, n in words.most_common(6))
        print(f"| {title} | {counts[Question.CARD]} | {counts[Question.YES]} | {top} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
