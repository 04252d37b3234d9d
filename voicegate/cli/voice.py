"""``voicegate models`` (list and verify the recogniser models) and ``voicegate decide`` (one file).

The models are ``voicegate.voice.models``; the decision is ``voicegate.voice.pipeline``, here
with the real recogniser and no replay history; with ``--user``, fused with that user's taught
answers from the store, as the server fuses them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from voicegate.cli.arguments import add_db, user_name
from voicegate.domain import Stage
from voicegate.errors import ConfigError, ModelError, StoreUnavailable
from voicegate.gate.proposals import MAX_CARDS
from voicegate.text import printable
from voicegate.voice import models

# What ``voicegate.voice.audio.decode`` reads, said whenever a file is not one of them.
FORMATS = "WAV, FLAC, OGG (Vorbis or Opus), WebM/Opus or MP4/AAC"

if TYPE_CHECKING:
    from voicegate.voice import templates
    from voicegate.voice.taught import Taught


def add_models_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate models``."""
    parser.add_argument("--verify", action="store_true", help="assemble and check SHA-256")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run_models(args: argparse.Namespace) -> int:
    """List the known models; with --verify, assemble and checksum them.

    Exit 1 when an installed model fails, or when no model is installed at all; a model whose
    packages are all absent (an extra not chosen, such as ``[hindi]``) is listed as
    ``not_installed`` with the command that installs it.
    """
    infos = models.survey(hashes=args.verify)
    if args.json:
        print(json.dumps([asdict(i) for i in infos], indent=2))
    else:
        for i in infos:
            print(f"{i.name:8} {i.status:14} {i.size:>11} {i.sha256[:16]}  {i.path}")
            if i.problem:
                print(f"{'':8} {i.problem}")
    present = [i for i in infos if i.status != "not_installed"]
    bad = [i for i in present if i.status not in ("ok", "present", "not_assembled")]
    failed = args.verify and any(i.status != "ok" for i in present)
    return 1 if bad or failed or not present else 0


