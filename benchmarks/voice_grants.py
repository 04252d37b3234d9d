"""Grants by voice in synthetic voices: how many "yes, for N minutes" takes make the grant, and
that the near misses, hedges and contradictions beside them release nothing.

    .venv/bin/python benchmarks/voice_grants.py --out bench-out/voice-grants.tsv

Says every phrase below in eight espeak-ng English voices and piper's joe, with a quarter second
of quiet before and half a second after, and decides each take through the server's own voice
pipeline (``VoicePipeline`` over tiny.en with its answer model, one card at the choose stage,
no replay guard): the grammar's length (``consent.grant_of``), the answer part cut at the first
pause (``leading.answer_part``) and decided as a plain yes. Prints, per phrase, the takes that
made the grant of the minutes said, those that released without one, and those that released
anything at all where nothing may be. Synthetic speech only: it says how the rules read these
voices, not a person.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training"))

VOICES = ("en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-us-nyc", "en+f3", "en+m3",
          "en-029", "piper")  # fmt: skip
# (phrase, the minutes it must grant; 0: it must release nothing)
PHRASES = (
    ("yes, for ten minutes", 10), ("yes, for five minutes", 5), ("yes, for two minutes", 2),
    ("okay, for ten minutes", 10), ("yes, for the next ten minutes", 10),
    ("yes for ten minutes", 10),
    ("no, for ten minutes", 0), ("maybe, for ten minutes", 0), ("yes, maybe for ten minutes", 0),
    ("yes, for ten minutes, no", 0), ("not yes, for ten minutes", 0),
    ("yesterday, for ten minutes", 0), ("guess, for ten minutes", 0), ("yes, for ten hours", 0),
    ("yes, for about ten minutes", 0), ("for ten minutes", 0), ("yes, for ten or so minutes", 0),
    ("yes, wait ten minutes", 0),
)  # fmt: skip
SR = 16_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="one row per take (TSV)")
    args = parser.parse_args()
    import sound

    from voicegate.domain import Stage
    from voicegate.voice.pipeline import VoicePipeline
    from voicegate.voice.whisper import FasterWhisperTranscriber

    pipeline = VoicePipeline(FasterWhisperTranscriber("tiny.en", device="cpu", threads=2), None)
    piper = sound.piper(20261206)
    tally: dict[str, Counter[str]] = {p: Counter() for p, _ in PHRASES}

    async def run() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w") as out:
            for phrase, minutes in PHRASES:
                for voice in VOICES:
                    said = (
                        piper(phrase, 100)
                        if voice == "piper"
                        else sound.espeak(phrase, voice, 160, 50)
                    )
                    x = np.concatenate([np.zeros(SR // 4), said, np.zeros(SR // 2)])
                    buf = io.BytesIO()
                    sf.write(buf, x.astype(np.float32), SR, format="WAV", subtype="PCM_16")
                    r = await pipeline.decide(buf.getvalue(), user="u", cards=1, stage=Stage.CHOOSE)
                    got = (
                        "granted"
                        if r.grant_minutes == minutes and minutes
                        else ("released" if r.decision.releases else "nothing")
                    )
                    if r.decision.releases and r.grant_minutes not in (None, minutes):
                        got = "wrong_minutes"
                    tally[phrase][got] += 1
                    reason = r.decision.reason.value if r.decision.reason else ""
                    heard = r.transcripts[0] if r.transcripts else ""
                    out.write(f"{phrase}\t{voice}\t{heard}\t{got}\t{r.rule}\t{reason}\n")

    asyncio.run(run())
    print(f"{'phrase':32} {'grant':>6} {'once':>5} {'none':>5}  (of {len(VOICES)} voices)")
    for phrase, minutes in PHRASES:
        c = tally[phrase]
        wrong = c["released"] + c["wrong_minutes"] if not minutes else c["wrong_minutes"]
        flag = "  RELEASED" if wrong else ""
        print(f"{phrase:32} {c['granted']:>6} {c['released']:>5} {c['nothing']:>5}{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
