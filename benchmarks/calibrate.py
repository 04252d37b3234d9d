"""Fit and report the voice decision's thresholds on real speech, split by speaker.

    # 1. hear every clip once with the real recogniser (resumable; one JSON line per clip)
    .venv/bin/python benchmarks/calibrate.py hear --model tiny.en --cache bench-out/hear-tiny.jsonl
    .venv/bin/python benchmarks/calibrate.py hear --model base --lang en --lang hi \\
        --cache bench-out/hear-base.jsonl --fsdd-takes 10
    # 2. fit on the calibration split, report on the other, print tables (and --json)
    .venv/bin/python benchmarks/calibrate.py fit --model tiny.en --cache bench-out/hear-tiny.jsonl

The sets are ``../shared/corpus/fsdd`` (choose one of five cards: "one".."five" choose that
card, "zero" and "six".."nine" must release nothing) and ``../shared/corpus/speech_commands``
(one card, at the choose stage and at the final stage: "yes" confirms, "no" and "stop" cancel,
every other word must release nothing). The calibration split is FSDD's jackson and nicolas and the
speech_commands speakers whose id starts with 0 or 1; the report split is the rest. Each
threshold (``card`` for a choice among cards, ``yes`` for a one-card or final yes) is the lowest
probability, from 0.50 up, at which the calibration split releases nothing wrongly. A hearing
holds every score the decision reads, so ``fit`` runs the same decision code as the server
(``hypotheses.hypotheses`` and ``decision.weigh``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from voicegate.domain import Decision, Stage
from voicegate.errors import AudioRefused
from voicegate.reasons import Kind
from voicegate.voice import audio, calibration, consent, decision, windows
from voicegate.voice.hypotheses import LEXICONS, SPOKEN, hypotheses, read_transcript
from voicegate.voice.transcribe import Heard, Hearing, Transcriber, Utterance

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("VOICEGATE_CORPUS", ROOT.parent / "shared" / "corpus"))
# One US speaker and the accented one, so the thresholds meet the speech that is misheard most;
# theo (US) and yweweler (German accent) report.
CALIBRATION_FSDD = ("jackson", "nicolas")
CALIBRATION_PREFIXES = ("0", "1")
# (set, cards, stage) the clips are decided at.
STAGES = (("fsdd", 5, Stage.CHOOSE), ("sc", 1, Stage.CHOOSE), ("sc", 1, Stage.FINAL))
CONFIRM = Decision(Kind.CONFIRM)
CANCEL = Decision(Kind.CANCEL)
# Which threshold a (several cards?, stage) question uses: ``Calibration.need``.
KINDS = {(True, Stage.CHOOSE): "card", (False, Stage.CHOOSE): "yes", (False, Stage.FINAL): "yes"}
GRID = [round(0.5 + 0.01 * i, 2) for i in range(50)]
# The prior log-odds of "anything else" tried at a choice among cards (``Calibration.other``):
# from 0 (as Whisper scored it) to -5 by halves, then -6 and -8, where it counts for under 0.1 %
# (on two machines' hearings the calibration split's best was reached by -5:
# docs/voice-measurements.md).
OTHER_GRID = [-i / 2 for i in range(11)] + [-6.0, -8.0]
# Card thresholds ``fit --grid`` prints beside each prior.
CARD_GRID = (0.94, 0.95, 0.96, 0.97)


@dataclass(frozen=True, slots=True)
class Clip:
    """One recording, who said it, and what it must decide."""

    set: str
    id: str
    path: Path
    speaker: str
    label: str

    @property
    def calibration(self) -> bool:
        """True for the clips thresholds are fitted on."""
        if self.set == "fsdd":
            return self.speaker in CALIBRATION_FSDD
        return self.speaker.startswith(CALIBRATION_PREFIXES)


def clips(fsdd_takes: int, per_word: int = 10**6) -> Iterator[Clip]:
    """FSDD (the first ``fsdd_takes`` takes of each digit and speaker), then speech_commands
    (the first ``per_word`` recordings of each word, in file order)."""
    for path in sorted((CORPUS / "fsdd").glob("*.wav")):
        digit, speaker, take = path.stem.split("_")
        if int(take) < fsdd_takes:
            yield Clip("fsdd", path.stem, path, speaker, digit)
    for folder in sorted(p for p in (CORPUS / "speech_commands").iterdir() if p.is_dir()):
        for path in sorted(folder.glob("*.wav"))[:per_word]:
            yield Clip("sc", f"{folder.name}/{path.stem}", path, path.stem.split("_")[0],
                       folder.name)  # fmt: skip


def expected(clip: Clip, cards: int) -> Decision | None:
    """The release or cancel this clip must decide; None when it must release nothing."""
    if clip.set == "fsdd":
        digit = int(clip.label)
        return Decision(Kind.CHOOSE, card=digit) if 1 <= digit <= cards else None
    return {"yes": CONFIRM, "no": CANCEL, "stop": CANCEL}.get(clip.label)


def readings(langs: tuple[str, ...]) -> dict[tuple[int, Stage], list[consent.Reading]]:
    """The readings of every stage the clips are decided at."""
    lexicons = tuple(lex for lang in langs for lex in LEXICONS[lang])
    return {(c, s): consent.readings(c, s, lexicons) for _, c, s in STAGES}


def hear(args: argparse.Namespace) -> int:
    """Transcribe every clip not yet in the cache and append its hearing."""
    from voicegate.voice.whisper import FasterWhisperTranscriber

    langs = tuple(args.langs or ["en"])
    if args.window == "short":
        from short_window import ShortWindowTranscriber

        tail = round(args.short_tail * 100)
        transcriber: Transcriber = ShortWindowTranscriber(
            args.model, threads=args.threads, tail=tail
        )
    else:
        transcriber = FasterWhisperTranscriber(args.model, threads=args.threads)
    union = {r.text: r for rs in readings(langs).values() for r in rs}
    texts = tuple(union)
    spoken = tuple(SPOKEN[union[t].lang] for t in texts)
    cache = Path(args.cache)
    cache.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["id"] for line in cache.open()} if cache.exists() else set()
    index, count = args.shard
    todo = [
        c
        for n, c in enumerate(clips(args.fsdd_takes, args.per_word))
        if c.id not in done and (not args.calibration_only or c.calibration) and n % count == index
    ]
    print(f"{len(done)} cached, {len(todo)} to hear", file=sys.stderr)
    started = time.perf_counter()
    with cache.open("a") as out:
        for n, clip in enumerate(todo, 1):
            # Asked as the server asks it: which of five cards (FSDD), or yes or no.
            question = "card" if clip.set == "fsdd" else "yes"
            h = hear_one(transcriber, clip.path, langs, texts, spoken, question)
            out.write(json.dumps(record(clip.id, h), ensure_ascii=False) + "\n")
            if n % 100 == 0:
                rate = n / (time.perf_counter() - started)
                print(f"{n}/{len(todo)}, {rate:.2f} clips/s", file=sys.stderr)
    return 0


def hear_one(
    transcriber: Transcriber,
    path: Path,
    langs: tuple[str, ...],
    texts: tuple[str, ...],
    spoken: tuple[str, ...],
    question: str,
) -> Hearing:
    """One clip heard as the server hears it: every reading ``texts`` scored in its language
    ``spoken``; audio the server would refuse before the recogniser is refused here too."""
    try:
        samples = audio.decode(path.read_bytes()).samples
    except AudioRefused as exc:
        return Hearing("", "", 0.0, 0.0, refusal=exc.reason)
    utterance = Utterance(samples, langs, texts, spoken, question=question)
    return transcriber.transcribe_many([utterance])[0]


def record(clip_id: str, h: Hearing) -> dict[str, object]:
    """One cache line: every score of a hearing the decision reads (``load`` reads it back)."""
    return {
        "id": clip_id,
        "text": h.text,
        "language": h.language,
        "nsp": h.no_speech_prob,
        "avg": h.avg_logprob,
        "refusal": h.refusal.value if h.refusal else None,
        "scores": dict(h.scores),
        "hypotheses": [[x.text, x.language, x.score, x.reading] for x in h.hypotheses],
        "timings_ms": dict(h.timings_ms),
    }


def load(cache: Path) -> dict[str, Hearing]:
    """The cached hearings by clip id."""
    from voicegate.reasons import Reason

    out = {}
    for line in cache.open():
        r = json.loads(line)
        out[r["id"]] = Hearing(
            r["text"],
            r["language"],
            r["nsp"],
            r["avg"],
            tuple((t, float(s)) for t, s in r["scores"].items()),
            tuple(Heard(t, lang, float(s), reading) for t, lang, s, reading in r["hypotheses"]),
            r["timings_ms"],
            Reason(r["refusal"]) if r["refusal"] else None,
        )
    return out


def verdicts(
    hearing: Hearing, rs: list[consent.Reading], cards: int, stage: Stage
) -> tuple[Decision, list[decision.Hypothesis]]:
    """The grammar's reading of the best transcript and every hypothesis, as the server has them."""
    return read_transcript(hearing.text, cards, stage), hypotheses(rs, hearing, cards, stage)


