"""Decoding at a short encoder window instead of Whisper's 30 s: measured, and not shipped.

    .venv/bin/python benchmarks/short_window.py                     # the committed clips
    .venv/bin/python benchmarks/short_window.py --tail 9 CLIP...    # a 9 s tail, other clips
    .venv/bin/python benchmarks/calibrate.py hear --model tiny.en --window short \\
        --cache bench-out/hs.jsonl --fsdd-takes 50                  # then ``fit`` on the cache

The recogniser decodes at the full window. ``ShortWindowTranscriber`` encodes the clip, its
lead-in and a tail of quiet (1 s, the answer model's window; ``--tail`` for another), rounded up
to whole seconds (``windows.short``), and decodes and scores there. The encoder's cost falls to
about a twentieth on CPU, but free decoding does not stop: "one, one, one, ..." up to any limit,
since a window of a few seconds says little about where speech ends. So free decoding gets
``TOKENS_BASE`` tokens and ``TOKENS_PER_S`` a second of audio (quick English is about four
tokens a second; a Devanagari word is several byte tokens), and the recogniser's own rule holds:
a best transcript the limit cut off is trusted only when it is one answer said again and again
(``windows.loops``), any other is refused as unclear.

What it found (docs/voice-measurements.md, "Short window (measured, not shipped)"; the P1 and P2
figures in docs/benchmarks.md, measured when ``voicegate bench`` had a ``--window`` option):
decoding and scoring the loops cost more than the encoder saves; a loop is surer than the words
were (every transcript of a spoken "not three" was "Three, three, three, ...", and card three
was released); refitted thresholds still released negatives, at a 1 s tail and at a 9 s one.
Every model keeps the full window. Every model's thresholds were fitted there, so heard this way
nothing is released by voice until ``calibrate.py fit`` refits them on its hearings.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voicegate.domain import Stage
from voicegate.voice import audio, calibration, consent, windows
from voicegate.voice.transcribe import SAMPLE_RATE, Hearing, Samples, Utterance
from voicegate.voice.whisper import FasterWhisperTranscriber

ROOT = Path(__file__).resolve().parents[1]
CLIPS = ROOT / "fixtures" / "audio" / "clips"
# The token limit of free decoding at a short window: the limit the measurements above ran with.
TOKENS_BASE = 4
TOKENS_PER_S = 8


def new_tokens(most: int, seconds: float) -> int:
    """The most tokens free decoding may write for a clip of ``seconds``, ``most`` at most."""
    return min(most, math.ceil(TOKENS_BASE + TOKENS_PER_S * seconds))


class ShortWindowTranscriber(FasterWhisperTranscriber):
    """The recogniser encoding, decoding and scoring at a short window (``tail`` mel frames of
    10 ms after the clip), one clip at a time so that each gets its own token limit (the
    hearings above were one clip at a time too); it releases nothing by voice."""

    def __init__(
        self,
        model: str = "tiny.en",
        *,
        device: str = "auto",
        threads: int = 0,
        tail: int = windows.SHORT_TAIL_FRAMES,
    ) -> None:
        super().__init__(model, device=device, threads=threads)
        self.tail = tail
        self._most = self._max_new_tokens
        self.calibration = dataclasses.replace(
            calibration.UNCALIBRATED,
            source=f"{model} is calibrated at the full window only",
            answers=self.calibration.answers,
        )

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        """Each clip heard on its own, its free decoding capped by its length."""
        out: list[Hearing] = []
        for u in utterances:
            self._max_new_tokens = new_tokens(self._most, len(u.samples) / SAMPLE_RATE)
            out.extend(super().transcribe_many([u]))
        return out

    def _encode(
        self,
        clips: Sequence[Samples],
        mels: Sequence[npt.NDArray[np.float32]] | None = None,
    ) -> npt.NDArray[np.float32]:
        """One encoder call over the clips at the short window of the longest."""
        import ctranslate2

        if mels is None:
            mels = [self._mel(samples) for samples in clips]
        width = windows.short(max(mel.shape[1] for mel in mels), self.tail)
        feats = np.stack([windows.fit(mel, width) for mel in mels])
        return np.asarray(
            self._model.encode(ctranslate2.StorageView.from_array(feats), to_cpu=True)
        )


def main() -> int:
    """Hear each clip at both windows as the server hears a choice of two cards; print the best
    transcript and the median time of each stage."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("clips", nargs="*", type=Path, help="default: the committed clips")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tail", type=float, default=1.0, metavar="SECONDS")
    parser.add_argument("--repeat", type=int, default=3, help="hearings per clip and window")
    args = parser.parse_args()
    paths = args.clips or sorted(CLIPS.glob("*.flac"))
    texts = tuple(r.text for r in consent.readings(2, Stage.CHOOSE, ("en",)))
    question = calibration.question(Stage.CHOOSE, 2)
    recognisers = {
        "full": FasterWhisperTranscriber(args.model, device="cpu", threads=args.threads),
        "short": ShortWindowTranscriber(
            args.model, device="cpu", threads=args.threads, tail=round(args.tail * 100)
        ),
    }
    for path in paths:
        asked = Utterance(
            audio.decode(path.read_bytes()).samples, ("en",), texts, question=question
        )
        for window, recogniser in recognisers.items():
            heard = [recogniser.transcribe_many([asked])[0] for _ in range(args.repeat)]
            ms = {k: statistics.median(h.timings_ms[k] for h in heard) for k in heard[0].timings_ms}
            times = ", ".join(f"{k} {v:.0f}" for k, v in ms.items())
            print(f"{path.name} {window}: {heard[0].text!r}, {heard[0].refusal}; ms: {times}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
