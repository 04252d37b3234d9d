"""The answer model's heads alone against their average: the same heads, the same data per head
(training/answer_model.py fit at this commit writes the pairs' heads to oof.npz).

    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/answer_heads.py
"""
import json, sys
from collections import Counter
from itertools import combinations
from pathlib import Path
import numpy as np
sys.path.insert(0, "benchmarks")
import answer_fusion as af
from calibrate import load
from voicegate.voice import calibration
from voicegate.domain import Decision
from voicegate.reasons import Kind

rows = [json.loads(l) for l in (af.OUT / "items.jsonl").read_text().splitlines()]
z = dict(np.load(af.OUT / "oof.npz"))
hearings = load(Path("bench-out/hear-tiny.jsonl"))
near = load(Path("bench-out/hear-nearmiss.jsonl"))
held = [int(k) for k in z["held"]]
corpus = []
for i, r in enumerate(rows):
    h = hearings.get(r["id"].split("/", 1)[1])
    if r["copy"] != 0 or r["source"] not in ("fsdd", "sc") or h is None:
        continue
    for cards, stage in ([(5, af.Stage.CHOOSE)] if r["source"] == "fsdd" else [(1, af.Stage.CHOOSE), (1, af.Stage.FINAL)]):
        corpus.append((i, r, h, cards, stage))
pairs = sorted(k for k in z if k.startswith("pair"))
singles = []
for c in range(3):
    o = np.full_like(z["oof"], np.nan)
    for k in range(4):
        mine = [p for p in pairs if str(k) in p[4:]]
        idx = [i for i, r in enumerate(rows) if r["fold"] == k]
        o[idx] = z[mine[c]][idx]
    singles.append(o)
THS = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.97, 0.98, 0.99]
def run(oof, final, question, t):
    c = Counter()
    for i, r, h, cards, stage in corpus:
        if calibration.question(stage, cards) != question: continue
        got = af.verdicts(h, oof[i], cards, stage, t)["both"]
        c[af.outcome(af.expected(r["label"], cards, stage), got)] += 1
    n = 0
    for k, i in enumerate(held):
        name = rows[i]["id"].split("/", 1)[1]
        for cards, stage in af.NEAR_CONFIGS:
            if calibration.question(stage, cards) != question: continue
            nh = near.get(f"{question}/{name}")
            if nh is None: continue
            n += af.verdicts(nh, final[k], cards, stage, t)["both"].releases
    return c["right"], c["wrong"], n
print("| question | threshold | one head: right / wrong / near (mean of choices) | heads averaged: right / wrong / near |")
for q in ("card", "yes"):
    for t in THS:
        one = [run(singles[c % 3], z[f"fold{c}"], q, t) for c in range(4)]
        m = np.mean(one, axis=0)
        e = run(z["oof"], z["final"], q, t)
        print(f"| {q} | {t} | {m[0]:.1f} / {m[1]:.1f} / {m[2]:.1f} | {e[0]} / {e[1]} / {e[2]} |", flush=True)
