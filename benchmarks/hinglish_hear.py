"""What the bilingual recogniser writes for the corpus's Hinglish and Hindi cases, and what follows.

    # 1. hear every Hinglish and Hindi case of the corpus once (resumable; a JSON line a case)
    .venv/bin/python benchmarks/hinglish_hear.py hear --cache bench-out/hi-heard.jsonl
    #    ... or told a question in Hindi first (Whisper's previous text, voice/prompts.py)
    .venv/bin/python benchmarks/hinglish_hear.py hear --cache bench-out/hi-prompted.jsonl \\
        --card-prompt "पहला, दूसरा, तीसरा, चौथा, पाँचवाँ।" --yes-prompt "हाँ, ठीक है, नहीं, रुको।"
    #    ... or in Hindi alone, the Devanagari cases only
    .venv/bin/python benchmarks/hinglish_hear.py hear --cache bench-out/hi-alone.jsonl \\
        --lang hi --script hi-Deva
    # 2. decide them with the server's own code and say where the answers are lost
    .venv/bin/python benchmarks/hinglish_hear.py decide --cache bench-out/hi-heard.jsonl

``decide`` runs ``hypotheses.hypotheses`` and ``decision.weigh`` at the model's shipped
calibration, as the server with ``base`` does (English and Hindi, or the ``--lang`` given), and
counts, for the genuine choices and yeses, how many have a top transcript of some decoded
language that the grammar reads as that answer: a release must be what such a transcript says,
so at ``support`` 1 and with the path where templates decide alone shut (as on every model) no
threshold, prior or fusion weight can release more: the ceiling the recogniser's hearing sets
(a cancel or wait releases nothing and needs no such transcript). For the cases that must be
refused it counts releases, and best transcripts that read as an answer at all; replays apart,
since the replay guard refuses those and is not run here. Synthetic speech only (espeak-ng
Hindi, English voices reading Latin Hinglish, piper): it says what this model writes for those
voices, not for people.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from calibrate import hear_one, load, record

from voicegate.domain import Decision
from voicegate.reasons import Kind
from voicegate.voice import calibration, consent, decision
from voicegate.voice.hypotheses import LEXICONS, SPOKEN, hypotheses, read_transcript
from voicegate_lab.eval import manifest
from voicegate_lab.eval.manifest import Case

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fixtures" / "audio" / "corpus"
MODEL = "base"
LANGS = ("en", "hi")  # the bilingual server's languages
SCRIPTS = ("hi-Latn", "hi-Deva")


def cases(scripts: tuple[str, ...] = SCRIPTS) -> list[Case]:
    """The corpus's Hinglish (Latin) and Hindi (Devanagari) cases, in manifest order."""
    return [c for c in manifest.load(CORPUS / "manifest.jsonl") if c.lang in scripts]


def expected(case: Case) -> Decision | None:
    """The decision a genuine case must get; None for one that must release nothing."""
    return None if case.expect.kind is Kind.REFUSE else case.expect


def voice(case: Case) -> str:
    """Who says it: espeak-ng's Hindi voice (reading Devanagari) or an English voice (Latin)."""
    tag = case.id.split("-")[4]  # NNNN-class-hi-Script-voice-...
    return "Hindi voice" if tag.startswith("hi") else "English voice"