def outcome(clip: Clip, cards: int, d: Decision) -> str:
    """right, wrong (a wrong release), refused (a right answer not taken) or held (no release)."""
    want = expected(clip, cards)
    if want is None:
        return "wrong" if d.releases else "held"
    if d == want:
        return "right"
    return "wrong" if d.releases else "refused"


def fit(args: argparse.Namespace) -> int:
    """Fit the thresholds on the calibration split and report both splits."""
    langs = tuple(args.langs or ["en"])
    heard = load(Path(args.cache))
    stages = readings(langs)
    base = calibration.of(args.model)
    table = [c for c in clips(args.fsdd_takes, args.per_word) if c.id in heard]
    prepared: list[tuple[Clip, int, Stage, Decision, list[decision.Hypothesis] | None]] = []
    for clip in table:
        for set_, cards, stage in STAGES:
            if set_ == clip.set:
                h = heard[clip.id]
                if h.refusal is not None:
                    said = read_transcript(h.text, cards, stage)
                    refused = decision.refused_by_recogniser(h.refusal, said).decision
                    prepared.append((clip, cards, stage, refused, None))
                else:
                    t, hyps = verdicts(h, stages[(cards, stage)], cards, stage)
                    prepared.append((clip, cards, stage, t, hyps))

    def run(
        need: float, kind: str, support: int, other: float | None = None
    ) -> list[tuple[Clip, int, str]]:
        prior = base.other if other is None else other
        cal = replace(base, card=need, yes=need, support=support, other=prior)
        rows = []
        for clip, cards, st, t, hyps in prepared:
            if KINDS[(cards > 1, st)] != kind:
                continue
            # A hearing the recogniser refused (``hyps`` None) is decided already.
            d = t if hyps is None else decision.weigh(hyps, t, st, cal, cards).decision
            rows.append((clip, cards, outcome(clip, cards, d)))
        return rows

    def lowest(kind: str, other: float | None = None) -> float:
        """The lowest threshold at which the calibration split releases nothing wrongly."""
        for need in GRID:
            rows = run(need, kind, base.support, other)
            if not any(o == "wrong" for c, _, o in rows if c.calibration):
                return need
        return math.inf  # no threshold holds: that kind of answer is never released by voice

    def right(kind: str, need: float, other: float) -> int:
        rows = run(need, kind, base.support, other)
        return sum(o == "right" for c, _, o in rows if c.calibration)

    # The prior of "anything else" at a choice among cards: the one whose own fitted threshold
    # gets the calibration split the most right answers (the nearest 0 of equals).
    priors = {other: lowest("card", other) for other in OTHER_GRID}
    rights = {other: right("card", priors[other], other) for other in OTHER_GRID}
    most = max(OTHER_GRID, key=lambda o: (rights[o], o))
    # A threshold per kind of question, fitted on the answers to that kind.
    fitted: dict[str, float] = {"card": priors[most], "yes": lowest("yes")}
    report: dict[str, object] = {
        "model": args.model,
        "languages": list(langs),
        "support": base.support,
        "fitted": fitted,
        "fitted_other": most,
        "shipped": {"card": base.card, "yes": base.yes, "other": base.other},
        "machine": platform.processor() or platform.machine(),
        "clips": len(table),
    }
    print("\nprior of anything else -> fitted card threshold, calibration right:")
    print(", ".join(f"{o}: {priors[o]} {rights[o]}" for o in OTHER_GRID))
    for label, need in (("fitted", None), ("shipped", 0.0)):
        prior = most if need is None else base.other
        print(f"\n## {label} thresholds (prior of anything else {prior})")
        block: dict[str, object] = {}
        for kind in ("card", "yes"):
            chosen = fitted[kind] if need is None else getattr(base, kind)
            rows = run(chosen, kind, base.support, most if need is None else None)
            block[kind] = summarise(rows, chosen, kind)
        report[label] = block
    if args.grid:
        print("\nchoices among cards, right answers of both splits (released wrongly):")
        print("| prior | " + " | ".join(f"card {need}" for need in CARD_GRID) + " |")
        print("| ---: |" + " ---: |" * len(CARD_GRID))
        for other in OTHER_GRID:
            cells = []
            for need in CARD_GRID:
                got = Counter(o for _, _, o in run(need, "card", base.support, other))
                cells.append(f"{got['right']} ({got['wrong']})")
            print(f"| {other} | " + " | ".join(cells) + " |")
    if args.support_sweep:
        sweep = {}
        for depth in (1, 5):
            rows = run(base.card, "card", depth) + run(base.yes, "yes", depth)
            sweep[depth] = dict(Counter(o for _, _, o in rows))
        report["support_sweep"] = sweep
        print("\nsupport depth at the shipped choose threshold:", sweep)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 0


