"""Train the answer model (``voicegate/voice/answer_model.py``): one command, seeded.

    .venv/bin/pip install -e '.[train]'       # torch, for training only
    .venv/bin/python training/answer_model.py all

Steps, each writing under ``bench-out/answer-model/`` (``--out``):
  features  every clip of ../shared/corpus (as recorded, and two augmented copies) and every
            synthetic clip (training/data.py), through the recogniser's own short-window encoder
            pass (``FasterWhisperTranscriber.short_frames``): ``features.npz``; the held-out near
            misses are also written as WAV files for the recogniser's own hearing
  fit       four fold models, each trained without one fold (out-of-fold probabilities of every
            clip: ``oof.npz``; their weights: ``fold<k>.npz``), and the shipped model on every
            fold: its weights and record go to ``voicegate/voice/answer_models/``, without
            thresholds
  calibrate the thresholds at which the model agrees with a release and at which its cancel
            decides, on the recogniser's own hearings of the corpus (``benchmarks/answer_fusion.py
            fit``; ``--cache``)
  report    the model alone, out of fold (the model card's figures; the decision's are
            ``benchmarks/answer_fusion.py table``)

Real clips are folded by speaker and synthetic ones by phrase (training/data.py), so every
out-of-fold figure is on speakers, or words, that model never heard.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
import wave
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import data
import sound

from voicegate.domain import Decision, Stage
from voicegate.errors import AudioRefused
from voicegate.reasons import Kind
from voicegate.voice import answer_model as am
from voicegate.voice import audio

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261204
# Augmented copies of each real clip, besides the clip as recorded.
REAL_COPIES = 2
# The share of synthetic clips that are augmented (the rest are heard as rendered).
SYNTH_AUGMENTED = 0.5
HIDDEN = 64
EPOCHS = 16
BATCH = 64
LEARNING_RATE = 2e-3
WEIGHT_DECAY = 1e-3
# (question, cards, stage) a clip is decided at, for each kind of threshold.
QUESTIONS = {
    "yes": ((1, Stage.CHOOSE), (1, Stage.FINAL)),
    "card": ((2, Stage.CHOOSE), (3, Stage.CHOOSE), (4, Stage.CHOOSE), (5, Stage.CHOOSE)),
}


def features(args: argparse.Namespace) -> int:
    """Encode every clip's copies; write features.npz and the held-out clips' WAV files."""
    from voicegate.voice.whisper import FasterWhisperTranscriber

    out = Path(args.out)
    (out / "heldout").mkdir(parents=True, exist_ok=True)
    recogniser = FasterWhisperTranscriber(args.model, threads=args.threads)
    items = [*data.corpus(), *data.synthetic(SEED, args.more)]
    render = sound.piper(SEED)
    frames: list[np.ndarray[Any, Any]] = []
    rows: list[dict[str, Any]] = []
    if (out / "items.jsonl").exists() and not args.again:
        # Clips already encoded are kept: the same seed gives the same audio.
        with np.load(out / "features.npz") as z:
            every, offsets = z["frames"], z["offsets"]
        frames = [every[a:b] for a, b in pairwise(offsets)]
        rows = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    done = {r["id"] for r in rows}
    started = time.perf_counter()
    for n, item in enumerate(items, 1):
        if item.id in done:
            continue
        clean = _audio(item, render)
        if clean is None:
            continue
        copies = [clean]
        rng = np.random.default_rng(_seed(item.id))
        if item.source in ("fsdd", "sc"):
            copies += [sound.augment(clean, rng) for _ in range(REAL_COPIES)]
        elif item.fold != data.HELD_OUT and rng.random() < SYNTH_AUGMENTED:
            copies = [sound.augment(clean, rng)]
        if item.fold == data.HELD_OUT:
            _write(out / "heldout" / f"{item.id.split('/')[1]}.wav", clean)
        encoded = recogniser.short_frames(copies)
        for copy, f in enumerate(encoded):
            frames.append(f.astype(np.float16))
            real = item.source in ("fsdd", "sc")
            changed = copy > 0 or clean is not copies[0]
            rows.append({**_row(item), "copy": copy if real else 0, "augmented": changed})
        if n % 500 == 0:
            print(f"{n}/{len(items)} clips, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    offsets = np.cumsum([0, *(len(f) for f in frames)])
    np.savez(out / "features.npz", frames=np.concatenate(frames), offsets=offsets)
    (out / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} copies of {len(items)} clips in {time.perf_counter() - started:.0f} s")
    return 0


def _audio(
    item: data.Item, render: Callable[[str, int], sound.Array]
) -> np.ndarray[Any, Any] | None:
    if item.path:
        try:
            return audio.decode(Path(item.path).read_bytes()).samples
        except AudioRefused:  # silent or flat background clips: the server never hears them
            return None
    if item.source == "piper":
        return render(item.text, item.speed)
    return sound.espeak(item.text, item.voice, item.speed, item.pitch)


def _row(item: data.Item) -> dict[str, Any]:
    return {k: getattr(item, k) for k in item.__slots__}


def _seed(name: str) -> int:
    return int(hashlib.sha256(f"{SEED}/{name}".encode()).hexdigest()[:8], 16)


def _write(path: Path, x: np.ndarray[Any, Any]) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sound.SR)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())


class Data:
    """The encoded copies, their classes and folds."""

    def __init__(self, out: Path) -> None:
        with np.load(out / "features.npz") as z:
            frames, offsets = z["frames"], z["offsets"]
        # As the model reads them (``answer_model.paired``), once.
        paired = [am.paired(frames[a:b]).astype(np.float16) for a, b in pairwise(offsets)]
        self.frames = np.concatenate(paired)
        self.offsets = np.cumsum([0, *(len(c) for c in paired)])
        self.rows = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
        self.labels = np.array([am.CLASSES.index(r["label"]) for r in self.rows])
        self.folds = np.array([r["fold"] for r in self.rows])
        # What training teaches: the classes, and after ``teach_near_misses`` each answer's near
        # misses as a class of their own (read as OTHER: ``AnswerModel.refusals``).
        self.refusals: tuple[str, ...] = ()
        self.targets = self.labels

    def teach_near_misses(self) -> None:
        """Teach each answer's near misses ("tooth" for card2) as a class apart from other words."""
        near = [data.near_class(r) for r in self.rows]
        self.refusals = tuple(sorted({n for n in near if n}))
        outputs = (*am.CLASSES, *self.refusals)
        self.targets = np.array(
            [outputs.index(n) if n else k for n, k in zip(near, self.labels, strict=True)]
        )

    def clip(self, i: int) -> np.ndarray[Any, Any]:
        return self.frames[self.offsets[i] : self.offsets[i + 1]]


