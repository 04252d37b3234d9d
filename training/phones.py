"""A phone model and its spelling check over the answer model's features (measured, not
shipped: docs/voice-measurements.md, "A phone model's spelling check").

    .venv/bin/python training/answer_model.py features      # the encoded clips
    .venv/bin/python training/answer_model.py fit           # oof.npz, for ``decide``
    .venv/bin/python training/phones.py all                 # spell, fit, report
    PYTHONPATH=.:benchmarks .venv/bin/python training/phones.py decide \\
        --cache bench-out/hear-tiny.jsonl --near bench-out/hear-nearmiss.jsonl

The question: can a model of the sounds, not of the answers, tell a near miss from the answer?
Each clip's text is spelled in espeak-ng's phonemes (en-us, IPA, stress dropped), and a network
over the encoder frames the answer model reads (each frame with ``--context`` neighbours a side)
learns them with CTC (English clips and background only; the Hindi voice's are left out). A
release passes the spelling check when the likeliest of its spoken forms ("two", "second", "the
second one" ...) is likelier than every word within two phones of one of them (``lexicon``:
Debian's dictionary, the training's phrases and the lexicons' answers and refusals; the held-out
near-miss words are there as every dictionary word is, none added for being held out). No
threshold: the answer must be the likeliest word. Steps, under ``bench-out/answer-model``
(``--out``):
  spell     the phonemes of every clip's text and every dictionary word: ``phones.json``
  fit       four fold models (out-of-fold log-probabilities of every clip, the held-out near
            misses by the model on every fold: ``phones-oof.npz``) and that model's weights
  report    the check alone: right answers that pass, near misses and other words that pass
  decide    the shipped decision ("both" and the sound's cancel), then with the check on every
            release ("spelled"), and "lift" (the answer model releasing where the words were
            only unsure) with and without the check, on the recogniser's own hearings
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import data
from answer_model import BATCH, Data, length_batches

from voicegate.domain import Decision
from voicegate.reasons import Kind

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261208
HIDDEN = 256
# Frames each side a frame's network reads (40 ms each): 1 lets it hear 120 ms around.
CONTEXT = 1
EPOCHS = 12
LEARNING_RATE = 2e-3
STRESS = str.maketrans("", "", "ˈˌ")
BLANK = "_"
# The releases the check is asked about, as answer-model classes.
RELEASES = ("yes", "card1", "card2", "card3", "card4", "card5")
# A word is near a release within this many phone edits of one of its forms: "tooth" is one from
# "two", "spree" two from "three".
NEAR_EDITS = 2
Spelled = list[list[int]]


def spell(texts: Sequence[str]) -> dict[str, list[str]]:
    """espeak-ng's en-us phonemes of each text (its letters only), stress dropped."""
    clean = [" ".join("".join(c if c.isalpha() else " " for c in t.lower()).split()) for t in texts]
    todo = sorted({c for c in clean if c})
    command = ["espeak-ng", "-q", "--ipa", "--sep= ", "-v", "en-us"]
    lines = subprocess.run(command, input="".join(f"{t}\n" for t in todo), capture_output=True,
                           text=True, check=True).stdout.splitlines()  # fmt: skip
    said = [line for line in lines if line.strip()]
    if len(said) != len(todo):  # a text espeak-ng split in two: one call each
        said = [
            subprocess.run(command, input=t, capture_output=True, text=True, check=True).stdout
            for t in todo
        ]
    sounds = {
        t: " ".join(s.split()).translate(STRESS).split() for t, s in zip(todo, said, strict=True)
    }
    return {t: sounds.get(c, []) for t, c in zip(texts, clean, strict=True)}


def english(row: dict[str, Any]) -> bool:
    """A clip the phone model learns from: English speech, or none (background)."""
    return bool(row["text"].isascii()) and not row["speaker"].startswith("hi")


