"""Personal answers with the real recogniser: a taught card the recogniser alone is unsure of."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require
from voicegate.gate.types import Decision, Stage
from voicegate.reasons import Kind
from voicegate.store import open_store
from voicegate.voice import audio, models, templates
from voicegate.voice.enrolment import StoreEnrolments, stored
from voicegate.voice.pipeline import VoicePipeline
from voicegate.voice.whisper import FasterWhisperTranscriber

pytestmark = [pytest.mark.whisper, pytest.mark.corpus, pytest.mark.slow]


@pytest.mark.parametrize("taught", [False, True], ids=["alone", "enrolled"])
async def test_theos_one_is_chosen_only_once_he_has_taught_it(fsdd: Path, taught: bool) -> None:
    """1_theo_14: tiny.en, told the question, hears "One." but gives card one only 0.75, under
    its 0.94; theo's templates agree with it, and their likelihood ratio lifts the fused
    probability to 0.99 (benchmarks/enrol.py fused), so the taught card is chosen."""
    require(models.describe("tiny.en").status in ("present", "not_assembled"), "tiny.en")
    store = await open_store("memory")
    for digit in range(1, 6):
        for take in range(3):
            clip = audio.decode((fsdd / f"{digit}_theo_{take}.wav").read_bytes())
            row = stored("theo", f"choose:{digit}", "", templates.features(clip.samples),
                         now=float(take), device="d1")  # fmt: skip
            if taught:
                await store.templates.add(row)
    pipeline = VoicePipeline(
        FasterWhisperTranscriber("tiny.en", device="cpu", threads=2),
        None,
        enrolments=StoreEnrolments(store.templates),
    )
    result = await pipeline.decide(
        (fsdd / "1_theo_14.wav").read_bytes(), user="theo", cards=5, stage=Stage.CHOOSE
    )
    if taught:
        assert (result.decision, result.rule) == (Decision(Kind.CHOOSE, card=1), "fused")
    else:
        assert (result.decision.releases, result.rule) == (False, "unclear")
