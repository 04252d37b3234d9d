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
async def test_theos_five_is_chosen_only_once_he_has_taught_it(fsdd: Path, taught: bool) -> None:
    """5_theo_4: tiny.en, told the question, hears "Five." but gives card five only 0.55, under
    its 0.94; theo's templates of five lie nearest (1.50, inside his radius 1.95; the next card
    at 3.63), and their likelihood ratio lifts the fused probability to 0.9999
    (benchmarks/enrol.py fused on bench-out/hear-tiny-prompted-takes30.jsonl), so the taught
    card is chosen."""
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
        (fsdd / "5_theo_4.wav").read_bytes(), user="theo", cards=5, stage=Stage.CHOOSE
    )
    if taught:
        assert (result.decision, result.rule) == (Decision(Kind.CHOOSE, card=5), "fused")
        assert result.fused is not None and result.fused > 0.99 > 0.94 > result.probability
    else:
        assert (result.decision.releases, result.rule) == (False, "unclear")