def ctc_scores(
    logp: np.ndarray[Any, Any], spellings: Sequence[Sequence[int]]
) -> np.ndarray[Any, Any]:
    """log P(spelling | frames) under CTC (blank 0) for each spelling, from per-frame log
    probabilities ``logp`` (T x phones): the forward sum over every alignment."""
    lp = np.asarray(logp, np.float64)
    n = len(spellings)
    states = 2 * max((len(s) for s in spellings), default=0) + 1
    labels = np.zeros((n, states), np.int64)
    for k, s in enumerate(spellings):
        labels[k, 1 : 2 * len(s) : 2] = s
    ends = np.array([2 * len(s) for s in spellings])
    valid = np.arange(states)[None, :] <= ends[:, None]
    # A path may skip a blank into a phone that differs from the phone two states before.
    skip = np.zeros((n, states), bool)
    skip[:, 2:] = (labels[:, 2:] != 0) & (labels[:, 2:] != labels[:, :-2])
    alpha = np.full((n, states), -np.inf)
    first = np.where(valid, lp[0][labels], -np.inf)
    alpha[:, 0] = first[:, 0]
    alpha[:, 1] = np.where(ends >= 1, first[:, 1], -np.inf)
    for t in range(1, len(lp)):
        one = np.concatenate([np.full((n, 1), -np.inf), alpha[:, :-1]], axis=1)
        two = np.concatenate([np.full((n, 2), -np.inf), alpha[:, :-2]], axis=1)
        stay = np.logaddexp(alpha, one)
        alpha = np.logaddexp(stay, np.where(skip, two, -np.inf))
        alpha += np.where(valid, lp[t][labels], -np.inf)
    rows = np.arange(n)
    before = np.where(ends >= 1, alpha[rows, np.maximum(ends - 1, 0)], -np.inf)
    return np.logaddexp(alpha[rows, ends], before)  # type: ignore[no-any-return]


def margin(logp: np.ndarray[Any, Any], forms: Spelled, near: Spelled) -> float:
    """How much likelier (log) the release's likeliest form is than every word near it: the
    check passes at 0 or above."""
    scores = ctc_scores(logp, [*forms, *near])
    return float(scores[: len(forms)].max() - scores[len(forms) :].max())


def lexicon(
    sounds: dict[str, list[str]],
) -> dict[str, tuple[list[tuple[str, ...]], list[tuple[str, ...]]]]:
    """Each release's (spoken forms, words near them that are not it), spelled. A word that
    sounds exactly like a form ("to", "too") is no competitor: the grammar reads it; nor is one
    that only leaves sounds out of a form it is near (``fainter``; "ree" of "three", but not
    "pour" of "option four"): only a sound the answer does not have says another word."""
    pool = {*data.dictionary_words(), *data.PHRASES, *data.OUT_OF_RANGE,
            *(t for t, lang in [*data.answers(), *data.refusals()] if lang == "en")}  # fmt: skip
    classes = {t: data.label(t) for t in pool if sounds.get(t)}
    out = {}
    for release in RELEASES:
        forms = {tuple(sounds[t]) for t, c in classes.items() if c == release}
        near = {tuple(sounds[t]) for t, c in classes.items() if c != release}
        near = {
            w
            for w in near - forms
            if any(data.within(w, f, NEAR_EDITS) for f in forms)
            and not any(data.within(w, f, NEAR_EDITS) and fainter(w, f) for f in forms)
        }
        out[release] = (sorted(forms), sorted(near))
    return out


def fainter(word: Sequence[str], form: Sequence[str]) -> bool:
    """True when ``word`` is ``form`` with sounds left out ("ree" of "three", "fie" of "five"):
    how a form is said with a sound too faint to hear, not another word."""
    rest = iter(form)
    return all(p in rest for p in word)


class Check:
    """The spelling check of a run's phone model: its inventory and every release's lexicon."""

    def __init__(self, out: Path) -> None:
        sounds: dict[str, list[str]] = json.loads((out / "phones.json").read_text())
        with np.load(out / "phones-oof.npz") as z:
            self.inventory = [str(p) for p in z["inventory"]]
            self.rows = {int(i): k for k, i in enumerate(z["rows"])}
            self.offsets, self.logp = z["offsets"], z["logp"]
        index = {p: k for k, p in enumerate(self.inventory)}
        self.seconds: list[float] = []  # each check's time
        self.lexicon = {
            release: ([[index[p] for p in f] for f in forms], [[index[p] for p in w] for w in near])
            for release, (forms, near) in lexicon(sounds).items()
        }

    def margin(self, row: int, releases: Sequence[str]) -> float:
        """The check's margin for clip ``row`` (of items.jsonl), out of fold, as any of
        ``releases`` (one, or "yes" and "card1" where one card is open: ``releases``)."""
        k = self.rows[row]
        logp = self.logp[self.offsets[k] : self.offsets[k + 1]].astype(np.float64)
        forms = [f for r in releases for f in self.lexicon[r][0]]
        near = [w for r in releases for w in self.lexicon[r][1] if w not in forms]
        started = time.perf_counter()
        try:
            return margin(logp, forms, near)
        finally:
            self.seconds.append(time.perf_counter() - started)


