"""The answer part of a spoken grant: the clip up to its first pause. Pure (numpy).

"Yes, for ten minutes" is an answer and then a length. The answer model (``answer_model.py``)
was trained on answers alone, and hears the whole of such a clip as "anything else" (or "wait",
for the "minutes"): docs/voice-measurements.md, "Grants by voice". So a spoken grant is decided
on its answer part alone, by every rule a plain yes passes, the answer model's agreement
included (``pipeline``); the length is read off the whole clip's transcript
(``consent.grant_of``). The answer part is the sound up to the first pause that more sound
follows. A clip with no such pause has no answer part of its own: it releases nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voicegate.voice.transcribe import Samples

__all__ = ["PAUSE", "Pause", "answer_part"]


@dataclass(frozen=True, slots=True)
class Pause:
    """What counts as the pause after the answer (docs/voice-measurements.md, "Grants by
    voice", for the synthetic takes these were checked on)."""

    # 20 ms frames at 16 kHz: the encoder's own hop.
    frame: int = 320
    # A frame this far below the clip's loudest is quiet: espeak-ng's and piper's comma pause
    # falls 40 dB and more; a vowel's own dips stay within 20 dB.
    quiet_db: float = -30.0
    # 120 ms of quiet is a pause: shorter gaps sit inside words (a stop consonant's closure).
    pause_frames: int = 6
    # 160 ms of sound before it: anything shorter is no answer word.
    least_frames: int = 8


PAUSE = Pause()


def answer_part(samples: Samples, pause: Pause = PAUSE) -> Samples | None:
    """``samples`` up to the first pause that more sound follows; None when there is none."""
    x = np.asarray(samples, dtype=np.float64)
    n = len(x) // pause.frame
    if n == 0:
        return None
    rms = np.sqrt(np.mean(x[: n * pause.frame].reshape(n, pause.frame) ** 2, axis=1) + 1e-12)
    loud = 20 * np.log10(rms / rms.max()) > pause.quiet_db
    onset = int(np.argmax(loud))
    last_loud = int(np.flatnonzero(loud)[-1])
    quiet = 0
    for i in range(onset, last_loud):
        if loud[i]:
            quiet = 0
            continue
        quiet += 1
        start = i - quiet + 1
        if quiet >= pause.pause_frames and start - onset >= pause.least_frames:
            return np.ascontiguousarray(samples[: start * pause.frame])
    return None
