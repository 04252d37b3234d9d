"""The answer model over the real tiny.en encoder: the shipped weights on real and synthetic
speech, each path of the decision it joins, and training from a handful of clips."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.conftest import CORPUS, FIXTURES, require, training_script
from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind
from voicegate.voice import answer_model as am
from voicegate.voice import models
from voicegate.voice.audio import decode
from voicegate.voice.pipeline import VoicePipeline
from voicegate.voice.whisper import FasterWhisperTranscriber

pytestmark = pytest.mark.whisper
CLIPS = FIXTURES / "clips"


@pytest.fixture(scope="module")
def tiny() -> Iterator[FasterWhisperTranscriber]:
    require(models.describe("tiny.en").status == "present", "the tiny.en model")
    yield FasterWhisperTranscriber("tiny.en", device="cpu", threads=2)


@pytest.fixture(scope="module")
def trainer() -> ModuleType:
    """training/answer_model.py, for what needs no speech rendered."""
    return training_script("answer_model")


@pytest.fixture(scope="module")
def training(trainer: ModuleType) -> ModuleType:
    require(shutil.which("espeak-ng") is not None, "espeak-ng")
    return trainer


def clip(name: str) -> np.ndarray:
    return decode((CLIPS / name).read_bytes()).samples


def hear(tiny: FasterWhisperTranscriber, samples: np.ndarray) -> np.ndarray:
    model = tiny.answer_model
    assert model is not None
    return model.probabilities(tiny.short_frames([samples])[0])


def test_the_recogniser_carries_the_answer_models_thresholds(
    tiny: FasterWhisperTranscriber,
) -> None:
    assert tiny.answer_model is not None
    assert tiny.calibration.answers == tiny.answer_model.thresholds


def test_the_short_window_keeps_the_clip_and_a_half_second(tiny: FasterWhisperTranscriber) -> None:
    samples = clip("fsdd_2_theo_0.flac")
    (frames,) = tiny.short_frames([samples])
    # lead-in to half a second, the clip, then TAIL_FRAMES of 20 ms
    assert frames.shape[1] == 384
    assert len(frames) <= -(-(8000 + len(samples)) // am.ENCODER_HOP) + am.TAIL_FRAMES


@pytest.mark.parametrize(
    ("name", "cards", "stage", "want"),
    [
        ("piper_yes.flac", 1, Stage.FINAL, Decision(Kind.CONFIRM)),
        ("espeak_yes.flac", 1, Stage.CHOOSE, Decision(Kind.CONFIRM)),
        ("fsdd_3_nicolas_0.flac", 5, Stage.CHOOSE, Decision(Kind.CHOOSE, card=3)),
        ("piper_the_second_one.flac", 3, Stage.CHOOSE, Decision(Kind.CHOOSE, card=2)),
        ("espeak_cancel.flac", 2, Stage.CHOOSE, Decision(Kind.CANCEL)),
        ("piper_more_time.flac", 3, Stage.CHOOSE, Decision(Kind.MORE_TIME)),
    ],
)
def test_the_shipped_model_hears_answers(
    tiny: FasterWhisperTranscriber, name: str, cards: int, stage: Stage, want: Decision
) -> None:
    p = am.meanings(hear(tiny, clip(name)), cards, stage)
    assert max(p, key=lambda d: p[d]) == want


def test_the_shipped_model_holds_real_other_digits(tiny: FasterWhisperTranscriber) -> None:
    p = am.meanings(hear(tiny, clip("fsdd_7_theo_0.flac")), 5, Stage.CHOOSE)
    assert max(p, key=lambda d: p[d]).kind is Kind.REFUSE


async def decide(  # type: ignore[no-untyped-def]
    tiny: FasterWhisperTranscriber, samples: np.ndarray, cards: int, stage: Stage = Stage.CHOOSE
):
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, samples, 16_000, format="WAV")
    pipeline = VoicePipeline(tiny, None)
    return await pipeline.decide(buf.getvalue(), user="u", cards=cards, stage=stage)


@pytest.mark.parametrize("voice", ["en-us", "en-gb", "en-us+f3", "en-gb-scotland"])
async def test_a_spoken_near_miss_of_a_card_releases_nothing(
    tiny: FasterWhisperTranscriber, training: ModuleType, voice: str
) -> None:
    """espeak-ng "tooth" chose card two of four in these voices before the answer model, heard
    "Two." (a lexicon sound-alike, so a word the model was taught; docs/voice.md)."""
    import sound

    result = await decide(tiny, sound.espeak("tooth", voice, 175, 50), 4)
    assert not result.decision.releases, result


async def test_a_release_carries_the_answer_models_probability(
    tiny: FasterWhisperTranscriber,
) -> None:
    result = await decide(tiny, clip("fsdd_2_theo_0.flac"), 5)
    assert result.decision == Decision(Kind.CHOOSE, card=2)
    assert result.heard is not None
    assert tiny.calibration.answers is not None
    assert result.heard >= tiny.calibration.answers["card"]
    assert "answer_model" in result.timings_ms


def test_a_near_miss_is_taught_as_a_class_of_the_answer_it_is_near(training: ModuleType) -> None:
    near_class = training.data.near_class
    assert near_class({"label": "other", "text": "tooth", "near": "two"}) == "near_card2"
    # A real recording of a listed near miss (speech_commands' "bird") is one too.
    assert near_class({"label": "other", "text": "bird"}) == "near_card3"
    assert near_class({"label": "other", "text": "hello"}) == ""
    assert near_class({"label": "card2", "text": "two"}) == ""


@pytest.mark.slow
def test_training_on_a_handful_of_clips_gives_a_working_model(
    tiny: FasterWhisperTranscriber, training: ModuleType, tmp_path: Path
) -> None:
    import importlib.util
    import json

    require(importlib.util.find_spec("torch") is not None, "torch (the [train] extra)")

    import sound

    said = [("yes", "yes", ""), ("no", "cancel", ""), ("two", "card2", ""),
            ("hello", "other", ""), ("tooth", "other", "two")]  # fmt: skip
    frames, rows = [], []
    for voice in ("en-us", "en-gb", "en-us+f3"):
        for text, label, near in said:
            (f,) = tiny.short_frames([sound.espeak(text, voice, 150, 50)])
            frames.append(f.astype(np.float16))
            rows.append({"label": label, "fold": 0, "copy": 0, "source": "espeak", "id": text,
                         "text": text, "near": near})  # fmt: skip
    np.savez(tmp_path / "features.npz", frames=np.concatenate(frames),
             offsets=np.cumsum([0, *(len(f) for f in frames)]))  # fmt: skip
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = training.Data(tmp_path)
    d.teach_near_misses()
    assert d.refusals == ("near_card2",)
    weights = training.train(d, list(range(len(rows))), seed=1, epochs=40)
    model = am.from_arrays("tiny.en", weights, {"classes": am.CLASSES, "refusals": d.refusals})
    heard = [model.probabilities(f.astype(np.float32)) for f in frames[: len(said)]]
    assert all(p.sum() == pytest.approx(1.0) for p in heard)
    assert [am.CLASSES[int(np.argmax(p))] for p in heard] == [
        "yes", "cancel", "card2", "other", "other"
    ]  # fmt: skip


def test_the_weighted_loss_with_every_clip_at_one_is_the_class_weighted_one(
    trainer: ModuleType,
) -> None:
    import importlib.util

    require(importlib.util.find_spec("torch") is not None, "torch (the [train] extra)")
    import torch

    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(16, 9, generator=gen)
    target = torch.randint(0, 9, (16,), generator=gen)
    classes = torch.rand(9, generator=gen) + 0.5
    ones = torch.ones(16)
    want = torch.nn.CrossEntropyLoss(weight=classes)(logits, target)
    assert float(trainer.weighted_loss(logits, target, classes, ones)) == pytest.approx(float(want))
    # A clip weighing twice counts as that clip twice over.
    twice = torch.cat([torch.ones(15), torch.tensor([2.0])])
    doubled = torch.nn.CrossEntropyLoss(weight=classes)(
        torch.cat([logits, logits[-1:]]), torch.cat([target, target[-1:]])
    )
    assert float(trainer.weighted_loss(logits, target, classes, twice)) == pytest.approx(
        float(doubled)
    )


@pytest.mark.slow
def test_near_misses_weighing_more_are_heard_as_other_more(
    trainer: ModuleType, tmp_path: Path
) -> None:
    """``fit --near-weight``: the same clips, near misses weighing 4x, push the near misses'
    probability of anything else up (frames drawn so that "two" and its near miss overlap)."""
    import importlib.util
    import json

    require(importlib.util.find_spec("torch") is not None, "torch (the [train] extra)")
    rng = np.random.default_rng(7)
    frames, rows = [], []
    for k in range(60):
        label, near, centre = [("card2", "", 0.0), ("other", "two", 0.6), ("other", "", 3.0)][k % 3]
        frames.append(rng.normal(centre, 1.0, (12, 8)).astype(np.float16))
        rows.append({"label": label, "fold": 0, "copy": 0, "source": "espeak", "id": str(k),
                     "text": "tooth" if near else label, "near": near})  # fmt: skip
    np.savez(tmp_path / "features.npz", frames=np.concatenate(frames),
             offsets=np.cumsum([0, *(len(f) for f in frames)]))  # fmt: skip
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = trainer.Data(tmp_path)
    every = list(range(len(rows)))
    misses = [i for i, r in enumerate(rows) if r["near"]]

    def other(weight: float) -> float:
        w = trainer.train(d, every, seed=1, epochs=30, near_weight=weight)
        model = am.from_arrays("tiny.en", w, {"classes": am.CLASSES})
        return float(np.mean([model.read(d.clip(i).astype(np.float32))[0] for i in misses]))

    assert other(4.0) > other(1.0) + 0.05


async def test_a_real_no_the_words_miss_is_cancelled_by_the_sound(
    tiny: FasterWhisperTranscriber,
) -> None:
    """A real speech_commands "no" that tiny.en writes "Now.": the grammar reads no answer, and
    the answer model's cancel decides (``decision.heard_cancel``)."""
    path = CORPUS / "speech_commands" / "no" / "26b28ea7_nohash_0.wav"
    require(path.is_file(), f"the speech_commands clip {path}")
    result = await decide(tiny, decode(path.read_bytes()).samples, 1, Stage.FINAL)
    assert result.transcripts[0].strip(" .").lower() == "now"
    assert result.decision == Decision(Kind.CANCEL) and result.rule == "heard_cancel"
    assert tiny.calibration.answers is not None and result.heard is not None
    assert result.heard >= tiny.calibration.answers["cancel"]
