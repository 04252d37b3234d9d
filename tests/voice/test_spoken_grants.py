"""Grants by voice: "yes, for ten minutes" read by the grammar, its answer part cut at the first
pause and decided as a plain yes, and nothing released by a length alone or a doubt anywhere."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import pytest
import soundfile as sf
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.voice.test_consent_properties import NEGATORS, WORDS, separators
from voicegate.domain import Decision, Stage
from voicegate.errors import HearingUnavailable
from voicegate.reasons import Kind, Reason
from voicegate.voice import answer_model
from voicegate.voice.calibration import Calibration
from voicegate.voice.consent import grant_of, read_words
from voicegate.voice.leading import PAUSE, answer_part
from voicegate.voice.pipeline import VoicePipeline, VoiceResult
from voicegate.voice.transcribe import FakeTranscriber, Hearing, Utterance

SR = 16_000
CONFIRM = Decision(Kind.CONFIRM)


@pytest.mark.parametrize(
    ("said", "minutes"),
    [
        ("Yes, for 10 minutes.", 10),
        ("yes for ten minutes", 10),
        ("Okay, for the next 5 minutes.", 5),
        ("Yes, for one minute.", 1),
        ("Haan, das minute.", 10),
        ("haan das minute ke liye", 10),
        ("theek hai, 5 minute tak", 5),
        ("हाँ, दस मिनट", 10),
        ("Yes, for 90 minutes.", 90),
    ],
)
def test_a_yes_and_then_a_length_asks_for_that_many_minutes(said: str, minutes: int) -> None:
    words = grant_of(said, 1, Stage.CHOOSE)
    assert words is not None
    assert (words.decision, words.minutes) == (CONFIRM, minutes)


@pytest.mark.parametrize(
    "said",
    [
        "Yes, for 10 minutes, no.",  # taken back
        "No, for ten minutes.",
        "Not yes, for ten minutes.",
        "Yes no for ten minutes",
        "Maybe yes, for ten minutes.",  # a hedge
        "Yes, maybe for ten minutes.",
        "Yes, for 10 minutes?",  # a question
        "Is it yes for ten minutes",
        "Yes, for about ten minutes.",  # no plain length
        "Yes, for ten or so minutes.",
        "Yes, for ten hours.",
        "Yes, for an hour.",
        "Yes, for ten.",
        "For ten minutes.",  # a length alone
        "10 minutes.",
        "Yes for 10 minutes please",  # a length that does not end it
        "haan ek minute",  # "wait a minute"
        "haan do minute",
        "haan do minat",  # the same wait, spelt as the grant's "{n} minat" is
        "nahi haan das minute",
        "haan das minute nahi",
        "Cancel, for ten minutes.",
        "Yes, 14 minutes.",  # how "yes, for ten minutes" was once heard
        "Wait, for ten minutes.",
    ],
)
def test_a_doubt_a_near_miss_or_no_yes_asks_for_no_grant(said: str) -> None:
    assert grant_of(said, 1, Stage.CHOOSE) is None


@pytest.mark.parametrize(
    "said",
    [
        "Haan, 1 minute.",  # "haan, ek minute": yes, and wait a minute
        "Haan, 1 minat.",
        "Haan, 2 minute.",  # "do minute", a wait too
        "Haan, 2 minat.",
        "Yes, 1 minute.",  # "one minute"
        "Okay, 1 minute.",
        "हाँ, 1 मिनट",  # "एक मिनट"
        "हाँ, १ मिनट",
    ],
)
def test_a_wait_written_in_digits_after_a_yes_asks_for_no_grant(said: str) -> None:
    # Spelt out, these are a yes and a wait: two answers. In digits they are the same words.
    assert grant_of(said, 1, Stage.CHOOSE) is None
    assert not read_words(said, 1, Stage.CHOOSE).releases


def test_on_several_cards_the_answer_part_is_the_card_and_the_gate_judges_the_grant() -> None:
    words = grant_of("The second one, for ten minutes.", 3, Stage.CHOOSE)
    assert words is not None and words.decision == Decision(Kind.CHOOSE, card=2)
    # "yes" among several cards is ambiguous: no release, so no grant either
    assert grant_of("Yes, for ten minutes.", 3, Stage.CHOOSE) is None


def test_a_grant_is_never_read_where_the_whole_transcript_would_release() -> None:
    # Without the grammar's length the same words never released either.
    assert not read_words("Yes, for 10 minutes.", 1, Stage.CHOOSE).releases


@st.composite
def grant_utterances_with_a_negator(draw: st.DrawFn) -> str:
    tokens = draw(st.lists(st.sampled_from(WORDS) | st.text(max_size=6), max_size=6))
    tokens.insert(draw(st.integers(0, len(tokens))), draw(st.sampled_from(NEGATORS)))
    length = draw(st.sampled_from(["for ten minutes", "for 10 minutes", "das minute", "5 मिनट"]))
    return draw(separators).join([*tokens, length])


@given(grant_utterances_with_a_negator(), st.integers(1, 5), st.sampled_from(list(Stage)))
@settings(max_examples=500)
def test_no_grant_is_read_from_words_holding_a_negator(text: str, cards: int, stage: Stage) -> None:
    assert grant_of(text, cards, stage) is None


@given(
    st.lists(st.sampled_from(WORDS), max_size=8), st.integers(1, 5), st.sampled_from(list(Stage))
)
@settings(max_examples=500)
def test_a_grant_is_read_only_after_words_the_grammar_releases_alone(
    tokens: list[str], cards: int, stage: Stage
) -> None:
    words = grant_of(" ".join([*tokens, "for 10 minutes"]), cards, stage)
    if words is not None:
        assert words.decision.releases
        assert read_words(words.answer, cards, stage) == words.decision


def clip(*bursts: tuple[float, float], seed: int = 0) -> np.ndarray:
    """Tone bursts (start, end in seconds) in quiet noise: a word, a pause, more words."""
    rng = np.random.default_rng(seed)
    n = int(SR * (max(end for _, end in bursts) + 0.5))
    x = 0.0005 * rng.standard_normal(n)
    t = np.arange(n) / SR
    for start, end in bursts:
        span = slice(int(start * SR), int(end * SR))
        x[span] += 0.3 * np.sin(2 * np.pi * (220 + 30 * seed) * t[span])
    return x.astype(np.float32)


def wav(x: np.ndarray) -> bytes:
    out = io.BytesIO()
    sf.write(out, x, SR, format="WAV", subtype="PCM_16")
    return out.getvalue()


def test_the_answer_part_is_the_sound_before_the_first_pause() -> None:
    part = answer_part(clip((0.3, 0.7), (0.9, 1.8)))
    assert part is not None
    assert 0.68 <= len(part) / SR <= 0.72


def test_without_a_pause_that_more_sound_follows_there_is_no_answer_part() -> None:
    assert answer_part(clip((0.3, 1.8))) is None  # one breath
    gap = PAUSE.pause_frames * PAUSE.frame / SR
    assert answer_part(clip((0.3, 0.7), (0.7 + gap * 0.6, 1.8))) is None  # a gap inside a word
    assert answer_part(clip((0.3, 0.35), (0.6, 1.8))) is None  # a click, then the words
    assert answer_part(np.zeros(SR, np.float32)) is None


def hearing(text: str, *, answers: tuple[float, ...] | None = None) -> Hearing:
    words = text.casefold().strip(".").replace(",", "")
    return Hearing(
        text, "en", no_speech_prob=0.01, avg_logprob=-0.1, scores=((words, -0.3),), answers=answers
    )


async def spoken(
    audio: np.ndarray, *hearings: Hearing, calibrated: Calibration | None = None
) -> tuple[VoiceResult, FakeTranscriber]:
    fake = FakeTranscriber(list(hearings))
    pipeline = VoicePipeline(fake, None, calibrated=calibrated)
    result = await pipeline.decide(wav(audio), user="u", cards=1, stage=Stage.CHOOSE)
    return result, fake


TWO_PARTS = clip((0.3, 0.7), (0.9, 1.8))


async def test_a_spoken_grant_releases_when_its_answer_part_is_a_clear_yes() -> None:
    result, fake = await spoken(TWO_PARTS, hearing("Yes, for 10 minutes."), hearing("Yes."))
    assert result.decision == CONFIRM and result.grant_minutes == 10
    whole, part = fake.calls
    # The answer part is heard as an answer to the same question, from the same readings.
    assert len(part.samples) < len(whole.samples)
    assert (part.candidates, part.question) == (whole.candidates, whole.question)


async def test_an_answer_part_heard_as_anything_but_that_yes_releases_nothing() -> None:
    for part in ("No.", "Maybe.", "Wait.", "Yesterday."):
        result, _ = await spoken(TWO_PARTS, hearing("Yes, for 10 minutes."), hearing(part))
        assert not result.decision.releases and result.grant_minutes is None, part


async def test_a_spoken_grant_without_a_pause_releases_nothing() -> None:
    result, fake = await spoken(clip((0.3, 1.8)), hearing("Yes, for 10 minutes."))
    assert result.decision.reason is Reason.GRANT_NO_PAUSE and result.grant_minutes is None
    assert len(fake.calls) == 1


async def test_the_answer_model_must_hear_a_yes_in_the_answer_part() -> None:
    calibrated = Calibration(0.5, 0.5, 5, "test", alone=0.0, answers={"card": 0.5, "yes": 0.5})
    yes = tuple(1.0 if c == "yes" else 0.0 for c in answer_model.CLASSES)
    other = tuple(1.0 if c == answer_model.OTHER else 0.0 for c in answer_model.CLASSES)
    said = hearing("Yes, for 10 minutes.", answers=other)
    agreed, _ = await spoken(TWO_PARTS, said, hearing("Yes.", answers=yes), calibrated=calibrated)
    assert agreed.decision == CONFIRM and agreed.grant_minutes == 10
    refused, _ = await spoken(
        TWO_PARTS, said, hearing("Yes.", answers=other), calibrated=calibrated
    )
    assert refused.rule == "answer_model" and not refused.decision.releases
    assert refused.grant_minutes is None


async def test_an_answer_part_the_sound_hears_as_cancel_is_unclear_not_a_cancel() -> None:
    """Rule 5 (``decision.heard_cancel``) in the answer part: the words before the length said
    yes, so a cancel heard there is the two hearings disagreeing, and nothing is decided."""
    calibrated = Calibration(0.5, 0.5, 5, "test", answers={"card": 0.5, "yes": 0.5, "cancel": 0.5})
    cancel = tuple(1.0 if c == "cancel" else 0.0 for c in answer_model.CLASSES)
    said = hearing("Yes, for 10 minutes.", answers=cancel)
    result, _ = await spoken(
        TWO_PARTS, said, hearing("Yesh.", answers=cancel), calibrated=calibrated
    )
    assert result.rule == "grant_disagree" and result.decision.reason is Reason.UNCLEAR
    assert result.grant_minutes is None


async def test_a_yes_then_a_wait_in_digits_releases_nothing_though_the_first_part_is_yes() -> None:
    # "Yes, one minute", written as the recogniser may write it: a yes and a wait.
    result, _ = await spoken(TWO_PARTS, hearing("Yes, 1 minute."), hearing("Yes."))
    assert not result.decision.releases and result.grant_minutes is None


class GoneAfterOne(FakeTranscriber):
    """A recogniser that hears the whole clip and is gone before the answer part."""

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        if self.calls:
            raise HearingUnavailable("no recogniser worker is connected")
        return super().transcribe_many(utterances)


async def test_a_recogniser_gone_before_the_answer_part_refuses_the_answer() -> None:
    pipeline = VoicePipeline(GoneAfterOne([hearing("Yes, for 10 minutes.")]), None)
    result = await pipeline.decide(wav(TWO_PARTS), user="u", cards=1, stage=Stage.CHOOSE)
    assert result.decision.reason is Reason.HEARING_UNAVAILABLE
    assert result.grant_minutes is None


async def test_an_answer_part_heard_no_or_wait_under_a_whole_yes_is_unclear_not_acted_on() -> None:
    # The whole clip was heard "yes, for ten minutes": its first part heard "no" is two
    # hearings disagreeing, so the card is neither closed nor given more time.
    for part in ("No.", "Wait."):
        result, _ = await spoken(TWO_PARTS, hearing("Yes, for 10 minutes."), hearing(part))
        assert result.decision.reason is Reason.UNCLEAR, part