def stacked(x: np.ndarray[Any, Any], context: int) -> np.ndarray[Any, Any]:
    """Each frame of normalised frames ``x`` (T x width, or B x T x width) beside its
    ``context`` neighbours on each side; past either end, zeros (the average frame)."""
    if context == 0:
        return x
    pad = [(0, 0)] * (x.ndim - 2) + [(context, context), (0, 0)]
    padded = np.pad(x, pad)
    t = x.shape[-2]
    return np.concatenate([padded[..., k : k + t, :] for k in range(2 * context + 1)], axis=-1)


def train(d: Data, targets: list[list[int]], rows: Sequence[int], seed: int, classes: int,
          epochs: int = EPOCHS, context: int = CONTEXT) -> dict[str, Any]:  # fmt: skip
    """A network of one hidden layer over each frame and its ``context``, trained with CTC on
    ``rows``; its arrays."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x_all = np.concatenate([d.clip(i) for i in rows]).astype(np.float32)
    mean, scale = x_all.mean(axis=0), x_all.std(axis=0) + 1e-3
    del x_all
    width = d.frames.shape[1]
    net = nn.Sequential(
        nn.Dropout(0.1),
        nn.Linear(width * (2 * context + 1), HIDDEN),
        nn.GELU(approximate="tanh"),  # as ``log_probs`` computes it
        nn.Dropout(0.2),
        nn.Linear(HIDDEN, classes),
    )
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    opt = torch.optim.AdamW(net.parameters(), lr=LEARNING_RATE, weight_decay=1e-3)
    steps = epochs * (len(rows) // BATCH + 1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LEARNING_RATE, total_steps=steps)
    order = np.array(rows)
    lengths = d.offsets[order + 1] - d.offsets[order]
    for _ in range(epochs):
        net.train()
        for batch in length_batches(order, lengths, rng):
            clips = [d.clip(i) for i in batch]
            x = np.zeros((len(clips), max(len(c) for c in clips), width), np.float32)
            for k, c in enumerate(clips):
                x[k, : len(c)] = (c - mean) / scale
            logp = torch.log_softmax(net(torch.from_numpy(stacked(x, context))), dim=-1)
            want = [targets[i] for i in batch]
            flat = torch.tensor([p for w in want for p in w], dtype=torch.long)
            sizes = torch.tensor([len(c) for c in clips]), torch.tensor([len(w) for w in want])
            loss = ctc(logp.transpose(0, 1), flat, *sizes)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    hidden, output = net[1], net[4]
    assert isinstance(hidden, nn.Linear) and isinstance(output, nn.Linear)
    return {
        "mean": mean,
        "scale": scale,
        "context": np.array(context),
        "hidden": hidden.weight.detach().numpy().T.copy(),
        "hidden_bias": hidden.bias.detach().numpy().copy(),
        "out": output.weight.detach().numpy().T.copy(),
        "out_bias": output.bias.detach().numpy().copy(),
    }


def log_probs(w: dict[str, Any], frames: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Per-frame log P(phone), blank first, of one clip's paired frames."""
    x = (np.asarray(frames, np.float32) - w["mean"]) / w["scale"]
    h = stacked(x, int(w.get("context", 0))) @ w["hidden"] + w["hidden_bias"]
    h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))  # GELU (tanh form)
    z = h @ w["out"] + w["out_bias"]
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))  # type: ignore[no-any-return]


def spell_step(args: argparse.Namespace) -> int:
    """``phones.json``: the phonemes of every English clip's text and every dictionary word."""
    out = Path(args.out)
    rows = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    texts = sorted({r["text"] for r in rows if english(r)})
    sounds = spell([*texts, *sorted(data.dictionary_words())])
    (out / "phones.json").write_text(json.dumps(sounds, ensure_ascii=False))
    inventory = sorted({p for s in sounds.values() for p in s})
    print(f"{len(sounds)} texts, {len(inventory)} phones: {' '.join(inventory)}")
    return 0