def hear(args: argparse.Namespace) -> int:
    """Hear every case not yet in the cache, as the bilingual server asks it."""
    if args.card_prompt or args.yes_prompt:  # for this run only: the server has no Hindi prompt
        told = {"card": {"hi": args.card_prompt}, "yes": {"hi": args.yes_prompt}}
        calibration.PROMPTS = {**calibration.PROMPTS, MODEL: told}
    from voicegate.voice.whisper import FasterWhisperTranscriber

    transcriber = FasterWhisperTranscriber(MODEL, threads=args.threads)
    langs = tuple(args.langs or LANGS)
    lexicons = tuple(lex for lang in langs for lex in LEXICONS[lang])
    cache = Path(args.cache)
    cache.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["id"] for line in cache.open()} if cache.exists() else set()
    index, count = (int(x) for x in args.shard.split("/"))
    with cache.open("a") as out:
        for n, case in enumerate(cases(tuple(args.scripts or SCRIPTS))):
            if n % count != index or case.id in done:
                continue
            stage, cards = case.stage, case.cards
            rs = consent.readings(cards, stage, lexicons)
            # Asked as the server asks it (voice/pipeline.py): every reading, in its language.
            texts = tuple(r.text for r in rs)
            spoken = tuple(SPOKEN[r.lang] for r in rs)
            question = calibration.question(stage, cards)
            h = hear_one(transcriber, case.path, langs, texts, spoken, question)
            out.write(json.dumps(record(case.id, h), ensure_ascii=False) + "\n")
            out.flush()
    return 0


def decide(args: argparse.Namespace) -> int:
    """Decide every cached case at the shipped calibration and count where answers are lost."""
    heard = load(Path(args.cache))
    cal = calibration.of(MODEL)
    lexicons = tuple(lex for lang in args.langs or LANGS for lex in LEXICONS[lang])
    counts: Counter[str] = Counter()
    written: Counter[str] = Counter()
    for case in cases(tuple(args.scripts or SCRIPTS)):
        h = heard.get(case.id)
        if h is None:
            continue
        stage, cards = case.stage, case.cards
        want = expected(case)
        said = read_transcript(h.text, cards, stage)
        rs = consent.readings(cards, stage, lexicons)
        hyps = hypotheses(rs, h, cards, stage)
        if h.refusal is not None:
            got = Decision(Kind.REFUSE, reason=h.refusal)
        else:
            got = decision.weigh(hyps, said, stage, cal, cards).decision
        script = "Devanagari" if any("\u0900" <= ch <= "\u097f" for ch in h.text) else "Latin"
        kind = "genuine" if want is not None else "refusal"
        written[f"{kind}: {script}, decoded as {h.language or 'nothing'}"] += 1
        if want is not None and want.releases:
            # A release must be what the top transcript of some decoded language says (the
            # rule ``unsupported``, support 1): no threshold can release more than these.
            top = h.refusal is None and any(x.rank == 0 and x.decision == want for x in hyps)
            counts["genuine release"] += 1
            counts["genuine release: a top transcript says it"] += top
            counts[f"genuine release, {voice(case)}"] += 1
            counts[f"genuine release, {voice(case)}: a top transcript says it"] += top
        if want is not None:
            counts["genuine"] += 1
            counts["genuine: best transcript reads as the answer"] += said == want
            counts["genuine: right"] += got == want
            counts["genuine: released wrongly"] += got.releases and got != want
        elif case.label == "replay":  # the replay guard's to refuse, not run here
            counts["replay"] += 1
            counts["replay: released by the recogniser alone"] += got.releases
        else:
            counts["refusal"] += 1
            counts["refusal: released"] += got.releases
            counts["refusal: best transcript reads as an answer"] += said.kind in decision.ANSWERS
    report = {"cache": args.cache, "counts": dict(counts), "best transcript written in": written}
    json.dump(report, sys.stdout, ensure_ascii=False, indent=1)
    print()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    h = sub.add_parser("hear")
    d = sub.add_parser("decide")
    for p in (h, d):
        p.add_argument("--cache", required=True)
        p.add_argument("--lang", action="append", dest="langs", choices=sorted(LEXICONS))
        p.add_argument("--script", action="append", dest="scripts", choices=SCRIPTS)
    h.add_argument("--card-prompt", default="")
    h.add_argument("--yes-prompt", default="")
    h.add_argument("--threads", type=int, default=1)
    h.add_argument("--shard", default="0/1", help="N/M: every M-th case from the N-th")
    args = parser.parse_args()
    return hear(args) if args.command == "hear" else decide(args)


if __name__ == "__main__":
    raise SystemExit(main())
