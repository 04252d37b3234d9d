"""Card phrases in many synthetic voices: "the second one" and its neighbours on two cards.

    .venv/bin/python benchmarks/phrases.py --out bench-out/phrases.tsv [--compare]

Synthesises each phrase below in 17 espeak-ng English voices, hears every clip once with
tiny.en (the card question's prompt, as the server does) and decides it on a two-card set at
the choose stage through the server's own code (``hypotheses.hypotheses``, ``decision.weigh``).
Prints, per phrase, how many were decided right and how many released a wrong card.
``--compare`` decides the same hearings a second time with partial hearings switched off (a
text inside the best transcript keeps its own reading), to show what that rule changes.
Synthetic speech only: it says how the decision reads one phrase in many voices, not a person.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

VOICES = (
    "en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-029", "en-gb-x-gbclan",
    "en-gb-x-gbcwmd", "en-us-nyc", "en+f2", "en+f3", "en+m3", "en+m7", "en-us+f4", "en-gb+f5",
    "en+klatt", "en+croak", "en+whisper",
)  # fmt: skip
# (phrase, what it must decide on two cards: "1", "2", or "R" for releasing nothing)
PHRASES = (
    ("two", "2"), ("number two", "2"), ("the second one", "2"), ("second one", "2"),
    ("the second", "2"), ("option two", "2"), ("yes the second one", "2"),
    ("the first one", "1"), ("number one", "1"), ("first one", "1"),
    ("not the second one", "R"), ("maybe the second one", "R"), ("the third one", "R"),
    ("the second one no", "R"), ("go to", "R"),
)  # fmt: skip
CARDS = 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="one row per clip (TSV)")
    parser.add_argument("--compare", action="store_true", help="also decide without partials")
    args = parser.parse_args()

    from voicegate.domain import Stage
    from voicegate.reasons import Kind
    from voicegate.voice import calibration, consent, decision
    from voicegate.voice.audio import decode
    from voicegate.voice.hypotheses import hypotheses, read_transcript
    from voicegate.voice.transcribe import Hearing, Utterance
    from voicegate.voice.whisper import FasterWhisperTranscriber

    stage = Stage.CHOOSE
    model = FasterWhisperTranscriber("tiny.en", device="cpu")
    readings = consent.readings(CARDS, stage, ("en",))
    texts = tuple(r.text for r in readings)
    question = calibration.question(stage, CARDS)

    def outcome(hearing: Hearing, partial: bool) -> tuple[str, str, float]:
        transcript = read_transcript(hearing.text, CARDS, stage)
        scored = hypotheses(readings, hearing, CARDS, stage, partial=partial)
        ruling = decision.weigh(scored, transcript, stage, model.calibration, CARDS)
        d = ruling.decision
        got = str(d.card) if d.kind is Kind.CHOOSE else ("R" if not d.releases else d.kind.value)
        return got, ruling.rule, ruling.probability

    rules = (True, False) if args.compare else (True,)
    tally: dict[tuple[str, bool], list[int]] = defaultdict(lambda: [0, 0])
    rows = [(p, want, v) for p, want in PHRASES for v in VOICES]
    with tempfile.TemporaryDirectory() as tmp, args.out.open("w") as out:
        for start in range(0, len(rows), 4):
            batch = rows[start : start + 4]
            utterances = []
            for k, (phrase, _, voice) in enumerate(batch):
                wav = Path(tmp) / f"{start + k}.wav"
                subprocess.run(["espeak-ng", "-v", voice, "-w", str(wav), phrase], check=True)
                samples = decode(wav.read_bytes()).samples
                utterances.append(Utterance(samples, ("en",), texts, question=question))
            for (phrase, want, voice), hearing in zip(
                batch, model.transcribe_many(utterances), strict=True
            ):
                cells = [phrase, want, voice, hearing.text]
                for partial in rules:
                    got, rule, probability = outcome(hearing, partial)
                    counts = tally[(phrase, partial)]
                    counts[0] += got == want or (want == "R" and got == "R")
                    counts[1] += got not in ("R", want, "cancel", "more_time")
                    cells += [got, rule, f"{probability:.3f}"]
                out.write("\t".join(cells) + "\n")
    extra = "  without partial hearings" if args.compare else ""
    print(f"{'phrase':22} {'right':>6} {'wrong':>6}{extra}")
    for phrase, _ in PHRASES:
        right, wrong = tally[(phrase, True)]
        line = f"{phrase:22} {right:>3}/{len(VOICES)} {wrong:>6}"
        if args.compare:
            line += f"  {tally[(phrase, False)][0]:>3}/{len(VOICES)} {tally[(phrase, False)][1]:>3}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
