"""Grants by voice over the real tiny.en recogniser and its answer model: piper's "yes, for ten
minutes" makes a ten-minute grant on its answer part's yes; taken back, it releases nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.conftest import FIXTURES, require
from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind
from voicegate.voice import models
from voicegate.voice.audio import decode
from voicegate.voice.leading import answer_part
from voicegate.voice.pipeline import VoicePipeline, VoiceResult
from voicegate.voice.whisper import FasterWhisperTranscriber

pytestmark = pytest.mark.whisper
CLIPS = FIXTURES / "clips"


@pytest.fixture(scope="module")
def pipeline() -> Iterator[VoicePipeline]:
    require(models.describe("tiny.en").status == "present", "the tiny.en model")
    yield VoicePipeline(FasterWhisperTranscriber("tiny.en", device="cpu", threads=2), None)


def said(pipeline: VoicePipeline, name: str) -> VoiceResult:
    audio = (CLIPS / name).read_bytes()
    return asyncio.run(pipeline.decide(audio, user="u", cards=1, stage=Stage.CHOOSE))


def test_yes_for_ten_minutes_is_a_yes_the_answer_model_heard_and_ten_minutes(
    pipeline: VoicePipeline,
) -> None:
    result = said(pipeline, "piper_yes_for_ten_minutes.flac")
    assert result.decision == Decision(Kind.CONFIRM), result
    assert result.grant_minutes == 10
    assert result.heard is not None and result.heard >= 0.5  # the answer model agreed
    assert "answer_part" in result.timings_ms


def test_the_answer_part_of_the_clip_is_the_yes_alone() -> None:
    samples = decode((CLIPS / "piper_yes_for_ten_minutes.flac").read_bytes()).samples
    part = answer_part(samples)
    assert part is not None and 0.2 <= len(part) / 16_000 <= 0.5 * len(samples) / 16_000


def test_yes_for_ten_minutes_taken_back_releases_nothing_and_asks_for_no_grant(
    pipeline: VoicePipeline,
) -> None:
    result = said(pipeline, "piper_yes_for_ten_minutes_no.flac")
    assert not result.decision.releases and result.grant_minutes is None, result
