"""Canonical JSON and the argument hash that binds an approval to exactly what runs.

``canonical_json(obj)`` gives one byte string for one JSON value, whatever the key order it
arrived in; ``args_hash(obj)`` is its hex SHA-256. The rules (docs/canonical.md says more):

- Object keys are sorted recursively by code point; separators ``,`` and ``:``; no whitespace;
  UTF-8 with non-ASCII characters written as themselves (``ensure_ascii=False``).
- JSON types stay distinct: ``1``, ``"1"`` and ``true`` hash differently. The upstream receives
  typed JSON and the card shows JSON-escaped values, so a type change is a plan change.
- An integral float becomes an int (``1.0`` hashes as ``1``). JSON has one number type; parsers
  differ on whether ``1.0`` survives (JavaScript, where most MCP clients run, re-serialises it as
  ``1``), so keeping them apart would refuse an approval over a difference no JSON reader of the
  upstream's call can see. Other floats are written as Python's shortest round-trip ``repr``.
- ``null`` and a missing key hash differently: an upstream may read an explicit null as "clear
  this field".
- Strings are NOT Unicode-normalised (no NFC): ``"é"`` and ``"e\\u0301"`` can name different
  files, users or records upstream, so they must not share an approval. The card flags strings
  that are not in NFC instead.
- Refused with ``ValueError``: NaN and infinities, non-str object keys, lone surrogates, any
  type that is not dict/list/tuple/str/int/float/bool/None, nesting deeper than ``max_depth``
  (64) and output larger than ``max_bytes`` (1 MiB). The limits defeat hostile nesting and
  reference cycles before any work proportional to them is done.

Tool-call arguments are never hashed alone: ``args_hash`` binds them inside the plan
``{"tool": ..., "arguments": ...}``, a receipt's body holds them as a field, and ``choose_one``
tells its options apart by the same plan. ``arguments_json`` checks them where they arrive
against ``ARGUMENTS_DEPTH``, one level less than ``max_depth``, and ``ARGUMENTS_BYTES``, less
than ``max_bytes`` by the room the plan needs for a tool's name of at most ``TOOL_NAME_CHARS``,
so every one of those fits. (A receipt's digest has no byte bound of its own: its parts are
bounded where they arrive, and a bound on their sum could only fail after the write ran.)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 64
MAX_BYTES = 1 << 20
# Everything that hashes arguments holds them one level down (the plan, a receipt's body), so
# arguments that reach this depth, the arguments object itself counted as one level, still fit
# ``MAX_DEPTH`` there.
ARGUMENTS_DEPTH = MAX_DEPTH - 1
# MCP's own limit on a tool's name (1 to 128 characters); a write to a longer name is refused.
TOOL_NAME_CHARS = 128
# The plan adds 22 bytes and the tool's name to the arguments: {"arguments":…,"tool":"…"}, the
# name at most TOOL_NAME_CHARS characters of at most 6 bytes each in JSON (792 bytes in all).
ARGUMENTS_BYTES = MAX_BYTES - 1024


def normalise(obj: Any, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Any:
    """A plain JSON value (dict/list/str/int/float/bool/None) equal to ``obj`` under the rules."""
    budget = [max_bytes]
    try:
        return _walk(obj, max_depth, budget)
    except _TooDeep:
        # Said here, where the limit is known: the caller can tell the agent what to send.
        raise ValueError(f"value is nested deeper than {max_depth} levels") from None


def canonical_json(obj: Any, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> bytes:
    """The canonical UTF-8 JSON bytes of ``obj``; ``ValueError`` for anything not plain JSON."""
    value = normalise(obj, max_depth=max_depth, max_bytes=max_bytes)
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    data = text.encode("utf-8")
    if len(data) > max_bytes:
        raise ValueError(f"canonical JSON is larger than {max_bytes} bytes")
    return data


def arguments_json(arguments: Any, *, max_bytes: int = ARGUMENTS_BYTES) -> bytes:
    """The canonical JSON of tool-call arguments; ``ValueError`` unless every wrapping of them
    can be hashed too (nested at most ``ARGUMENTS_DEPTH`` levels, at most ``ARGUMENTS_BYTES``
    long; a smaller ``max_bytes`` is a tighter bound of the caller's)."""
    max_bytes = min(max_bytes, ARGUMENTS_BYTES)
    return canonical_json(arguments, max_depth=ARGUMENTS_DEPTH, max_bytes=max_bytes)


def args_hash(obj: Any) -> str:
    """The hex SHA-256 of ``canonical_json(obj)``."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()


class _TooDeep(ValueError):
    """Nesting past the limit, before ``normalise`` names the limit."""


def _walk(obj: Any, depth: int, budget: list[int]) -> Any:
    # budget[0] counts down a lower bound of the output size, so a huge input is refused
    # before json.dumps builds it.
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError("value is too large to hash")
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        return int.__int__(obj)  # an IntEnum or other subclass writes as its plain value
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError("NaN and infinities are not JSON")
        if obj.is_integer():
            return int(obj)
        return float.__float__(obj)
    if isinstance(obj, str):
        return _string(obj, budget)
    if depth <= 0:
        raise _TooDeep
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for key, item in obj.items():
            if not isinstance(key, str):
                # json.dumps would turn 1 into "1" and let {1: x} and {"1": x} collide.
                raise ValueError("object keys must be strings")
            out[_string(key, budget)] = _walk(item, depth - 1, budget)
        return out
    if isinstance(obj, list | tuple):
        return [_walk(item, depth - 1, budget) for item in obj]
    raise ValueError(f"{type(obj).__name__} is not a JSON type")


def _string(text: str, budget: list[int]) -> str:
    budget[0] -= len(text)
    if budget[0] < 0:
        raise ValueError("value is too large to hash")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("string holds a lone surrogate, which is not Unicode text") from None
    return str.__str__(text)
