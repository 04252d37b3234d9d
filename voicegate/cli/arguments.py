"""Argument types shared by the commands: a bad value is argparse's usage error, exit 2.

Checked while parsing, so a command given one never opens a store, makes a key file or starts
anything before it says what was wrong.
"""

from __future__ import annotations

import argparse
import os

# The store a command opens when neither --db nor $VOICEGATE_DB names one.
DEFAULT_DB = "voicegate.db"
DB_ENV = "VOICEGATE_DB"
# TCP ports are 16-bit; 0 asks the system for any free one.
MAX_PORT = 65535


def port_number(text: str) -> int:
    """A ``--port`` value: a whole number from 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is a whole number, not {text!r}") from None
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(
            f"a port is between 0 and {MAX_PORT} (0: any free one), not {port}"
        )
    return port


def user_name(text: str) -> str:
    """A ``--user`` value: not empty and not only spaces."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a user name cannot be empty")
    return text


def add_db(parser: argparse.ArgumentParser) -> None:
    """``--db``: the store a command opens (the one ``voicegate serve`` writes)."""
    parser.add_argument(
        "--db",
        default=os.environ.get(DB_ENV, DEFAULT_DB),
        help="the store: a SQLite file (PATH, sqlite:///ABSOLUTE/PATH or sqlite:RELATIVE/PATH), "
        "or postgresql://... (default: $VOICEGATE_DB or voicegate.db)",
    )