def train(
    d: Data, rows: Sequence[int], seed: int, epochs: int = EPOCHS, near_weight: float = 1.0
) -> dict[str, Any]:
    """The network of ``answer_model.AnswerModel`` trained on ``rows``; its arrays. Each near
    miss of an answer ("tooth") weighs ``near_weight`` times in the loss."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x_all = np.concatenate([d.clip(i) for i in rows]).astype(np.float32)
    mean = x_all.mean(axis=0)
    scale = x_all.std(axis=0) + 1e-3
    del x_all
    width = d.frames.shape[1]
    classes = len(am.CLASSES) + len(d.refusals)

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hidden = nn.Linear(width, HIDDEN)
            self.attention = nn.Linear(HIDDEN, 1)
            self.out = nn.Linear(2 * HIDDEN, classes)
            self.drop_in = nn.Dropout(0.1)
            self.drop = nn.Dropout(0.3)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.hidden(self.drop_in(x)))
            a = self.attention(h).squeeze(-1).masked_fill(~mask, -1e9)
            w = torch.softmax(a, dim=-1)
            pooled = (w.unsqueeze(-1) * h).sum(1)
            top = h.masked_fill(~mask.unsqueeze(-1), 0.0).max(1).values
            return self.out(self.drop(torch.cat([pooled, top], dim=-1)))  # type: ignore[no-any-return]

    net = Head()
    counts = np.bincount(d.targets[list(rows)], minlength=classes).astype(np.float64)
    # Rare classes weigh more, by the square root of their rarity: "wait" has no real speech.
    weights = torch.tensor((counts.max() / np.maximum(counts, 1)) ** 0.5, dtype=torch.float32)
    near = np.array([1.0 + (near_weight - 1.0) * bool(data.near_class(r)) for r in d.rows])
    opt = torch.optim.AdamW(net.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    steps = epochs * (len(rows) // BATCH + 1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LEARNING_RATE, total_steps=steps)
    order = np.array(rows)
    lengths = d.offsets[order + 1] - d.offsets[order]
    mean_t, scale_t = torch.tensor(mean), torch.tensor(scale)
    for _ in range(epochs):
        net.train()
        for batch in length_batches(order, lengths, rng):
            x, mask = _padded(d, batch, mean_t, scale_t)
            target = torch.tensor(d.targets[batch])
            clip_weights = torch.tensor(near[batch], dtype=torch.float32)
            loss = weighted_loss(net(x, mask), target, weights, clip_weights)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return {
        "mean": mean,
        "scale": scale,
        "hidden": net.hidden.weight.detach().numpy().T.copy(),
        "hidden_bias": net.hidden.bias.detach().numpy().copy(),
        "attention": np.concatenate(
            [net.attention.weight.detach().numpy()[0], net.attention.bias.detach().numpy()]
        ),
        "out": net.out.weight.detach().numpy().T.copy(),
        "out_bias": net.out.bias.detach().numpy().copy(),
    }


def length_batches(
    order: np.ndarray[Any, Any], lengths: np.ndarray[Any, Any], rng: np.random.Generator
) -> list[np.ndarray[Any, Any]]:
    """One epoch's batches of ``order`` (``BATCH`` clips each): clips of similar ``lengths``
    together (little padding), the batches in a random order."""
    shuffled = order[np.lexsort((rng.random(len(order)), lengths // 8))]
    batches = [shuffled[k : k + BATCH] for k in range(0, len(shuffled), BATCH)]
    rng.shuffle(batches)
    return batches


def weighted_loss(logits: Any, target: Any, class_weights: Any, clip_weights: Any) -> Any:
    """Cross-entropy, each clip weighing its class's weight times its own (``near_weight`` for a
    near miss, else 1), over the batch's weights: with every clip at 1, exactly
    ``CrossEntropyLoss(weight=class_weights)``."""
    from torch.nn import functional

    w = class_weights[target] * clip_weights
    return (functional.cross_entropy(logits, target, reduction="none") * w).sum() / w.sum()


def _padded(
    d: Data, batch: Sequence[int] | np.ndarray[Any, Any], mean: Any, scale: Any
) -> tuple[Any, Any]:
    import torch

    clips = [d.clip(i) for i in batch]
    longest = max(len(c) for c in clips)
    x = np.zeros((len(clips), longest, d.frames.shape[1]), np.float32)
    mask = np.zeros((len(clips), longest), bool)
    for k, c in enumerate(clips):
        x[k, : len(c)] = c
        mask[k, : len(c)] = True
    xt = (torch.from_numpy(x) - mean) / scale
    return xt * torch.from_numpy(mask).unsqueeze(-1), torch.from_numpy(mask)


def predict(model: am.AnswerModel, d: Data, rows: Sequence[int]) -> np.ndarray[Any, Any]:
    """P(class) of each row, by the shipped inference code (its frames are paired already)."""
    return np.stack([model.read(d.clip(i).astype(np.float32)) for i in rows])


def fit(args: argparse.Namespace) -> int:
    """Fold models, out-of-fold probabilities, thresholds and the shipped weights."""
    out = Path(args.out)
    d = Data(out)
    if args.near_classes:
        d.teach_near_misses()
    n = len(d.rows)
    oof = np.full((n, len(am.CLASSES)), np.nan)
    held = [i for i in range(n) if d.folds[i] == data.HELD_OUT]
    by_fold: dict[int, np.ndarray[Any, Any]] = {}
    started = time.perf_counter()
    for fold in range(data.FOLDS):
        rows = [i for i in range(n) if d.folds[i] not in (fold, data.HELD_OUT)]
        weights = train(d, rows, args.seed + fold, args.epochs, args.near_weight)
        model = am.from_arrays(args.model, weights, {"classes": am.CLASSES, "refusals": d.refusals})
        # Kept for what needs a model that never heard a speaker (benchmarks/enrol.py, fusion.py).
        np.savez(out / f"fold{fold}.npz", **weights)
        mine = [i for i in range(n) if d.folds[i] == fold]
        oof[mine] = predict(model, d, mine)
        by_fold[fold] = predict(model, d, held)
        print(f"fold {fold}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    every = [i for i in range(n) if d.folds[i] != data.HELD_OUT]
    weights = train(d, every, args.seed, args.epochs, args.near_weight)
    # No thresholds yet: new weights are calibrated anew in the decision (``calibrate``).
    record = {
        "classes": list(am.CLASSES),
        **({"refusals": list(d.refusals)} if d.refusals else {}),
        "encoder": args.model,
        "source": f"training/answer_model.py all --model {args.model}{_weighed(args)} "
        f"(seed {args.seed})",
        "trained": {"copies": sum(1 for f in d.folds if f != data.HELD_OUT), "epochs": args.epochs,
                    "hidden": HIDDEN, "machine": platform.processor() or platform.machine(),
                    **({"near_weight": args.near_weight} if args.near_weight != 1 else {})},
    }  # fmt: skip
    shipped = am.from_arrays(args.model, weights, record)
    final = predict(shipped, d, held)
    np.savez(out / "oof.npz", oof=oof, held=np.array(held), final=final,
             **{f"fold{k}": v for k, v in by_fold.items()})  # type: ignore[arg-type]  # fmt: skip
    folder = ROOT / "voicegate" / "voice" / "answer_models"
    folder.mkdir(exist_ok=True)
    np.savez_compressed(folder / f"{args.model}.npz",
                        **{k: np.asarray(v, np.float32) for k, v in weights.items()})  # type: ignore[arg-type]  # fmt: skip
    (folder / f"{args.model}.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


def _weighed(args: argparse.Namespace) -> str:
    return f" --near-weight {args.near_weight:g}" if args.near_weight != 1 else ""


def calibrate(args: argparse.Namespace) -> int:
    """The thresholds at which the answer model agrees with a release (``decision.agree``) and
    at which its cancel decides (``decision.heard_cancel``), fitted on the recogniser's own
    hearings of the corpus (``benchmarks/answer_fusion.py``)."""
    if args.model != "tiny.en":
        # answer_fusion hears with tiny.en and writes tiny.en's record.
        print(f"calibrate fits tiny.en's answer model only, not {args.model}", file=sys.stderr)
        return 1
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import answer_fusion

    if not Path(args.cache).exists():
        print(f"no hearings at {args.cache}: first run\n  PYTHONPATH=.:benchmarks .venv/bin/python "
              f"benchmarks/calibrate.py hear --model {args.model} --fsdd-takes 10 --cache "
              f"{args.cache}", file=sys.stderr)  # fmt: skip
        return 1
    # Every question fitted afresh for this run's weights: the record's fits are replaced.
    return int(
        answer_fusion.fit(
            argparse.Namespace(cache=args.cache, add="", questions=None, dir=args.out)
        )
    )


def expected(label: str, cards: int, stage: Stage) -> Decision:
    """What a clip of class ``label`` must decide at a set of ``cards`` cards at ``stage``."""
    onehot = np.eye(len(am.CLASSES))[am.CLASSES.index(label)]
    p = am.meanings(onehot, cards, stage)
    return max(p, key=lambda m: p[m])


def chosen(probs: np.ndarray[Any, Any], cards: int, stage: Stage, need: float) -> Decision:
    """What the answer model alone decides: its likeliest answer, at ``need`` or more."""
    p = am.meanings(probs, cards, stage)
    best = max(p, key=lambda m: p[m])
    return best if best.kind is not Kind.REFUSE and p[best] >= need else Decision(Kind.REFUSE)


def report(args: argparse.Namespace) -> int:
    """The model card's tables, from the out-of-fold probabilities."""
    out = Path(args.out)
    d = Data(out)
    with np.load(out / "oof.npz") as f:
        z = dict(f)
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for i, r in enumerate(d.rows):
        if d.folds[i] == data.HELD_OUT or (r["copy"] != 0 and not args.augmented):
            continue
        for configs in QUESTIONS.values():
            for cards, stage in configs:
                if r["source"] == "fsdd" and cards != 5:
                    continue
                want = expected(r["label"], cards, stage)
                got = chosen(z["oof"][i], cards, stage, args.need)
                table[_set(r, cards, stage)][_outcome(want, got)] += 1
    lines: list[str] = [
        f"The answer model alone, out of fold, its likeliest answer at {args.need}:"
    ]
    lines.append("| set | right | refused | wrong release | held (no answer, nothing released) |")
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    for key in sorted(table):
        c = table[key]
        lines.append(f"| {key} | {c['right']} | {c['refused']} | {c['wrong']} | {c['held']} |")
    nm: Counter[str] = Counter()
    for probs in z["final"]:
        for configs in QUESTIONS.values():
            for cards, stage in configs:
                got = chosen(probs, cards, stage, args.need)
                nm["released" if got.releases else "held"] += 1
    lines.append("")
    lines.append(f"held-out near misses, shipped model alone, 1 to 5 cards and final: {dict(nm)}")
    print("\n".join(lines))
    return 0


