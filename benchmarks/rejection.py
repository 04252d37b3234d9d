"""Templates alone, with the user's other speech taught as "not an answer" (no recogniser).

    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/rejection.py --other 0,6,7 \
        --frames bench-out/frames-tiny.en.npz

Per FSDD speaker: takes 0-2 of "one".."five" are the answers' templates and takes 0-2 of the
``--other`` digits are templates of "not an answer". Every other take is decided by the template
rule of ``voicegate.voice.templates`` with "not an answer" as one more meaning: the nearest
meaning must be an answer, beat every other meaning (not-an-answer included) by the margin, and
lie inside its radius (the radius's reach now also counting the not-an-answer takes). Counted
apart: digits taught as not an answer (their later takes) and digits never taught (the words a
user's real other speech stands for).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

import enrol

from voicegate.domain import Decision
from voicegate.reasons import Kind
from voicegate.voice import templates

OTHER = Decision(Kind.REFUSE)  # "not an answer", as a meaning of its own


def main() -> int:
    """Print, per speaker and setting, right / wrong cards / taught words and new words released."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--other", default="0,6,7", help="digits taught as not an answer")
    parser.add_argument("--takes", type=int, default=3)
    parser.add_argument("--frames", help="encoder frames (enrol.py frames); else MFCC")
    args = parser.parse_args()
    other = {int(d) for d in args.other.split(",")}
    takes = enrol.load(frames=args.frames)
    print("| margin | reach | speaker | right of 235 | wrong cards | taught words released | "
          "new words released |")  # fmt: skip
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for margin, reach in ((1.1, 0.7), (1.1, 1.0), (1.2, 1.0)):
        for speaker in sorted({t.speaker for t in takes}):
            mine = [t for t in takes if t.speaker == speaker]
            taught = [
                t for t in mine if t.take < args.takes and (1 <= t.digit <= 5 or t.digit in other)
            ]
            meaning = {t.id: enrol.wanted(t.digit) or OTHER for t in taught}
            tpl = [templates.Template(meaning[t.id], t.features) for t in taught]
            radii = templates.radii(tpl, reach=reach)
            counts: Counter[str] = Counter()
            for t in mine:
                if t.id in meaning:
                    continue
                nearest: dict[Decision, float] = {}
                for k in tpl:
                    d = templates.distance(t.features, k.features)
                    nearest[k.meaning] = min(d, nearest.get(k.meaning, float("inf")))
                got = templates.judge(nearest, radii, margin).meaning
                released = got is not None and got != OTHER
                if enrol.wanted(t.digit) is not None:
                    counts[
                        "right"
                        if got == enrol.wanted(t.digit)
                        else "wrong"
                        if released
                        else "refused"
                    ] += 1
                elif released:
                    counts["taught" if t.digit in other else "new"] += 1
            print(f"| {margin} | {reach} | {speaker} | {counts['right']} | {counts['wrong']} | "
                  f"{counts['taught']} | {counts['new']} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
