"""The gate-worker messages: what goes out comes back the same, and nothing else is read."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicegate.hearing import wire
from voicegate.reasons import Reason
from voicegate.voice.transcribe import Heard, Hearing, Utterance

TEXT = st.text(max_size=20)


@given(
    samples=st.lists(st.floats(-1, 1, width=32), max_size=400),
    candidates=st.lists(TEXT, max_size=6),
    question=st.sampled_from(["", "card", "yes"]),
    deadline=st.floats(0, 2e9),
)
def test_a_job_comes_back_as_it_went(
    samples: list[float], candidates: list[str], question: str, deadline: float
) -> None:
    utterance = Utterance(
        np.array(samples, dtype=np.float32),
        ("en", "hi"),
        tuple(candidates),
        tuple("en" for _ in candidates),
        question=question,
    )
    job = wire.unpack_job(wire.pack_job(wire.Job("j1", "tiny.en", deadline, utterance)))
    assert (job.id, job.model, job.deadline) == ("j1", "tiny.en", deadline)
    got = job.utterance
    assert np.array_equal(got.samples, utterance.samples) and got.samples.dtype == np.float32
    assert (got.languages, got.candidates, got.candidate_languages, got.question) == (
        utterance.languages,
        utterance.candidates,
        utterance.candidate_languages,
        utterance.question,
    )


def test_a_hearing_comes_back_as_it_went_unreadable_scores_and_all() -> None:
    frames = np.arange(12, dtype=np.float32).reshape(3, 4)
    hearing = Hearing(
        text="Two.",
        language="en",
        no_speech_prob=0.01,
        avg_logprob=-0.2,
        scores=(("two", -0.5), ("tooth", -math.inf)),
        hypotheses=(Heard("Two.", "en", -0.4, "two"), Heard("To.", "en", -2.0)),
        timings_ms={"encode": 12.5},
        refusal=Reason.NO_SPEECH,
        frames=frames,
        answers=(0.1, 0.9),
    )
    back = wire.unpack_reply(wire.pack_reply(wire.Reply("j1", "w1", hearing)))
    assert (back.id, back.worker, back.error) == ("j1", "w1", "")
    assert back.hearing is not None
    assert back.hearing.scores == hearing.scores  # -inf survives, though JSON has no such number
    assert back.hearing.frames is not None and np.array_equal(back.hearing.frames, frames)
    assert back.hearing == hearing  # frames are left out of equality


def test_an_error_reply_has_no_hearing() -> None:
    back = wire.unpack_reply(wire.pack_reply(wire.Reply("j1", "w1", None, "past its deadline")))
    assert back.hearing is None and back.error == "past its deadline"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"VGU1",
        b"VGH1\x00\x00\x00\x00",  # a hearing where a job should be
        b"VGU1\xff\x00\x00\x00{}",  # a head longer than the message
        b"VGU1\x02\x00\x00\x00[]",  # a head that is not an object
        b"VGU1\x02\x00\x00\x00{}\x00\x00\x00",  # samples that are not whole float32s
        b'VGU1\x0e\x00\x00\x00{"deadline":1}\xff',
        b'VGU1\x10\x00\x00\x00{"languages":[1]}',
        b"VGU1\x04\x00\x00\x00\xff\xfe{}",
    ],
)
def test_anything_else_is_a_wire_error(data: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.unpack_job(data)


def test_a_hearing_whose_frames_do_not_fill_their_shape_is_a_wire_error() -> None:
    good = wire.pack_reply(
        wire.Reply("j", "w", Hearing("a", "en", 0.0, 0.0, frames=np.zeros((2, 2), np.float32)))
    )
    with pytest.raises(wire.WireError):
        wire.unpack_reply(good[:-4])