def add_decide_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate decide``."""
    # Here, not at the top: ``voicegate models`` must not load the audio and numeric stack.
    from voicegate.voice.hypotheses import LEXICONS

    parser.add_argument("audio", type=Path, help=f"the recording: {FORMATS}")
    parser.add_argument(
        "--cards", type=_card_count, required=True, help=f"how many cards are open (1-{MAX_CARDS})"
    )
    parser.add_argument(
        "--stage",
        choices=[s.value for s in Stage],
        default=Stage.CHOOSE.value,
        help="choose: the first answer to a set; final: the second yes of a high-risk card",
    )
    parser.add_argument(
        "--lang",
        choices=sorted(LEXICONS),
        action="append",
        dest="langs",
        help="a language the answer may be in; repeat for several (default: en)",
    )
    parser.add_argument(
        "--model", default=None, help="tiny.en (English only) or base (multilingual, needed for hi)"
    )
    parser.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="where the recogniser runs (auto: a CUDA GPU when there is one)",
    )
    parser.add_argument(
        "--user",
        type=user_name,
        default=None,
        help="decide as this user: fused with the answers they taught (read from --db)",
    )
    add_db(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


def _card_count(text: str) -> int:
    """``--cards``: a whole number of open cards, 1 to ``MAX_CARDS``."""
    try:
        cards = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= cards <= MAX_CARDS:
        raise argparse.ArgumentTypeError(f"a set has 1 to {MAX_CARDS} cards, not {cards}")
    return cards


def run_decide(args: argparse.Namespace) -> int:
    """Decide one audio file with the real recogniser and no replay history; print the result."""
    from voicegate.voice.pipeline import VoicePipeline, as_json, default_model
    from voicegate.voice.whisper import FasterWhisperTranscriber

    langs = tuple(args.langs or ["en"])
    # The file first, then the store: a wrong path is told at once, not after the model loaded.
    try:
        data = args.audio.read_bytes()
    except OSError as exc:
        print(f"voicegate decide: cannot read {args.audio}: {exc.strerror}", file=sys.stderr)
        return 2
    taught = None
    model = args.model or default_model(langs)
    try:
        models.check_languages(model, langs)
    except ModelError as exc:
        print(f"voicegate decide: {exc}", file=sys.stderr)
        return 2
    if args.user is not None:
        try:
            taught = _Taught(args.user, asyncio.run(_enrolment(args.db, args.user, model)))
        except (ConfigError, StoreUnavailable) as exc:
            print(printable(f"voicegate decide: {exc}"), file=sys.stderr)
            return 2
        if taught.held is None:
            print(printable(f"voicegate decide: {args.user} taught no answers"), file=sys.stderr)
    # Before the model loads: a file that is not audio is said at once.
    unreadable = _unreadable(data)
    if unreadable:
        print(printable(f"voicegate decide: {args.audio}: {unreadable}"), file=sys.stderr)
        return 2
    try:
        transcriber = FasterWhisperTranscriber(model, device=args.device)
    except ModelError as exc:
        print(f"voicegate decide: {exc}", file=sys.stderr)
        return 2
    pipeline = VoicePipeline(transcriber, None, languages=langs, enrolments=taught)
    user = args.user if args.user is not None else "cli"
    result = asyncio.run(
        pipeline.decide(data, user=user, cards=args.cards, stage=Stage(args.stage))
    )
    if args.json:
        print(json.dumps(as_json(result), ensure_ascii=False, indent=2))
    else:
        d = result.decision
        what = (
            d.kind.value + (f" {d.card}" if d.card else "") + (f" ({d.reason})" if d.reason else "")
        )
        # A refusal before the recogniser heard anything has no language to name.
        language = f"  language {result.language}" if result.language else ""
        print(f"{what}  heard {list(result.transcripts)}{language}")
        for text, score in result.readings[:5]:
            print(f"  {score:8.2f}  {text}")
        if result.rule:
            fused = "" if result.fused is None else f"  fused probability {result.fused:.3f}"
            heard = "" if result.heard is None else f"  answer model {result.heard:.3f}"
            print(f"  rule {result.rule}  probability {result.probability:.3f}{fused}{heard}")
        if result.taught is not None:
            print(f"  {taught_line(result.taught)}")
        if result.timings_ms:
            print("  " + "  ".join(f"{k} {v:.0f} ms" for k, v in result.timings_ms.items()))
    return 0


def _unreadable(data: bytes) -> str:
    """Why ``data`` is not audio this command reads, or "": a file that is not audio at all is a
    usage error (exit 2), not a decision; a short, long or silent recording is decided."""
    from voicegate.errors import AudioRefused
    from voicegate.reasons import Reason
    from voicegate.voice.audio import decode

    try:
        decode(data)
    except AudioRefused as exc:
        if exc.reason is Reason.UNSUPPORTED_FORMAT:
            return f"not audio in a format read here; send {FORMATS}"
        if exc.reason is Reason.CORRUPT:
            return f"the audio cannot be decoded ({exc.detail or 'damaged'}); send {FORMATS}"
    return ""


def taught_line(taught: Taught) -> str:
    """What the user's templates said, in one line: the nearest taught answers, each distance
    against the user's radius for it, and whether that is a clear match."""
    from voicegate.voice.enrolment import meaning_text

    if not taught.distances:
        return "taught  nothing of this model to compare with"
    parts = []
    for meaning, distance in sorted(taught.distances.items(), key=lambda item: item[1])[:3]:
        radius = taught.radii.get(meaning)
        where = (
            "one take, no radius"
            if radius is None
            else f"radius {radius:.2f}, {'inside' if distance <= radius else 'outside'}"
        )
        parts.append(f"{meaning_text(meaning)} {distance:.2f} ({where})")
    if len(taught.distances) == 1:
        verdict = "one answer taught, nothing to tell it from: the templates say nothing"
    elif taught.clear:
        verdict = "a clear match"
    elif taught.nearest is not None:
        verdict = "nearest by the margin, outside the radius"
    else:
        verdict = "no answer nearest by the margin"
    hard = "; hard for recognisers" if taught.hard else ""
    return f"taught  {', '.join(parts)}; {verdict}{hard}"


async def _enrolment(url: str, user: str, model: str) -> templates.Enrolment | None:
    """``user``'s enrolment in the store at ``url`` (their templates of ``model``), read once;
    the store is closed again before the model loads. Only an existing store: deciding never
    creates one."""
    from voicegate.store import open_store
    from voicegate.voice.enrolment import StoreEnrolments

    store = await open_store(url, create=False)
    try:
        return await StoreEnrolments(store.templates, model).enrolment(user)
    finally:
        await store.close()


class _Taught:
    """``pipeline.Enrolments`` holding one user's enrolment, read from the store beforehand."""

    def __init__(self, user: str, held: templates.Enrolment | None) -> None:
        self.user = user
        self.held = held

    async def enrolment(self, user: str) -> templates.Enrolment | None:
        return self.held if user == self.user else None
