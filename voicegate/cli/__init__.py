"""The ``voicegate`` command line: one module per command group, each imported only to run.

``serve`` (serve, demo), ``devices`` (pair, devices, answers, cards, passkeys, grants),
``receipts``, ``voice`` (models, decide) and ``worker``. Each holds its commands' arguments and
the glue that calls into the domain code; no domain module imports this package. ``eval`` and
``bench`` are the lab's (``voicegate_lab.cli``): a source checkout installs it beside the
package, and where it is missing they say so in one line and exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from voicegate.errors import MissingLab

# The first line of ``voicegate --help``: what voicegate is, for someone who just installed it.
DESCRIPTION = (
    "voicegate stands between an AI agent and the tools it uses: reads pass straight through, "
    "and every write waits until you say yes, by tap or by voice, on a device you paired. "
    "Start with `voicegate demo`."
)

# name -> its one-line help, shown in ``voicegate --help`` and as the command's description
HELP: dict[str, str] = {
    "eval": "Run an audio manifest end to end and count false releases",
    "receipts": "List, show, export or verify the receipt chain",
    "serve": "gate any MCP server",
    "demo": "gate the built-in notes server, no setup",
    "models": "List and verify recogniser models",
    "decide": "Decide one audio file",
    "pair": "Print a one-time code to pair a device",
    "bench": "Run the benchmarks",
    "devices": "List or revoke paired devices",
    "answers": "List or delete a user's taught answers (enrolment templates)",
    "cards": "List the cards waiting for an answer, or withdraw one",
    "worker": "Hear voice answers for gates over NATS JetStream (serve --hearing)",
    "passkeys": "List or remove a user's passkeys",
    "grants": "List live grants (approvals the user allowed again for a while), or end one",
}

# The commands whose code is the lab (``lab/``, the voicegate-mcp-lab distribution): the
# evaluation kit and the benchmarks, which a source checkout has and the wheel does not ship.
LAB = ("bench", "eval")

AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


def command(name: str) -> tuple[AddArguments, Run]:
    """What adds ``name``'s arguments and what runs it; only its group's module is imported.

    Importing every group would make ``voicegate --help`` load the recogniser and the web
    stack, and one broken optional part would break every command.
    """
    if name in ("serve", "demo"):
        from voicegate.cli import serve

        if name == "serve":
            return serve.add_serve_arguments, serve.run_serve
        return serve.add_demo_arguments, serve.run_demo
    if name in ("pair", "devices", "answers", "cards", "passkeys", "grants"):
        from voicegate.cli import devices

        if name == "pair":
            return devices.add_pair_arguments, devices.run_pair
        if name == "devices":
            return devices.add_devices_arguments, devices.run_devices
        if name == "cards":
            return devices.add_cards_arguments, devices.run_cards
        if name == "passkeys":
            return devices.add_passkeys_arguments, devices.run_passkeys
        if name == "grants":
            return devices.add_grants_arguments, devices.run_grants
        return devices.add_answers_arguments, devices.run_answers
    if name in ("models", "decide"):
        from voicegate.cli import voice

        if name == "models":
            return voice.add_models_arguments, voice.run_models
        return voice.add_decide_arguments, voice.run_decide
    if name == "receipts":
        from voicegate.cli import receipts

        return receipts.add_arguments, receipts.run
    if name in LAB:
        return _lab(name)
    if name == "worker":
        from voicegate.cli import worker

        return worker.add_arguments, worker.run
    raise KeyError(name)


def _lab(name: str) -> tuple[AddArguments, Run]:
    """``eval`` or ``bench`` from the lab; ``MissingLab`` where it is not installed.

    The only import of ``voicegate_lab`` in the package: the lab builds on the package, never
    the other way (tests/test_layers.py holds both to it).
    """
    try:
        if name == "eval":
            from voicegate_lab.cli import eval as evaluation

            return evaluation.add_arguments, evaluation.run
        from voicegate_lab.cli import bench

        return bench.add_arguments, bench.run
    except ModuleNotFoundError as exc:
        # Only the lab itself counts as missing; a broken install inside it is a bug to see.
        if exc.name != "voicegate_lab":
            raise
        raise MissingLab(name) from None


class _Parser(argparse.ArgumentParser):
    """The top-level parser: words a command does not take are that command's usage error,
    said with its usage (``voicegate demo: error: ...``), not the top level's."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            where = self.commands.get(getattr(parsed, "command", "") or "", self)
            where.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def build_parser(name: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser, with the arguments of command ``name`` alone added."""
    from voicegate import __version__

    parser = _Parser(prog="voicegate", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"voicegate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for each, help_text in sorted(HELP.items()):
        p = sub.add_parser(each, help=help_text, description=help_text)
        parser.commands[each] = p
        if each == name:
            add_arguments, _ = command(each)
            add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``voicegate`` script."""
    words = list(sys.argv[1:] if argv is None else argv)
    name = next((w for w in words if not w.startswith("-")), None)
    try:
        args = build_parser(name).parse_args(words)
        _, run = command(args.command)
    except MissingLab as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        status = run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``voicegate pair | head -1``): what it read stands, and Python
        # must not try again to flush the rest at exit, which would print a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return int(status or 0)