def _set(r: dict[str, Any], cards: int, stage: Stage) -> str:
    where = "final" if stage is Stage.FINAL else f"{cards} cards"
    if r["source"] == "fsdd":
        return f"fsdd {r['speaker']}, {where}"
    if r["source"] == "sc":
        word = r["text"]
        digit = r["label"].startswith("card")
        group = (
            word if word in ("yes", "no", "stop") else ("digits 1-5" if digit else "other words")
        )
        return f"sc {group}, {where}"
    return f"synthetic {'answers' if r['label'] != am.OTHER else 'others'}, {where}"


def _outcome(want: Decision, got: Decision) -> str:
    if want.kind is Kind.REFUSE:
        return "wrong" if got.releases else "held"
    if got == want:
        return "right"
    return "wrong" if got.releases else "refused"


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def main() -> int:
    """Command line: features, fit, report, or all three."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("features", "fit", "calibrate", "report", "all"))
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--out", default=str(ROOT / "bench-out" / "answer-model"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument(
        "--near-classes", action="store_true", help="fit: each answer's near misses a class apart"
    )
    parser.add_argument(
        "--near-weight", type=_positive, default=1.0, help="fit: a near miss weighs this many times"
    )
    parser.add_argument(
        "--seed", type=int, default=SEED, help="fit: the networks' seed (the data's is fixed)"
    )
    parser.add_argument("--augmented", action="store_true", help="report augmented copies too")
    parser.add_argument("--again", action="store_true", help="encode every clip, not only new")
    parser.add_argument(
        "--more", action="store_true", help="features: the second round of negatives (not shipped)"
    )
    parser.add_argument(
        "--cache",
        default=str(ROOT / "bench-out" / "hear-tiny.jsonl"),
        help="the recogniser's hearings of the corpus (benchmarks/calibrate.py)",
    )
    parser.add_argument("--need", type=float, default=0.5, help="report: the model alone at")
    args = parser.parse_args()
    steps = {"features": features, "fit": fit, "calibrate": calibrate, "report": report}
    for name in tuple(steps) if args.step == "all" else (args.step,):
        if steps[name](args):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
