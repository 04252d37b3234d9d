"""The answer model's short encoder window, and the loop test of a transcript cut short."""

from __future__ import annotations

import numpy as np
import pytest

from voicegate.voice import windows
from voicegate.voice.transcribe import WINDOW_FRAMES


def test_a_short_window_holds_the_clip_and_a_second_more_in_whole_seconds() -> None:
    assert windows.short(80) == 200
    assert windows.short(100) == 200
    assert windows.short(101) == 300


def test_a_longer_tail_widens_the_short_window() -> None:
    assert windows.short(80, tail=900) == 1000


def test_a_short_window_never_grows_past_thirty_seconds() -> None:
    assert windows.short(2950) == WINDOW_FRAMES


def test_fit_pads_a_short_mel_with_zeros_and_cuts_a_long_one() -> None:
    mel = np.ones((80, 150), np.float32)
    padded = windows.fit(mel, 200)
    assert padded.shape == (80, 200)
    assert padded[:, 150:].sum() == 0
    assert windows.fit(mel, 100).shape == (80, 100)


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
