"""The answer model: a small trained classifier over Whisper's encoder frames for the closed set
of answers, and "anything else".

Pure numpy on arrays: frames in, probabilities out. The frames are the recogniser's encoder
output over a short window (the clip after its lead-in, then one second of quiet, rounded up to
whole seconds: ``voicegate.voice.windows``), so hearing an answer this way costs one encoder pass
over a few seconds. The network is one layer per frame, attention pooling and a softmax over
``CLASSES``; its weights ship beside this module (``answer_models/<model>.npz``), with a model
card (``answer_models/README.md``) that says what it was trained on and how
(``training/answer_model.py``).

The transcript cannot tell a near miss from the answer ("tooth" is written "Two."): the sound
can, and this model was taught thousands of words that are not answers for exactly that. In the
decision it is the view that must agree before anything is released, and where the words said
nothing its cancel decides (``voice/decision.py``, rules 4 and 5).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

import numpy as np
import numpy.typing as npt

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind

Matrix = npt.NDArray[np.float32]

# Encoder frames (20 ms) kept after the clip ends: the short window's rounding to whole seconds
# would otherwise give one clip 1 s of quiet and the next almost 2 s.
TAIL_FRAMES = 25
ENCODER_HOP = 320
OTHER = "other"
CARDS = 5
# The closed vocabulary: anything else, the three answers that are not a card, and each card.
CLASSES: tuple[str, ...] = (OTHER, "yes", "cancel", "wait", *(f"card{k}" for k in range(1, 6)))
CONFIRM = Decision(Kind.CONFIRM)
CANCEL = Decision(Kind.CANCEL)
MORE_TIME = Decision(Kind.MORE_TIME)


@dataclass(frozen=True, slots=True)
class AnswerModel:
    """Trained weights over one recogniser's encoder frames (``encoder``: its model name)."""

    encoder: str
    mean: Matrix = field(repr=False)
    scale: Matrix = field(repr=False)
    hidden: Matrix = field(repr=False)
    hidden_bias: Matrix = field(repr=False)
    attention: Matrix = field(repr=False)
    out: Matrix = field(repr=False)
    out_bias: Matrix = field(repr=False)
    # The probability a release needs, by question ("card" or "yes"), and the sound's cancel
    # ("cancel"; ``decision.heard_cancel``); where they came from.
    thresholds: dict[str, float] = field(default_factory=dict)
    source: str = ""
    # Outputs after ``CLASSES`` that are "anything else" too (the near misses of each answer,
    # taught apart from other words): their probability is OTHER's.
    refusals: tuple[str, ...] = ()

    @property
    def width(self) -> int:
        """The encoder frame width these weights read."""
        return int(self.mean.shape[-1])

    def probabilities(self, frames: Matrix) -> npt.NDArray[np.float64]:
        """P(class | frames) over ``CLASSES`` for one clip's encoder frames (T x width)."""
        x = np.asarray(frames, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.width or len(x) == 0:
            raise ValueError(f"frames must be T x {self.width} with T > 0, not {x.shape}")
        return self.read(paired(x))

    def read(self, x: Matrix) -> npt.NDArray[np.float64]:
        """P(class) for frames already ``paired``, as training holds them (pairing them again
        would halve their rate a second time)."""
        p = softmax(self.logits(np.asarray(x, dtype=np.float32)))
        p[0] += p[len(CLASSES) :].sum()
        return p[: len(CLASSES)]

    def logits(self, x: Matrix) -> npt.NDArray[np.float64]:
        """The network's scores of ``CLASSES``, then of ``refusals``, before the softmax."""
        return np.asarray(self.embedding(x) @ self.out + self.out_bias, dtype=np.float64)

    def embedding(self, x: Matrix) -> npt.NDArray[np.float64]:
        """What the outputs read of paired frames: the hidden layer pooled by attention, then
        its maximum over time (2 x the hidden width)."""
        h = np.maximum((x - self.mean) / self.scale @ self.hidden + self.hidden_bias, 0.0)
        a = h @ self.attention[:-1] + self.attention[-1]
        w = softmax(a.astype(np.float64))
        return np.concatenate([w @ h, h.max(axis=0)])


def kept(frames: Matrix, heard: int) -> Matrix:
    """The frames of a short window the model reads: the ``heard`` samples (the clip after its
    lead-in), then ``TAIL_FRAMES``."""
    end = -(-heard // ENCODER_HOP) + TAIL_FRAMES
    return np.ascontiguousarray(frames[: max(1, end)], dtype=np.float32)


def paired(frames: Matrix) -> Matrix:
    """Each two neighbouring frames averaged (40 ms a frame): half the work, the same words."""
    x = np.asarray(frames, dtype=np.float32)
    if len(x) % 2:
        x = np.concatenate([x, x[-1:]])
    return np.ascontiguousarray(x.reshape(len(x) // 2, 2, x.shape[1]).mean(axis=1))


def softmax(z: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The softmax of a vector, computed stably."""
    v = np.asarray(z, dtype=np.float64)
    e = np.exp(v - v.max())
    return np.asarray(e / e.sum(), dtype=np.float64)


def meanings(probs: npt.ArrayLike, cards: int, stage: Stage) -> dict[Decision, float]:
    """The probability of each answer a set of ``cards`` cards at ``stage`` can take.

    Whatever cannot answer this question counts as no answer (``None``): a card that is not
    open, a number at the final card, a "yes" among several cards (the grammar refuses it as
    ambiguous). On a single card at the choose stage, "one" and "yes" release the same action,
    so they are one answer: confirm.
    """
    p = dict(zip(CLASSES, np.asarray(probs, dtype=np.float64).tolist(), strict=True))
    out: dict[Decision, float] = {CANCEL: p["cancel"], MORE_TIME: p["wait"]}
    nothing = p[OTHER]
    several = stage is Stage.CHOOSE and cards > 1
    if stage is Stage.CHOOSE and cards == 1:
        out[CONFIRM] = p["yes"] + p["card1"]
    elif several:
        nothing += p["yes"]
    else:
        out[CONFIRM] = p["yes"]
    for k in range(1, CARDS + 1):
        if several and k <= cards:
            out[Decision(Kind.CHOOSE, card=k)] = p[f"card{k}"]
        elif not (stage is Stage.CHOOSE and cards == 1 and k == 1):
            nothing += p[f"card{k}"]
    out[Decision(Kind.REFUSE)] = nothing
    return out


def load(encoder: str) -> AnswerModel | None:
    """The shipped answer model over ``encoder``'s frames; None where none was trained."""
    folder = files("voicegate.voice") / "answer_models"
    weights = folder / f"{encoder}.npz"
    if not weights.is_file():
        return None
    with weights.open("rb") as fh:
        arrays = dict(np.load(fh, allow_pickle=False))
    record = json.loads((folder / f"{encoder}.json").read_text(encoding="utf-8"))
    return from_arrays(encoder, arrays, record)


def from_arrays(encoder: str, arrays: dict[str, Any], record: dict[str, Any]) -> AnswerModel:
    """An ``AnswerModel`` from its arrays and its record (thresholds and their source)."""
    if tuple(record.get("classes", ())) != CLASSES:
        raise ValueError(f"the answer model's classes are {record.get('classes')}, not {CLASSES}")
    refusals = tuple(str(r) for r in record.get("refusals", ()))
    if np.shape(arrays["out"])[-1] != len(CLASSES) + len(refusals):
        raise ValueError(f"the answer model has {np.shape(arrays['out'])[-1]} outputs, not "
                         f"{len(CLASSES)} classes and {len(refusals)} refusals")  # fmt: skip

    def f32(name: str) -> Matrix:
        return np.ascontiguousarray(arrays[name], dtype=np.float32)

    return AnswerModel(
        encoder,
        f32("mean"),
        f32("scale"),
        f32("hidden"),
        f32("hidden_bias"),
        f32("attention"),
        f32("out"),
        f32("out_bias"),
        {str(k): float(v) for k, v in record.get("thresholds", {}).items()},
        str(record.get("source", "")),
        refusals,
    )
