"""The ``voicegate`` command line. Each subcommand lives with the code it drives."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

# name -> ("module:function that adds arguments", "module:function that runs it")
# The runner takes the parsed namespace and returns an exit status.
COMMANDS: dict[str, tuple[str, str, str]] = {
    # name: (help, "module:add_arguments", "module:run")
    "eval": (
        "Run an audio manifest end to end and count false releases",
        "voicegate.eval.command:add_arguments",
        "voicegate.eval.command:run",
    ),
    "receipts": (
        "List, show, export or verify the receipt chain",
        "voicegate.gate.commands:add_arguments",
        "voicegate.gate.commands:run",
    ),
    "serve": (
        "gate any MCP server",
        "voicegate.mcp.commands:add_serve_arguments",
        "voicegate.mcp.commands:run_serve",
    ),
    "demo": (
        "gate the built-in notes server, no setup",
        "voicegate.mcp.commands:add_demo_arguments",
        "voicegate.mcp.commands:run_demo",
    ),
    "models": (
        "List and verify recogniser models",
        "voicegate.voice.models:add_arguments",
        "voicegate.voice.models:run",
    ),
    "decide": (
        "Decide one audio file",
        "voicegate.voice.pipeline:add_arguments",
        "voicegate.voice.pipeline:run",
    ),
    "pair": (
        "Print a one-time code to pair a device",
        "voicegate.device.commands:add_pair_arguments",
        "voicegate.device.commands:run_pair",
    ),
    "bench": ("Run the benchmarks", "voicegate.bench:add_arguments", "voicegate.bench:run"),
    "devices": (
        "List or revoke paired devices",
        "voicegate.device.commands:add_devices_arguments",
        "voicegate.device.commands:run_devices",
    ),
    "answers": (
        "List or delete a user's taught answers (enrolment templates)",
        "voicegate.device.answer_commands:add_arguments",
        "voicegate.device.answer_commands:run",
    ),
}


def _resolve(spec: str) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; only ``command``'s module is imported to add its arguments.

    Importing every subcommand's module would make ``voicegate --help`` load the recogniser
    and the web stack, and one broken optional part would break every command.
    """
    parser = argparse.ArgumentParser(prog="voicegate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add_spec, run_spec) in sorted(COMMANDS.items()):
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            _resolve(add_spec)(p)
        p.set_defaults(_run=run_spec)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``voicegate`` script."""
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((w for w in words if not w.startswith("-")), None)
    args = build_parser(command).parse_args(words)
    try:
        status = _resolve(args._run)(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``voicegate pair | head -1``): what it read stands, and Python
        # must not try again to flush the rest at exit, which would print a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