def fit_step(args: argparse.Namespace) -> int:
    """Four fold models and one on every fold; ``phones-oof.npz``, ``phones-final.npz``."""
    out = Path(args.out)
    d = Data(out)
    sounds: dict[str, list[str]] = json.loads((out / "phones.json").read_text())
    inventory = [BLANK, *sorted({p for s in sounds.values() for p in s})]
    index = {p: k for k, p in enumerate(inventory)}
    targets = [[index[p] for p in sounds.get(r["text"], [])] for r in d.rows]
    n = len(d.rows)
    usable = [i for i in range(n) if english(d.rows[i]) and d.folds[i] != data.HELD_OUT]
    heard: dict[int, np.ndarray[Any, Any]] = {}
    started = time.perf_counter()
    for fold in range(data.FOLDS):
        w = train(d, targets, [i for i in usable if d.folds[i] != fold], args.seed + fold,
                  len(inventory), args.epochs, args.context)  # fmt: skip
        heard |= {i: log_probs(w, d.clip(i)) for i in range(n) if d.folds[i] == fold}
        print(f"fold {fold}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    w = train(d, targets, usable, args.seed, len(inventory), args.epochs, args.context)
    np.savez(out / "phones-final.npz", **w, inventory=np.array(inventory))
    heard |= {i: log_probs(w, d.clip(i)) for i in range(n) if d.folds[i] == data.HELD_OUT}
    kept = sorted(heard)
    np.savez(out / "phones-oof.npz", rows=np.array(kept), inventory=np.array(inventory),
             offsets=np.cumsum([0, *(len(heard[i]) for i in kept)]),
             logp=np.concatenate([heard[i] for i in kept]).astype(np.float16))  # fmt: skip
    print(f"done: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


def report_step(args: argparse.Namespace) -> int:
    """The check alone, out of fold, on every clip as recorded or rendered."""
    out = Path(args.out)
    check = Check(out)
    rows = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    passed: dict[str, Counter[bool]] = defaultdict(Counter)
    for i, r in enumerate(rows):
        if r["copy"] or r["augmented"] or not english(r) or i not in check.rows:
            continue
        if r["fold"] == data.HELD_OUT:
            asked, key = [data.label(r["near"])], "held-out near misses"
        elif r["label"] in RELEASES:
            who = r["speaker"] if r["source"] == "fsdd" else r["source"]
            asked, key = [r["label"]], f"answers, {who}, {r['label'].rstrip('12345')}"
        elif r["source"] in ("fsdd", "sc"):
            asked, key = list(RELEASES), f"other words, {r['source']} (each release)"
        else:
            continue
        for release in (a for a in asked if a in RELEASES):
            passed[key][check.margin(i, (release,)) >= 0] += 1
    for key in sorted(passed):
        print(f"{key:45} {passed[key][True]:5} of {passed[key].total():5} pass")
    return 0


DECIDE_RULES = ("both", "spelled", "lift", "lift+spelled", "lift, all spelled")


def decide_step(args: argparse.Namespace) -> int:
    """The decision with and without the check, on the recogniser's own hearings: corpus clips
    with the answer and phone models that never heard their speaker, at the other half's
    thresholds (as ``answer_fusion.py table``), held-out near misses with the shipped answer
    model and thresholds and the phone model on every fold."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import answer_fusion as af
    from calibrate import load

    from voicegate.voice import answer_model as am
    from voicegate.voice import calibration, decision

    out = Path(args.out)
    check = Check(out)
    record = json.loads(af.RECORD.read_text())
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    rows, _ = af.run(out)
    row_of = {r["id"]: i for i, r in enumerate(rows) if r["copy"] == 0}  # as recorded

    def ruled(row: int, v: dict[str, Decision], cards: int) -> dict[str, Decision]:
        both = v["cancel"]  # shipped: "both", then the sound's cancel
        spelled = _checked(check, row, both, cards)
        extra = v["lift"] if v["lift"].releases and v["lift"] != v["both"] else both
        lifted = _checked(check, row, extra, cards) if extra != both else both
        return {"both": both, "spelled": spelled, "lift": extra, "lift+spelled": lifted,
                "lift, all spelled": _checked(check, row, extra, cards)}  # fmt: skip

    for r, probs, h, cards, stage in af.cases(Path(args.cache), out):
        q = calibration.question(stage, cards)
        need = af._half(record["fits"][q], af.OTHER_HALF[r["fold"]])
        cancel = af._half(record["fits"].get(decision.CANCEL_KEY, {}), af.OTHER_HALF[r["fold"]])
        want = af.expected(r["label"], cards, stage)
        v = af.verdicts(h, probs, cards, stage, need, cancel)
        for rule, got in ruled(row_of[r["id"]], v, cards).items():
            counts[(_kind(r), rule)][af.outcome(want, got)] += 1
    shipped = am.load("tiny.en")
    if shipped is None:
        raise SystemExit("no answer model for tiny.en in the package: restore it with git")
    near = load(Path(args.near))
    d = Data(out)
    thresholds = record["thresholds"]
    for i, r in enumerate(rows):
        if r["fold"] != data.HELD_OUT:
            continue
        probs = shipped.read(d.clip(i).astype(np.float32))
        for cards, stage in af.NEAR_CONFIGS:
            q = calibration.question(stage, cards)
            heard = near.get(f"{q}/{r['id'].split('/', 1)[1]}")
            if heard is None:
                continue
            v = af.verdicts(heard, probs, cards, stage, thresholds[q],
                            thresholds.get(decision.CANCEL_KEY, math.inf))  # fmt: skip
            for rule, got in ruled(i, v, cards).items():
                counts[("held-out near misses", rule)]["wrong" if got.releases else "held"] += 1
    print(f"{'set':28}" + "".join(f"{rule:>30}" for rule in DECIDE_RULES))
    for kind in sorted({k for k, _ in counts}):
        cells = [counts[(kind, rule)] for rule in DECIDE_RULES]
        print(f"{kind:28}" + "".join(f"{_cell(c):>30}" for c in cells))
    ms = 1000 * np.array(check.seconds)
    print(f"{len(ms)} checks: median {np.median(ms):.0f} ms, 90th percentile "
          f"{np.percentile(ms, 90):.0f} ms (one core)")  # fmt: skip
    return 0


def releases(got: Decision, cards: int) -> tuple[str, ...]:
    """The answer-model classes a release may have been said as: where one card is open, a
    confirm is "yes" or "one" (``answer_model.meanings``)."""
    if cards == 1:
        return ("yes", "card1")
    return (f"card{got.card}",) if got.kind is Kind.CHOOSE else ("yes",)


def _checked(check: Check, row: int, got: Decision, cards: int) -> Decision:
    """``got``, or unclear where it releases and fails the spelling check."""
    from voicegate.voice import decision

    if not got.releases:
        return got
    return got if check.margin(row, releases(got, cards)) >= 0 else decision.UNCLEAR


def _kind(r: dict[str, Any]) -> str:
    """The row of ``decide``'s table a corpus clip counts in."""
    if r["source"] == "fsdd":
        return f"FSDD {r['speaker']}"
    if r["label"] == "yes":
        return "sc yes"
    if r["label"].startswith("card"):
        return "sc one..five (one card)"
    return "sc no/stop" if r["label"] == "cancel" else "sc other words"


def _cell(c: Counter[str]) -> str:
    """Right, refused, wrong and held (no release of no answer) of one rule on one set."""
    kinds = ("right", "refused", "wrong", "held")
    return " ".join(f"{k} {c[k]}" for k in kinds if c[k] or k == "wrong")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("spell", "fit", "report", "decide", "all"))
    parser.add_argument("--out", default=str(ROOT / "bench-out" / "answer-model"))
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=CONTEXT)
    parser.add_argument("--cache", default=str(ROOT / "bench-out" / "hear-tiny.jsonl"))
    parser.add_argument("--near", default=str(ROOT / "bench-out" / "hear-nearmiss.jsonl"))
    args = parser.parse_args()
    steps = {"spell": spell_step, "fit": fit_step, "report": report_step, "decide": decide_step}
    if args.step in ("fit", "all"):
        import torch

        torch.set_num_threads(args.threads)
    for name in ("spell", "fit", "report") if args.step == "all" else (args.step,):
        if steps[name](args):
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
