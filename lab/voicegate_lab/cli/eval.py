"""``voicegate eval``: its arguments and the command that runs a manifest or the agent suite.

By default the cases run against the real app in this process over an ASGI transport, with a
memory store and the demo notes server as the upstream (``voicegate_lab.eval.local``). With
``--url`` they run against a running ``voicegate serve`` in front of the notes server
(``python -m voicegate.mcp.notes``; ``voicegate_lab.eval.remote``). ``--agent`` runs the scripted
worst-case agent suite instead (``voicegate_lab.eval.agent``). What a run writes is
``voicegate_lab.eval.outputs``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from voicegate.cli.arguments import DB_ENV
from voicegate.errors import ConfigError, StoreUnavailable
from voicegate.settings import TOKEN_ENV
from voicegate.text import counted
from voicegate_lab.eval import outputs, report
from voicegate_lab.eval.manifest import ManifestError, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate eval``."""
    parser.add_argument("--manifest", type=Path, help="JSON Lines manifest")
    parser.add_argument(
        "--agent", action="store_true", help="run the scripted worst-case agent suite instead"
    )
    parser.add_argument("--json", type=Path, help="write the JSON summary here")
    parser.add_argument("--report", type=Path, help="write report.md and PNG plots here")
    parser.add_argument(
        "--url", help="a running voicegate serve (in front of the notes upstream) instead"
    )
    parser.add_argument(
        "--db",
        help="with --url: the server's store, as its --db gives it (default: $VOICEGATE_DB)",
    )
    parser.add_argument(
        "--token", help=f"with --url: the server's agent bearer token (default: ${TOKEN_ENV})"
    )
    parser.add_argument("--limit", type=int, help="run only the first N cases")
    parser.add_argument(
        "--case-lang",
        action="append",
        dest="case_langs",
        metavar="LANG",
        help="run only the cases of this manifest language (en, hi-Latn, hi-Deva, none; "
        "repeat for several), e.g. the Hindi cases against a server with Hindi on",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="recogniser model, as voicegate serve chooses it: tiny.en for English alone, "
        "base with Hindi (not with --url)",
    )
    parser.add_argument(
        "--lang",
        action="append",
        dest="langs",
        choices=["en", "hi"],
        help="recogniser languages, repeat for several (default: en, as voicegate serve; "
        "with --url the server's own)",
    )
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def shown_command(argv: Sequence[str]) -> list[str]:
    """The command line fit for a report: the token masked, a store password redacted."""
    from voicegate.store import redact

    def hide(flag: str, value: str) -> str:
        return "***" if flag == "--token" else redact(value)

    shown: list[str] = []
    for word in argv:
        flag, eq, value = word.partition("=")
        if shown and shown[-1] in ("--token", "--db") and not word.startswith("-"):
            word = hide(shown[-1], word)
        elif eq and flag in ("--token", "--db"):
            word = f"{flag}={hide(flag, value)}"
        shown.append(word)
    return shown


def remote_options(args: argparse.Namespace) -> tuple[str, str, str] | None:
    """``(url, db, token)`` for a run against a running server, None for the in-process app;
    ``ConfigError`` when ``--url`` lacks what it needs."""
    url = getattr(args, "url", None)
    db = getattr(args, "db", None)
    token = getattr(args, "token", None)
    if not url:
        if db or token:
            raise ConfigError("--db and --token go with --url; the in-process app has its own")
        return None
    db = db or os.environ.get(DB_ENV, "")
    token = token or os.environ.get(TOKEN_ENV, "")
    missing = []
    if not db:
        missing.append(
            f"--db, the store the server was started with (a SQLite file or a PostgreSQL DSN; "
            f"default ${DB_ENV}): sets of several cards are proposed there"
        )
    if not token:
        missing.append(f"--token, the server's agent bearer token (default ${TOKEN_ENV})")
    if missing:
        raise ConfigError("--url needs " + " and ".join(missing))
    return url, db, token


def problem_of(exc: BaseException) -> ConfigError | StoreUnavailable | None:
    """The setup error behind ``exc``, looking inside the groups a task group raises."""
    if isinstance(exc, ConfigError | StoreUnavailable):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := problem_of(inner)) is not None:
                return found
    return None


def run(args: argparse.Namespace) -> int:
    """Run the manifest; exit 1 on any false release, 2 on a bad manifest or setup."""
    from voicegate.observe import configure_logging

    # One line per refused answer or confirm event would bury the table and the progress bar;
    # warnings and errors are still said.
    configure_logging(logging.WARNING)
    if args.agent:
        from voicegate_lab.eval import agent

        return agent.run(args.json)
    if args.manifest is None:
        print("voicegate eval: --manifest or --agent is required", file=sys.stderr)
        return 2
    try:
        server = remote_options(args)
    except ConfigError as exc:
        print(f"voicegate eval: {exc}", file=sys.stderr)
        return 2
    if not args.manifest.is_file():
        print(f"voicegate eval: no manifest at {args.manifest}", file=sys.stderr)
        return 2
    try:
        cases = load(args.manifest)
    except ManifestError as exc:
        print(f"{args.manifest}: {exc}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as exc:
        # unreadable, or not text: the reason in one line, as for a missing file
        print(f"voicegate eval: cannot read {args.manifest}: {exc}", file=sys.stderr)
        return 2
    if args.case_langs:
        cases = [c for c in cases if c.lang in args.case_langs]
    if args.limit is not None:
        cases = cases[: args.limit]

    async def go() -> tuple[list[report.Result], list[report.TakeReply]]:
        from voicegate_lab.eval.local import in_process, whisper_voice
        from voicegate_lab.eval.remote import remote
        from voicegate_lab.eval.runner import evaluate

        progress = not args.no_progress
        if server is not None:
            async with remote(*server) as harness:
                return await evaluate(cases, harness, progress=progress), harness.taught
        voice = whisper_voice(args.model, tuple(args.langs or ("en",)), args.device)
        async with in_process(voice) as local:
            return await evaluate(cases, local, progress=progress), local.taught

    try:
        results, taught = asyncio.run(go())
    except (ConfigError, StoreUnavailable, ExceptionGroup) as exc:
        problem = problem_of(exc)
        if problem is None:
            raise
        print(f"voicegate eval: {problem}", file=sys.stderr)
        return 2
    shown = shown_command(sys.argv[2:])
    command = "voicegate eval " + shlex.join(shown) if shown else ""
    doc = outputs.write(
        results, taught, json_path=args.json, report_dir=args.report, command=command
    )
    lat = doc["latency_ms"]
    print(
        f"{counted(doc['cases'], 'case')}, {doc['correct']} correct, "
        f"{counted(doc['false_releases'], 'false release')}, "
        f"latency p50 {lat['p50']} ms p95 {lat['p95']} ms"
    )
    if taught:
        e = doc["enrolment"]
        print(
            f"{counted(e['takes'], 'enrolment take')} (not cases): {e['taught']} taught, "
            f"{e['refused']} refused"
        )
    return 1 if doc["false_releases"] else 0
