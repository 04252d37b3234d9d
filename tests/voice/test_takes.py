"""An enrolment take heard through the pipeline's queue (``VoicePipeline.take``): its features
and its transcript, beside answers, without touching them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.voice.test_pipeline import heard, speech
from voicegate.domain import Stage
from voicegate.errors import Throttled
from voicegate.reasons import Reason
from voicegate.voice import audio
from voicegate.voice.pipeline import VoicePipeline
from voicegate.voice.transcribe import FakeTranscriber, Hearing


class Heard(FakeTranscriber):
    """A scripted recogniser that also hears takes (as the real one does), in call order."""

    scripted = False


async def test_a_take_and_an_answer_in_one_batch_each_keep_their_own_hearing() -> None:
    fake = Heard([heard("Cancel."), heard("Two.")])
    pipeline = VoicePipeline(fake, None, max_batch=4)
    clip = audio.decode(speech(1))
    taken, answered = await asyncio.gather(
        pipeline.take(clip),
        pipeline.decide(speech(2), user="u", cards=3, stage=Stage.CHOOSE),
    )
    assert taken.heard == "Cancel." and len(taken.features)
    assert answered.transcripts == ("Two.",) and answered.decision.card == 2
    # The take asked for no readings, as a choice among five cards: nothing to score for it.
    (take_call,) = [u for u in fake.calls if not u.candidates]
    assert take_call.question == "card"
    assert pipeline.waiting == 0


async def test_a_take_the_recogniser_doubted_gives_no_transcript() -> None:
    doubted = Hearing("Thank you.", "en", 0.9, -1.0, (), refusal=Reason.NO_SPEECH)
    taken = await VoicePipeline(Heard([doubted]), None).take(audio.decode(speech(1)))
    assert taken.heard == "" and len(taken.features)


async def test_a_take_whose_model_call_fails_leaves_no_place_taken() -> None:
    class Broken(Heard):
        def transcribe_many(self, utterances: Any) -> list[Hearing]:
            raise RuntimeError("the model broke")

    pipeline = VoicePipeline(Broken([]), None, max_waiting=1)
    with pytest.raises(RuntimeError):
        await pipeline.take(audio.decode(speech(1)))
    # The place was given back: the next take is admitted (and fails the same way), not BUSY.
    with pytest.raises(RuntimeError):
        await pipeline.take(audio.decode(speech(1)))


async def test_takes_past_the_waiting_limit_are_told_to_retry() -> None:
    release = asyncio.Event()

    class Slow(Heard):
        def transcribe_many(self, utterances: Any) -> list[Hearing]:
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=10)
            return super().transcribe_many(utterances)

    loop = asyncio.get_running_loop()
    pipeline = VoicePipeline(Slow([heard("Two.")]), None, max_waiting=1)
    first = asyncio.create_task(pipeline.take(audio.decode(speech(1))))
    await asyncio.sleep(0.05)
    with pytest.raises(Throttled) as busy:
        await pipeline.take(audio.decode(speech(2)))
    assert busy.value.reason is Reason.BUSY
    release.set()
    assert (await first).heard == "Two."
