"""How much silence the recogniser puts before a clip (``transcribe.lead_in``)."""

from __future__ import annotations

import numpy as np

from voicegate.voice.transcribe import LEAD_IN, SAMPLE_RATE, lead_in


def tone(seconds: float, quiet_before: float = 0.0, hiss: float = 0.0) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    loud = (0.5 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    before = np.full(int(quiet_before * SAMPLE_RATE), hiss, dtype=np.float32)
    return np.concatenate([before, loud])


def test_a_clip_that_starts_loud_gets_the_whole_lead_in() -> None:
    assert lead_in(tone(1.0)) == LEAD_IN


def test_quiet_at_the_start_counts_towards_the_lead_in() -> None:
    assert lead_in(tone(1.0, quiet_before=0.3)) == LEAD_IN - int(0.3 * SAMPLE_RATE)
    assert lead_in(tone(1.0, quiet_before=0.5)) == 0
    assert lead_in(tone(1.0, quiet_before=2.0)) == 0


def test_a_hiss_30_db_under_the_answer_is_quiet_and_a_louder_one_is_not() -> None:
    assert lead_in(tone(1.0, quiet_before=0.5, hiss=0.01)) == 0  # 31 dB under the tone
    assert lead_in(tone(1.0, quiet_before=0.5, hiss=0.1)) == LEAD_IN


def test_a_clip_shorter_than_a_frame_gets_the_whole_lead_in() -> None:
    assert lead_in(np.zeros(10, dtype=np.float32)) == LEAD_IN
    assert lead_in(np.zeros(0, dtype=np.float32)) == LEAD_IN
