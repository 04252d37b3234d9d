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


# Takes of theo's "five" that tiny.en, told the question, gives card five under its 0.94 (0.55 to
# 0.87 on the machines measured): int8 scores differ a little between machines, and on one of
# them 5_theo_4 was written "Bye.", so the test asks it of several takes, not one.
FIVES = (4, 6, 10, 11, 14)


@pytest.mark.parametrize("taught", [False, True], ids=["alone", "enrolled"])
async def test_theos_five_is_chosen_only_once_he_has_taught_it(fsdd: Path, taught: bool) -> None:
    """Alone, the recogniser releases none of these takes. Taught, theo's templates of five lie
    nearest, inside his radius, and their likelihood ratio lifts the fused probability past the
    threshold (0.9998 and more, benchmarks/enrol.py fused) wherever a transcript says "Five.": most
    takes are chosen by the rule ``fused``, and none is ever another card (a take heard as
    something else, "Bye.", stays refused)."""
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
    results = [
        await pipeline.decide(
            (fsdd / f"5_theo_{take}.wav").read_bytes(), user="theo", cards=5, stage=Stage.CHOOSE
        )
        for take in FIVES
    ]
    released = [r.decision for r in results if r.decision.releases]
    assert all(d == Decision(Kind.CHOOSE, card=5) for d in released), released
    if taught:
        lifted = [r for r in results if r.rule == "fused"]
        assert len(lifted) >= 3, [(r.rule, r.transcripts, r.probability) for r in results]
        for r in lifted:
            assert r.fused is not None and r.fused > 0.99 > 0.94 > r.probability
    else:
        assert released == [], [(r.rule, r.transcripts, r.probability) for r in results]
