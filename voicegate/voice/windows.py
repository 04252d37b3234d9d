"""The short encoder window the answer model hears a clip in, and the loop test of a transcript.

Pure: frame counts and texts in, frame counts and verdicts out. The recogniser decodes at
Whisper's full 30 s window (``transcribe.WINDOW_FRAMES``); the answer model
(voice/answer_model.py) reads its own encoder pass over a short window around the clip, a small
part of the encoder's cost at 30 s. Decoding at the short window was measured and not shipped:
there free decoding loops (docs/voice-measurements.md, "Short window"; benchmarks/short_window.py).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voicegate.voice.normalise import normalise
from voicegate.voice.transcribe import WINDOW_FRAMES

# The short window: the clip, its lead-in and one second (100 mel frames of 10 ms) of quiet
# after it, rounded up to whole seconds so a batch of clips shares a few shapes.
SHORT_TAIL_FRAMES = 100
SHORT_STEP_FRAMES = 100


def short(longest: int, tail: int = SHORT_TAIL_FRAMES) -> int:
    """The short window, in mel frames, for clips of up to ``longest`` frames: ``tail`` frames
    of quiet after them, in whole seconds, and never past Whisper's 30 s."""
    steps = -(-(longest + tail) // SHORT_STEP_FRAMES)
    return min(WINDOW_FRAMES, steps * SHORT_STEP_FRAMES)


def fit(mel: npt.NDArray[np.float32], width: int) -> npt.NDArray[np.float32]:
    """``mel`` cut or padded with zeros (as faster-whisper pads) to ``width`` frames."""
    mel = mel[:, :width]
    if mel.shape[1] < width:
        mel = np.pad(mel, ((0, 0), (0, width - mel.shape[1])))
    return np.ascontiguousarray(mel, dtype=np.float32)


def loops(text: str) -> bool:
    """True when ``text`` is one unit of words said at least twice over and then again, the last
    word perhaps cut short: "one, one, one, o", "two three two three two"; never a mix, never a
    text cut inside a character (U+FFFD: the cut may have hidden the start of "नहीं").

    A best transcript that free decoding's token limit cut off is trusted only when it is such
    a loop: the grammar reads a repeated answer as the answer, and what the cut hid of any other
    text is unknown ("two, two, not" may go on "... two"), so that one is refused as unclear."""
    if "\ufffd" in text:
        return False
    words = normalise(text).split()
    # the last word may be cut short; every word before it must repeat the unit, twice at least
    whole = len(words) - 1
    for period in range(1, whole // 2 + 1):
        if all(word == words[k % period] for k, word in enumerate(words[:whole])):
            return words[whole % period].startswith(words[-1])
    return False
