"""Scoring every reading of a language in one decoder call, against one call per token length.

    .venv/bin/python benchmarks/forced.py tiny.en 2      # model, open cards
    .venv/bin/python benchmarks/forced.py base 3

One committed clip, encoded once; then each way twice, three timed runs each, one thread. The
per-length grouping is the recogniser's scoring before it became one call (the same scoring
function, called once per token length); both must give the same scores.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from voicegate.domain import Stage
from voicegate.voice import audio, consent
from voicegate.voice.hypotheses import LEXICONS, SPOKEN
from voicegate.voice.prompts import Prompt
from voicegate.voice.whisper import FasterWhisperTranscriber

# Encoder frames the forced decodings attend over: a 1 s clip, its lead-in and the tail.
KEEP = 150
Scores = list[float]
CLIP = Path(__file__).resolve().parents[1] / "fixtures/audio/clips/espeak_hi_doosra.flac"


def grouped(t: FasterWhisperTranscriber, full: Any, tok: Prompt, seqs: list[list[int]]) -> Scores:
    """The scores as one call per token length gave them."""
    scores = [0.0] * len(seqs)
    by_length: dict[int, list[int]] = {}
    for k, ids in enumerate(seqs):
        by_length.setdefault(len(ids), []).append(k)
    for group in by_length.values():
        batch = t._forced(full, [0] * len(group), KEEP, tok, [seqs[k] for k in group])
        for k, score in zip(group, batch, strict=True):
            scores[k] = score
    return scores


def one_call(t: FasterWhisperTranscriber, full: Any, tok: Prompt, seqs: list[list[int]]) -> Scores:
    """The scores as the recogniser gives them now."""
    return t._forced(full, [0] * len(seqs), KEEP, tok, seqs)


def main() -> int:
    """Print, per language, the readings' lengths, the largest score difference and timings."""
    import ctranslate2

    model, cards = sys.argv[1], int(sys.argv[2])
    t = FasterWhisperTranscriber(model, threads=1)
    samples = audio.decode(CLIP.read_bytes()).samples
    mel = t._mel(np.concatenate([np.zeros(8000, np.float32), samples]))
    encoded = t._model.encode(ctranslate2.StorageView.from_array(mel[None]), to_cpu=True)
    full = np.asarray(encoded)
    languages = ("en", "hi") if t.multilingual else ("en",)
    lexicons = tuple(lex for lang in languages for lex in LEXICONS[lang])
    for lang in languages:
        tok = t._prompt(lang, t._context("card" if cards > 1 else "", lang))
        readings = consent.readings(cards, Stage.CHOOSE, lexicons)
        seqs = [tok.encode(" " + r.text) for r in readings if SPOKEN[r.lang] == lang]
        pairs = zip(grouped(t, full, tok, seqs), one_call(t, full, tok, seqs), strict=True)
        diff = max(abs(a - b) for a, b in pairs if np.isfinite(a))
        lengths = sorted(Counter(map(len, seqs)).items())
        print(f"{model} {lang}: {len(seqs)} readings, lengths {lengths}, largest difference {diff}")
        for way in (grouped, one_call, grouped, one_call):
            runs = []
            for _ in range(3):
                started = time.perf_counter()
                way(t, full, tok, seqs)
                runs.append((time.perf_counter() - started) * 1000)
            print(f"  {way.__name__}: {np.median(runs):.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
