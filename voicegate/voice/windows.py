"""The encoder window a clip is heard in: Whisper's full 30 s, or a short one around the clip.

Pure: frame counts and token limits in, frame counts and token limits out. Encoder cost grows
with the window, and on CPU the 30 s pass was most of a voice decision (docs/voice-measurements.md,
"Short window"). Which window a model hears at is part of its calibration (``Calibration.window``):
the thresholds were fitted on scores heard at that window.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from voicegate.voice.normalise import normalise
from voicegate.voice.transcribe import WINDOW_FRAMES

FULL = "full"
SHORT = "short"
WINDOWS = (FULL, SHORT)

# The short window: the clip, its lead-in and one second (100 mel frames of 10 ms) of quiet
# after it, rounded up to whole seconds so a batch of clips shares a few shapes.
SHORT_TAIL_FRAMES = 100
SHORT_STEP_FRAMES = 100
# On a short window free decoding runs on: "one, one, one, ..." until the token limit (a window
# of a few seconds, unlike the 30 s Whisper learnt on, says little about where speech ends). The
# grammar reads a repeated answer as the answer, so the loop is cut, not fought: a clip gets
# SHORT_TOKENS_BASE tokens and SHORT_TOKENS_PER_S a second of audio (quick English is about four
# tokens a second; a Devanagari word is several byte tokens). What the cut hid is unknown, so a
# best transcript the cut stopped is trusted only when it is that loop: one answer said again and
# again (``loops``); any other is refused as unclear ("two, two, not" may go on "... two").
SHORT_TOKENS_BASE = 4
SHORT_TOKENS_PER_S = 8


def frames(window: str, longest: int) -> int:
    """The encoder window, in mel frames, for clips of up to ``longest`` frames."""
    if window == FULL:
        return WINDOW_FRAMES
    steps = -(-(longest + SHORT_TAIL_FRAMES) // SHORT_STEP_FRAMES)
    return min(WINDOW_FRAMES, steps * SHORT_STEP_FRAMES)


def fit(mel: npt.NDArray[np.float32], width: int) -> npt.NDArray[np.float32]:
    """``mel`` cut or padded with zeros (as faster-whisper pads) to ``width`` frames."""
    mel = mel[:, :width]
    if mel.shape[1] < width:
        mel = np.pad(mel, ((0, 0), (0, width - mel.shape[1])))
    return np.ascontiguousarray(mel, dtype=np.float32)


def new_tokens(window: str, most: int, seconds: float) -> int:
    """The most tokens free decoding may write for a clip of ``seconds`` (``most`` at full)."""
    if window == FULL:
        return most
    return min(most, math.ceil(SHORT_TOKENS_BASE + SHORT_TOKENS_PER_S * seconds))


def loops(text: str) -> bool:
    """True when ``text`` is one unit of words said at least twice over and then again, the last
    word perhaps cut short: "one, one, one, o", "two three two three two"; never a mix, never a
    text cut inside a character (U+FFFD: the cut may have hidden the start of "नहीं")."""
    if "\ufffd" in text:
        return False
    words = normalise(text).split()
    # the last word may be cut short; every word before it must repeat the unit, twice at least
    whole = len(words) - 1
    for period in range(1, whole // 2 + 1):
        if all(word == words[k % period] for k, word in enumerate(words[:whole])):
            return words[whole % period].startswith(words[-1])
    return False
