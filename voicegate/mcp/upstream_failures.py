"""Why an upstream session did not open, as one line and one closed code, never a traceback.

The MCP SDK's stdio client logs every stdout line that is not JSON-RPC with a full pydantic
traceback, and a failed connect ends in a nested ``ExceptionGroup`` whose leaf says only
"Connection closed". An operator who pointed ``--upstream-cmd`` at the wrong command needs
neither: they need "it did not speak MCP on stdout (first line: 'hi')".

``watching(attempt)`` marks the task that opens one session; the SDK's reader tasks, started
from it, inherit the mark, and a filter on the SDK's stdio logger counts their unreadable
lines on that ``Attempt`` instead of printing tracebacks. ``explain`` then turns the error the
attempt ended with into a ``Failure`` and a sentence.
"""

from __future__ import annotations

import logging
import re
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum

from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED
from pydantic import ValidationError

__all__ = ["Attempt", "Failure", "explain", "watching"]

# The SDK's own log message for a stdout line it cannot parse (mcp/client/stdio.py).
_NOT_JSON_RPC = "Failed to parse JSONRPC message from server"
_SHOWN_CHARS = 60
_QUERY = re.compile(r"\?[^\s'\"]*")


class Failure(StrEnum):
    """What kept an upstream session from opening."""

    NOT_MCP = "not_mcp"  # it wrote something other than JSON-RPC on stdout
    NOT_FOUND = "not_found"  # the command does not exist
    NOT_STARTED = "not_started"  # the command exists but could not be run
    CLOSED_EARLY = "closed_early"  # it ended the connection before the MCP handshake finished
    OTHER = "other"


@dataclass(slots=True)
class Attempt:
    """What one connect attempt saw on the upstream's stdout; filled in while it runs."""

    not_mcp_lines: int = 0
    first_line: str = ""
    connected: bool = False


_current: ContextVar[Attempt | None] = ContextVar("voicegate_upstream_attempt", default=None)


def watching(attempt: Attempt) -> None:
    """Count the SDK's unreadable stdout lines of this task (and tasks it starts) on ``attempt``."""
    _current.set(attempt)


class _NotMcpLines(logging.Filter):
    """Turns the SDK's traceback per unreadable stdout line into a count, or one short line."""

    def filter(self, record: logging.LogRecord) -> bool:
        attempt = _current.get()
        if attempt is None or record.getMessage() != _NOT_JSON_RPC:
            return True
        line = _line_of(record)
        attempt.not_mcp_lines += 1
        if not attempt.first_line:
            attempt.first_line = line
        if not attempt.connected:
            return False  # reported once, by ``explain``, when the attempt fails
        # Mid-session: still worth a line, the session goes on.
        record.msg, record.args = "upstream wrote a line that is not MCP on stdout: %r", (line,)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text = None, None
        return True


def _line_of(record: logging.LogRecord) -> str:
    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, ValidationError):
        for detail in error.errors(include_url=False):
            if isinstance(detail.get("input"), str):
                text: str = detail["input"]
                return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"
    return ""


def explain(error: BaseException | None, attempt: Attempt) -> tuple[Failure, str]:
    """The code and the one sentence for an attempt that ended with ``error``."""
    if attempt.not_mcp_lines:
        first = f" (first line: {attempt.first_line!r})" if attempt.first_line else ""
        return Failure.NOT_MCP, f"it did not speak MCP on stdout{first}"
    leaf = _leaf(error)
    if isinstance(leaf, FileNotFoundError):
        return Failure.NOT_FOUND, f"its command was not found: {leaf.filename or ''}".rstrip(": ")
    if isinstance(leaf, PermissionError):
        return Failure.NOT_STARTED, f"its command could not be run: {leaf.strerror}"
    if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
        return Failure.CLOSED_EARLY, "it closed the connection before the MCP handshake (exited?)"
    if leaf is None:
        return Failure.OTHER, "no reason given"
    text = str(leaf).splitlines()[0] if str(leaf) else ""
    # An HTTP error names the URL it was for; a query string may carry a key, as in describe().
    text = _QUERY.sub("?…", text)[:200]
    return Failure.OTHER, f"{type(leaf).__name__}: {text}".rstrip(": ")


def _leaf(error: BaseException | None) -> BaseException | None:
    """The first error that is not a group: what actually went wrong inside the SDK's tasks."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


logging.getLogger("mcp.client.stdio").addFilter(_NotMcpLines())
