"""The encoder window: its size, the short window's token limit and its loop test."""

from __future__ import annotations

import numpy as np
import pytest

from voicegate.voice import calibration, windows
from voicegate.voice.transcribe import WINDOW_FRAMES


def test_the_full_window_is_whisper_s_thirty_seconds_whatever_the_clip() -> None:
    assert windows.frames(windows.FULL, 80) == WINDOW_FRAMES
    assert windows.frames(windows.FULL, 2900) == WINDOW_FRAMES


def test_a_short_window_holds_the_clip_and_a_second_more_in_whole_seconds() -> None:
    assert windows.frames(windows.SHORT, 80) == 200
    assert windows.frames(windows.SHORT, 100) == 200
    assert windows.frames(windows.SHORT, 101) == 300


def test_a_short_window_never_grows_past_thirty_seconds() -> None:
    assert windows.frames(windows.SHORT, 2950) == WINDOW_FRAMES


def test_fit_pads_a_short_mel_with_zeros_and_cuts_a_long_one() -> None:
    mel = np.ones((80, 150), np.float32)
    padded = windows.fit(mel, 200)
    assert padded.shape == (80, 200)
    assert padded[:, 150:].sum() == 0
    assert windows.fit(mel, 100).shape == (80, 100)


def test_free_decoding_is_capped_by_clip_length_only_on_a_short_window() -> None:
    assert windows.new_tokens(windows.FULL, 32, 1.0) == 32
    assert windows.new_tokens(windows.SHORT, 32, 1.0) == 12
    assert windows.new_tokens(windows.SHORT, 32, 10.0) == 32


@pytest.mark.parametrize(
    "text",
    ["one, one, one, o", "Two. Two. Two.", "two three two three two", "हाँ हाँ हाँ", "Five. Five. Fi"],
)
def test_an_answer_said_again_and_again_is_a_loop(text: str) -> None:
    assert windows.loops(text)


@pytest.mark.parametrize(
    "text",
    [
        "Two.",
        "",
        "two, two, not",
        "two, three",
        "no no no wait",
        "हाँ नहीं हाँ",
        "yes yes no",
        "not no",
        "हाँ, है, हो",
        "दूसरा, दूसरा, दूसरा, \ufffd",
    ],
)
def test_a_single_answer_or_a_mix_is_not_a_loop(text: str) -> None:
    assert not windows.loops(text)


def test_a_model_heard_at_another_window_than_its_calibration_releases_nothing() -> None:
    at_short = calibration.at("tiny.en", windows.SHORT)
    assert at_short.card == at_short.yes == float("inf")
    assert calibration.at("tiny.en", windows.FULL) == calibration.of("tiny.en")
