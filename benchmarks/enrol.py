"""Personal answers on real speech: template matching alone, and fused with the recogniser.

    # the features the server makes of every FSDD take: tiny.en's encoder frames (~10 min)
    .venv/bin/python benchmarks/enrol.py frames --out bench-out/frames-tiny.en.npz
    # templates alone: per speaker, enrol takes 0-2 of "one".."five", decide the rest
    .venv/bin/python benchmarks/enrol.py templates --frames bench-out/frames-tiny.en.npz
    .venv/bin/python benchmarks/enrol.py templates --frames bench-out/frames-tiny.en.npz --sweep
    # fused with the recogniser's cached hearings (benchmarks/calibrate.py hear, FSDD only)
    .venv/bin/python benchmarks/fusion.py --cache bench-out/fsdd-E.jsonl \
        --frames bench-out/frames-tiny.en.npz
    # time added per decision with 30 templates enrolled
    .venv/bin/python benchmarks/enrol.py time --templates 30 --frames bench-out/frames-tiny.en.npz
    # nearest-template accuracy, encoder frames against MFCC, log-mel, MFCC + deltas:
    # benchmarks/enrol_features.py
    # replays of enrolment takes refused, new takes not flagged
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/enrol.py replay

The set is ``../shared/corpus/fsdd`` (4 speakers × 50 takes × the digits 0-9): choose one of
five cards, "one".."five" choose that card, "zero" and "six".."nine" must release nothing. Each
speaker enrols ``--takes`` takes (0, 1, 2 by default) of "one".."five"; every other take of every
digit is decided. Constants are chosen on the calibration split (jackson, nicolas) only; theo
and yweweler are the report split. Without ``--frames`` the templates are MFCCs (the features
of the unit tests' fake recogniser), for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind
from voicegate.voice import answer_model, audio, calibration, decision, templates

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("VOICEGATE_CORPUS", ROOT.parent / "shared" / "corpus"))
CALIBRATION = ("jackson", "nicolas")
CARDS = 5


@dataclass(frozen=True, slots=True)
class Take:
    """One FSDD recording and its features."""

    id: str
    speaker: str
    digit: int
    take: int
    features: templates.Matrix


# One decided take: the take, the transcript's reading, the hypotheses, the ruling, the match
# and the radius of each meaning its speaker taught.
Row = tuple[
    Take,
    Decision,
    list[decision.Hypothesis],
    decision.Ruling,
    templates.Match,
    dict[Decision, float],
]


def load(speakers: tuple[str, ...] | None = None, frames: str | None = None) -> list[Take]:
    """Every FSDD take (of ``speakers`` when given), decoded as the server decodes uploads: its
    encoder frames from the ``frames`` cache (``enrol.py frames``), else its MFCCs."""
    cached = np.load(frames) if frames else None
    out = []
    for path in sorted((CORPUS / "fsdd").glob("*.wav")):
        digit, speaker, take = path.stem.split("_")
        if speakers and speaker not in speakers:
            continue
        if cached is not None:
            features = cached[path.stem].astype(np.float32)
        else:
            features = templates.features(audio.decode(path.read_bytes()).samples)
        out.append(Take(path.stem, speaker, int(digit), int(take), features))
    return out


def run_frames(args: argparse.Namespace) -> int:
    """Every FSDD take's features as the server makes them (``Transcriber.frames``), cached."""
    from voicegate.voice.whisper import FasterWhisperTranscriber

    recogniser = FasterWhisperTranscriber(args.model, device="cpu", threads=args.threads)
    out = {}
    started = time.perf_counter()
    for k, path in enumerate(sorted((CORPUS / "fsdd").glob("*.wav"))):
        out[path.stem] = recogniser.frames(audio.decode(path.read_bytes()).samples)
        if k % 200 == 0:
            print(f"{k} takes, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    np.savez_compressed(args.out, **{k: v.astype(np.float16) for k, v in out.items()})  # type: ignore[arg-type]
    print(f"{len(out)} takes' frames of {args.model} in {args.out}")
    return 0


def unheard(folder: Path, model: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every FSDD take, as heard by an answer model that never heard its speaker (a fold model
    of ``training/answer_model.py fit``; ``folder`` is its ``--out``): its embedding and its
    probabilities of ``answer_model.CLASSES``, from the short-window frames of ``features``."""
    sys.path.insert(0, str(ROOT / "training"))
    import data  # training/data.py: each FSDD speaker is a fold of their own

    with np.load(folder / "features.npz") as z:
        frames, offsets = z["frames"], z["offsets"]
    rows = [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]
    models = {}
    for fold in range(data.FOLDS):
        with np.load(folder / f"fold{fold}.npz") as z:
            weights = dict(z)
        models[fold] = answer_model.from_arrays(model, weights, {"classes": answer_model.CLASSES})
    out = {}
    for i, r in enumerate(rows):
        if r["source"] == "fsdd" and r["copy"] == 0:
            x = answer_model.paired(frames[offsets[i] : offsets[i + 1]].astype(np.float32))
            m = models[r["fold"]]
            out[r["id"].split("/", 1)[1]] = (m.embedding(x), m.read(x))
    return out


def run_prototypes(args: argparse.Namespace) -> int:
    """Every FSDD take as a prototype (``unheard``'s embedding), kept as one frame of unit
    length, so the template rule's DTW distance between two takes is half the straight line
    between their directions."""
    heard = unheard(Path(args.answer_model), args.model)
    out = {k: (e / np.linalg.norm(e))[None, :].astype(np.float32) for k, (e, _) in heard.items()}
    np.savez_compressed(args.out, **out)
    print(f"{len(out)} takes' prototypes of {args.model}'s fold models in {args.out}")
    return 0


def card(digit: int) -> Decision:
    """The answer a digit means on a five-card set."""
    return Decision(Kind.CHOOSE, card=digit)


def wanted(digit: int) -> Decision | None:
    """What a spoken digit must release: its card for 1..5, nothing otherwise."""
    return card(digit) if 1 <= digit <= CARDS else None


def outcome(digit: int, released: Decision | None) -> str:
    """right, wrong (a wrong card), released (a negative released), refused or held."""
    want = wanted(digit)
    if want is None:
        return "released" if released is not None and released.releases else "held"
    if released == want:
        return "right"
    return "wrong" if released is not None and released.releases else "refused"


def split(takes: list[Take], enrol: int) -> dict[str, tuple[list[templates.Template], list[Take]]]:
    """Per speaker: the templates (the first ``enrol`` takes of 1..5) and the takes to decide."""
    out: dict[str, tuple[list[templates.Template], list[Take]]] = {}
    for t in takes:
        enrolled, rest = out.setdefault(t.speaker, ([], []))
        if 1 <= t.digit <= CARDS and t.take < enrol:
            enrolled.append(templates.Template(card(t.digit), t.features))
        else:
            rest.append(t)
    return out


def nearest_table(
    takes: list[Take], enrol: int
) -> dict[str, tuple[list[templates.Template], list[tuple[Take, dict[Decision, float]]]]]:
    """Per speaker: the templates, and each take to decide with its nearest distance per card."""
    out = {}
    for speaker, (enrolled, rest) in split(takes, enrol).items():
        rows = []
        for t in rest:
            nearest: dict[Decision, float] = {}
            for e in enrolled:
                d = templates.distance(t.features, e.features)
                nearest[e.meaning] = min(d, nearest.get(e.meaning, float("inf")))
            rows.append((t, nearest))
        out[speaker] = (enrolled, rows)
    return out


def template_table(
    near: dict[str, tuple[list[templates.Template], list[tuple[Take, dict[Decision, float]]]]],
    margin: float,
    slack: float,
    reach: float,
) -> dict[str, Counter[str]]:
    """Per speaker, the outcome counts of the template rule alone."""
    table: dict[str, Counter[str]] = {}
    for speaker, (enrolled, rows) in near.items():
        r = templates.radii(enrolled, slack, reach)
        counts: Counter[str] = Counter()
        for t, nearest in rows:
            counts[outcome(t.digit, templates.judge(nearest, r, margin).meaning)] += 1
        table[speaker] = counts
    return table


def print_table(title: str, table: dict[str, Counter[str]]) -> None:
    """A markdown table: per speaker, positives right / wrong / refused, negatives released."""
    print(f"\n{title}")
    print("| speaker | split | right | of | wrong cards | refused | negatives released | of |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    total: Counter[str] = Counter()
    for speaker in sorted(table):
        c = table[speaker]
        total.update(c)
        positives = c["right"] + c["wrong"] + c["refused"]
        negatives = c["released"] + c["held"]
        where = "calibration" if speaker in CALIBRATION else "report"
        print(
            f"| {speaker} | {where} | {c['right']} ({100 * c['right'] / positives:.1f} %) | "
            f"{positives} | {c['wrong']} | {c['refused']} | {c['released']} | {negatives} |"
        )
    positives = total["right"] + total["wrong"] + total["refused"]
    print(
        f"| all | | {total['right']} ({100 * total['right'] / positives:.1f} %) | {positives} | "
        f"{total['wrong']} | {total['refused']} | {total['released']} | "
        f"{total['released'] + total['held']} |"
    )


def run_templates(args: argparse.Namespace) -> int:
    """The template rule alone, at the shipped constants (and a sweep with ``--sweep``)."""
    started = time.perf_counter()
    takes = load(frames=args.frames)
    print(f"{len(takes)} takes loaded in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    started = time.perf_counter()
    near = nearest_table(takes, args.takes)
    elapsed = time.perf_counter() - started
    if args.sweep:
        print("| margin | slack | reach | calibration right | wrong | released | report right | "
              "wrong | released |")  # fmt: skip
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for margin in (1.0, 1.1, 1.2):
            for slack in (1.0, 1.5, 2.0):
                for reach in (0.5, 0.6, 0.7, 0.8, 1.0):
                    table = template_table(near, margin, slack, reach)
                    cal = sum((table[s] for s in table if s in CALIBRATION), Counter())
                    rep = sum((table[s] for s in table if s not in CALIBRATION), Counter())
                    print(
                        f"| {margin} | {slack} | {reach} | {cal['right']} | {cal['wrong']} | "
                        f"{cal['released']} | {rep['right']} | {rep['wrong']} | "
                        f"{rep['released']} |"
                    )
    kind = "encoder frames" if args.frames else "MFCC"
    print_table(
        f"nearest template alone (no rejection): {kind} + DTW",
        template_table(near, 1.0, float("inf"), float("inf")),
    )
    table = template_table(near, templates.MARGIN, templates.SLACK, templates.REACH)
    print_table(
        f"templates alone: {kind} + DTW, {args.takes} takes enrolled, margin {templates.MARGIN}, "
        f"slack {templates.SLACK}, reach {templates.REACH}",
        table,
    )
    decided = sum(sum(c.values()) for c in table.values())
    print(f"\n{decided} answers in {elapsed:.1f} s: {1000 * elapsed / decided:.1f} ms each "
          f"against {5 * args.takes} templates")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({k: dict(v) for k, v in table.items()}, indent=2))
    return 0


def fused_rows(
    near: dict[str, tuple[list[templates.Template], list[tuple[Take, dict[Decision, float]]]]],
    cache: Path,
) -> list[Row]:
    """Per decided take that the recogniser heard: transcript, hypotheses, ruling, match and
    its speaker's radii."""
    import calibrate  # the cached hearings and the server's own hypothesis code

    heard = calibrate.load(cache)
    readings = calibrate.readings(("en",))[(CARDS, Stage.CHOOSE)]
    shipped = calibration.of("tiny.en")
    rows: list[Row] = []
    for _speaker, (enrolled, takes) in near.items():
        r = templates.radii(enrolled)
        radius = {meaning: each.radius for meaning, each in r.items()}
        for t, nearest in takes:
            h = heard.get(t.id)
            if h is None:
                continue
            m = templates.judge(nearest, r)
            if h.refusal is not None:
                v = decision.Ruling(
                    Decision(Kind.REFUSE, reason=h.refusal), 0.0, decision.Rule.RECOGNISER
                )
                rows.append((t, v.decision, [], v, m, radius))
                continue
            said, hyps = calibrate.verdicts(h, readings, CARDS, Stage.CHOOSE)
            v = decision.weigh(hyps, said, Stage.CHOOSE, shipped, CARDS)
            rows.append((t, said, hyps, v, m, radius))
    return rows


# Every card of the five-card set is taught.
wanted_cards = tuple(card(k) for k in range(1, CARDS + 1))


def run_time(args: argparse.Namespace) -> int:
    """Time added per decision with ``--templates`` enrolled: the match (and the answer's
    MFCCs, without ``--frames``; encoder frames come with the decision's own hearing)."""
    takes = [t for t in load(("jackson",), args.frames) if 1 <= t.digit <= CARDS]
    per = args.templates // CARDS
    enrolled = [templates.Template(card(t.digit), t.features) for t in takes if t.take < per]
    queries = [t for t in takes if t.take >= per][: args.answers]
    started = time.perf_counter()
    r = templates.radii(enrolled)
    radii_ms = 1000 * (time.perf_counter() - started)
    samples = {
        t.id: audio.decode((CORPUS / "fsdd" / f"{t.id}.wav").read_bytes()).samples for t in queries
    }
    started = time.perf_counter()
    for t in queries:
        query = t.features if args.frames else templates.features(samples[t.id])
        templates.match(query, enrolled, r)
    each = 1000 * (time.perf_counter() - started) / len(queries)
    print(f"{len(enrolled)} templates (jackson, takes 0-{per - 1} of one..five): radii once "
          f"{radii_ms:.0f} ms; per answer {each:.1f} ms over {len(queries)} answers")  # fmt: skip
    return 0


def run_replay(args: argparse.Namespace) -> int:
    """Both thresholds apart: replays of enrolment takes against the guard's history of them,
    and every new take against that history (false flags) and against the templates."""
    import replay  # benchmarks/replay.py: the transformations of docs/voice-measurements.md

    from voicegate.errors import AudioRefused
    from voicegate.voice import fingerprint

    rng = np.random.default_rng(20261201)
    takes = load()
    history: dict[str, fingerprint.Library] = {}
    samples: dict[str, np.ndarray] = {}
    for t in takes:
        samples[t.id] = audio.decode((CORPUS / "fsdd" / f"{t.id}.wav").read_bytes()).samples
    for t in takes:
        if 1 <= t.digit <= CARDS and t.take < args.takes:
            clip = audio.from_samples(samples[t.id], audio.SAMPLE_RATE)
            history.setdefault(t.speaker, fingerprint.Library()).add(
                t.id, fingerprint.load(fingerprint.features(clip))
            )
    enrolled = [t for t in takes if 1 <= t.digit <= CARDS and t.take < args.takes]
    print(f"{len(enrolled)} enrolment takes in the guard's history (threshold "
          f"{fingerprint.THRESHOLD})\n")  # fmt: skip
    print("| transformation of an enrolment take | refused as reused | refused at intake |")
    print("| --- | ---: | ---: |")
    total = reused_all = 0
    for name, make in replay.TRANSFORMS.items():
        reused = intake = 0
        for t in enrolled:
            try:
                clip = audio.decode(make(samples[t.id].astype(np.float64), rng))
            except AudioRefused:
                intake += 1
                continue
            query = fingerprint.load(fingerprint.features(clip))
            reused += history[t.speaker].match(query) is not None
        if "expected miss" not in name:
            total += len(enrolled)
            reused_all += reused + intake
        print(f"| {name} | {reused} of {len(enrolled)} | {intake} |")
    print(f"\nrefused, all but the speed changes: {reused_all} of {total} "
          f"({100 * reused_all / total:.2f} %)")  # fmt: skip
    new = [t for t in takes if not (1 <= t.digit <= CARDS and t.take < args.takes)]
    flagged = []
    for t in new:
        clip = audio.from_samples(samples[t.id], audio.SAMPLE_RATE)
        hit = history[t.speaker].match(fingerprint.load(fingerprint.features(clip)))
        if hit is not None:
            flagged.append(f"{t.id} ~ {hit[0]} ({hit[1]:.3f})")
    print(f"new takes flagged as replays of an enrolment take: {len(flagged)} of {len(new)} "
          f"({100 * len(flagged) / len(new):.3f} %): {', '.join(flagged)}")  # fmt: skip
    return 0


def main() -> int:
    """Command line: templates alone, their frames, their cost, replays (fused: fusion.py)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("templates")
    p.add_argument("--takes", type=int, default=3, help="enrolment takes per answer")
    p.add_argument("--sweep", action="store_true", help="sweep margin and slack")
    p.add_argument("--json", default=None)
    fr = sub.add_parser("frames")
    fr.add_argument("--model", default="tiny.en")
    fr.add_argument("--threads", type=int, default=2)
    fr.add_argument("--out", required=True, help="an .npz file")
    pr = sub.add_parser("prototypes")
    pr.add_argument("--model", default="tiny.en")
    pr.add_argument("--answer-model", default=str(ROOT / "bench-out" / "answer-model"),
                    help="training/answer_model.py's --out, after features and fit")  # fmt: skip
    pr.add_argument("--out", required=True, help="an .npz file, read as --frames")
    t = sub.add_parser("time")
    t.add_argument("--templates", type=int, default=30)
    t.add_argument("--answers", type=int, default=100)
    for each in (p, t):
        each.add_argument("--frames", help="encoder frames (enrol.py frames); else MFCC")
    r = sub.add_parser("replay")
    r.add_argument("--takes", type=int, default=3, help="enrolment takes per answer")
    args = parser.parse_args()
    np.seterr(all="ignore")
    run = {
        "templates": run_templates,
        "frames": run_frames,
        "prototypes": run_prototypes,
        "time": run_time,
        "replay": run_replay,
    }[args.command]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
