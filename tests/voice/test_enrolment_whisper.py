"""Personal answers with the real recogniser: a taught card the recogniser alone is unsure of."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require
from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind
from voicegate.store import open_store
from voicegate.store.base import Store
from voicegate.voice import audio, models
from voicegate.voice.decision import Rule
from voicegate.voice.enrolment import StoreEnrolments, stored
from voicegate.voice.pipeline import VoicePipeline
from voicegate.voice.whisper import FasterWhisperTranscriber

pytestmark = [pytest.mark.whisper, pytest.mark.corpus, pytest.mark.slow]


# Takes of theo's "five" that tiny.en, told the question, left under its card threshold on one
# machine or another (2026-12-02: at the prior -3, 0.82 for take 1 and 0.948 for take 11, both
# heard "Five.", takes 2, 4 and 5 heard "Bye."; at -5 on an "AMD EPYC" machine, take 1 released
# alone at 0.986, takes 4 and 32 heard "Five." at 0.949 and 0.957; with the card prompt that
# says "not" and the threshold 0.95, takes 4 and 14 heard "Five." at 0.939 and 0.942). int8
# scores differ between machines, so the test asks it of several takes, compares taught with
# alone on each, and needs one of them lifted.
FIVES = (1, 2, 4, 5, 11, 14, 32)


async def taught_by(fsdd: Path, speaker: str) -> tuple[Store, FasterWhisperTranscriber]:
    """A memory store holding ``speaker``'s takes 0-2 of "one".."five" as tiny.en's frames."""
    require(models.describe("tiny.en").status in ("present", "not_assembled"), "tiny.en")
    store = await open_store("memory")
    recogniser = FasterWhisperTranscriber("tiny.en", device="cpu", threads=2)
    for digit in range(1, 6):
        for take in range(3):
            clip = audio.decode((fsdd / f"{digit}_{speaker}_{take}.wav").read_bytes())
            row = stored(speaker, f"choose:{digit}", "", recogniser.frames(clip.samples),
                         kind="tiny.en", now=float(take), device="d1")  # fmt: skip
            await store.templates.add(row)
    return store, recogniser


async def test_theos_five_is_chosen_only_once_he_has_taught_it(fsdd: Path) -> None:
    """Taught, theo's templates of five lie nearest, inside his radius, and their likelihood
    ratio lifts the fused probability past the threshold (0.9999 and more, benchmarks/enrol.py
    fused) where a transcript says "Five." (one take at least, whose recogniser probability is
    under the threshold). Nothing is ever another card, a take the recogniser released alone is
    still released, and a take heard as something else ("Bye.") stays refused."""
    store, recogniser = await taught_by(fsdd, "theo")
    alone = VoicePipeline(recogniser, None)
    enrolments = StoreEnrolments(store.templates, "tiny.en")
    taught = VoicePipeline(recogniser, None, enrolments=enrolments)
    need = recogniser.calibration.card
    lifted = []
    for take in FIVES:
        clip = (fsdd / f"5_theo_{take}.wav").read_bytes()
        by_itself = await alone.decide(clip, user="theo", cards=5, stage=Stage.CHOOSE)
        fused = await taught.decide(clip, user="theo", cards=5, stage=Stage.CHOOSE)
        seen = (take, by_itself.rule, fused.rule, fused.transcripts, by_itself.probability)
        for r in (by_itself, fused):
            assert not r.decision.releases or r.decision == Decision(Kind.CHOOSE, card=5), seen
        assert fused.decision.releases or not by_itself.decision.releases, seen
        if fused.transcripts[:1] != ("Five.",):
            assert not fused.decision.releases, seen
        if fused.rule == Rule.FUSED and not by_itself.decision.releases:
            assert fused.fused is not None and fused.fused > 0.99 > need > fused.probability
        if (by_itself.rule, fused.rule) == (Rule.UNCLEAR, Rule.FUSED):
            lifted.append(take)
    assert lifted, "no take the recogniser alone left unsure was lifted by the templates"


# nicolas's "five"s that tiny.en heard as no answer it could read (2026-12-03, benchmarks/enrol.py
# fused: each released by his templates alone, rule "template", once he said his speech is hard
# for recognisers), and his "six".."nine" takes 3-4, which must release nothing.
NICOLAS_FIVES = (3, 4, 5, 6, 7, 9, 10)
NICOLAS_OTHERS = tuple((digit, take) for digit in range(6, 10) for take in (3, 4))


async def test_nicolas_s_clear_template_decides_only_once_he_says_his_speech_is_hard(
    fsdd: Path,
) -> None:
    """The hard path with the real recogniser: a clear match of his own takes releases a
    "five" the recogniser could not read, never another card; without the flag the same takes
    get no "template" release, and his other digits release nothing either way."""
    store, recogniser = await taught_by(fsdd, "nicolas")
    taught = VoicePipeline(recogniser, None, enrolments=StoreEnrolments(store.templates, "tiny.en"))
    rules: dict[bool, list[Rule | None]] = {False: [], True: []}
    for hard in (False, True):
        await store.templates.set_hard("nicolas", hard)
        for take in NICOLAS_FIVES:
            clip = (fsdd / f"5_nicolas_{take}.wav").read_bytes()
            r = await taught.decide(clip, user="nicolas", cards=5, stage=Stage.CHOOSE)
            seen = (hard, take, r.rule, r.transcripts, r.probability)
            assert not r.decision.releases or r.decision == Decision(Kind.CHOOSE, card=5), seen
            rules[hard].append(r.rule)
        for digit, take in NICOLAS_OTHERS:
            clip = (fsdd / f"{digit}_nicolas_{take}.wav").read_bytes()
            r = await taught.decide(clip, user="nicolas", cards=5, stage=Stage.CHOOSE)
            assert not r.decision.releases, (hard, digit, take, r.rule, r.transcripts)
    assert Rule.TEMPLATE not in rules[False]
    assert Rule.TEMPLATE in rules[True], rules