def summarise(rows: list[tuple[Clip, int, str]], need: float, kind: str) -> dict[str, object]:
    """Print and return per split, set, speaker (FSDD) and word (speech_commands) counts."""
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for clip, _, o in rows:
        split = "calibration" if clip.calibration else "report"
        groups[f"{split} {clip.set}"][o] += 1
        key = clip.speaker if clip.set == "fsdd" else clip.label
        groups[f"{split} {clip.set} {key}"][o] += 1
    print(f"\n{kind} questions, threshold {need}")
    print("| group | right | refused | held | wrong |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for key in sorted(groups):
        c = groups[key]
        print(f"| {key} | {c['right']} | {c['refused']} | {c['held']} | {c['wrong']} |")
    return {"threshold": need, "groups": {k: dict(v) for k, v in groups.items()}}


def _shard(text: str) -> tuple[int, int]:
    """``--shard I/N``: 0 <= I < N."""
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shard is I/N, not {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"a shard I/N needs 0 <= I < N, not {text!r}")
    return i, n


def main() -> int:
    """Command line: hear or fit."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("hear", "fit"):
        p = sub.add_parser(name)
        p.add_argument("--model", default="tiny.en")
        p.add_argument("--lang", action="append", dest="langs", choices=sorted(LEXICONS))
        p.add_argument("--cache", required=True)
        p.add_argument("--fsdd-takes", type=int, default=50, help="takes per digit and speaker")
        p.add_argument("--threads", type=int, default=2)
        p.add_argument(
            "--window",
            choices=("full", "short"),
            default="full",
            help="the encoder window to hear at: the shipped full one, or a short one "
            "(benchmarks/short_window.py, not shipped)",
        )
        p.add_argument(
            "--short-tail",
            type=float,
            default=windows.SHORT_TAIL_FRAMES / 100,
            metavar="SECONDS",
            help="with --window short: quiet heard after the clip (default "
            f"{windows.SHORT_TAIL_FRAMES / 100:g} s, the answer model's window)",
        )
        p.add_argument("--per-word", type=int, default=10**6, help="speech_commands clips a word")
        p.add_argument("--json", default=None)
        p.add_argument("--support-sweep", action="store_true")
        p.add_argument("--grid", action="store_true", help="right answers at each prior and card")
        p.add_argument("--calibration-only", action="store_true", help="only the fitting split")
        p.add_argument(
            "--shard",
            type=_shard,
            default=(0, 1),
            help="I/N: hear only every Nth clip from the Ith (0-based), so N processes, each "
            "with its own --cache, share the clips; concatenate the caches afterwards",
        )
    args = parser.parse_args()
    return hear(args) if args.command == "hear" else fit(args)


if __name__ == "__main__":
    sys.exit(main())
