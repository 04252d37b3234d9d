"""The card text a user reads or hears before saying yes: the tool and every argument, plainly.

One line names the tool, then one line per argument, keys sorted::

    tool: send_email
      body = "Hi,\\nsee you at 5"
      to = "bob@exаmple.com"  ⚠ mixed scripts

Values are JSON, so a newline or quote inside a value is escaped and cannot start a line of
its own, and ``"5"`` reads differently from ``5``. Characters that would hide or reorder text
(bidi controls, zero-width and other format characters, control characters, line and
paragraph separators, unusual spaces, private-use and unassigned code points) are shown as
``\\uXXXX`` escapes, so the value text stays JSON that decodes to exactly the value that runs.
Names are shown bare when they are plain ASCII (``A-Z a-z 0-9 _ . -``), otherwise quoted and
escaped the same way. Values pass through ``canonical.normalise`` first, so the card shows
what the args hash binds (``1.0`` shows as ``1``) and refuses, with ``ValueError``, what
cannot be hashed.

Markers after a value point at what a careful reader could still miss:

- ``⚠ mixed scripts``: one string mixes Latin, Cyrillic, Greek, Armenian, Cherokee or Coptic
  letters (``pаypal`` with a Cyrillic ``а``). A real name in two scripts is flagged too; a
  warning costs a second look, a missed spoof costs the action.
- ``⚠ looks like Latin letters``: every letter is a Cyrillic or Greek one drawn like a Latin
  letter (``аѕһа``), a spoof that mixes no scripts.
- ``⚠ look-alike characters``: fullwidth, mathematical or other styled letters and digits.
- ``⚠ hidden characters``: the value held characters now shown as escapes.
- ``⚠ not NFC``: combining sequences that look the same as a different string.
- ``… (+N chars)``: the value was cut for display; the hash still covers all of it. ``full``
  renders the card with nothing cut; the device API sends it beside the short text, and a yes to
  a shortened card releases only when the device says it showed the full text.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any, cast

from voicegate.canonical import normalise

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# One displayed unit: a JSON escape, or one character. Cuts fall between units only.
_UNIT = re.compile(r"\\u[0-9a-fA-F]{4}|\\.|.", re.DOTALL)
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
# Letters and marks that render as nothing although Unicode does not call them format chars.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")
_LOOKALIKE_SCRIPTS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"})
# Cyrillic and Greek letters drawn like Latin ones. A string written only in these reads as a
# Latin word ("аѕһа" for "asha") although no script is mixed.
_LATIN_LOOKALIKES = frozenset("аеорсухѕіјһԁԛԝүӏкмнтвАВЕКМНОРСТХЅІЈҮοινρτυκαΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")
_TRUNCATION = "… (+{} chars)"


def render(tool: str, arguments: Mapping[str, Any], *, max_value_chars: int | None = 200) -> str:
    """The card: a ``tool:`` line, then one ``name = value`` line per argument, keys sorted.

    ``max_value_chars=None`` cuts nothing: the full text, which the device shows on request.
    """
    values = _arguments(arguments)
    lines = [f"tool: {_name(tool, max_value_chars)}{_tail(_findings(tool))}"]
    for key in sorted(values):
        value = values[key]
        found = [f"{finding} in name" for finding in _findings(key)]
        for text in _strings(value):
            found.extend(f for f in _findings(text) if f not in found)
        shown = _shown(_json(value), max_value_chars)
        lines.append(f"  {_name(key, max_value_chars)} = {shown}{_tail(found)}")
    return "\n".join(lines)


def full(tool: str, arguments: Mapping[str, Any]) -> str:
    """The card with nothing cut: what a device shows when the user opens a shortened card."""
    return render(tool, arguments, max_value_chars=None)


def summary(tool: str, arguments: Mapping[str, Any], *, max_value_chars: int = 40) -> str:
    """One line: ``tool(name=value, ...)``, ending in ``⚠`` when the full card has a marker."""
    values = _arguments(arguments)
    parts = [
        f"{_name(key, max_value_chars)}={_shown(_json(values[key]), max_value_chars)}"
        for key in sorted(values)
    ]
    flagged = any(_findings(text) for text in [tool, *_strings(values)])
    return f"{_name(tool, max_value_chars)}({', '.join(parts)})" + (" ⚠" if flagged else "")


def escape(text: str) -> str:
    """``text`` with every hiding or reordering character replaced by a ``\\uXXXX`` escape."""
    return "".join(_escape_char(ch) if _hidden(ch) else ch for ch in text)


def _arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    # A mapping normalises to a dict; the cast only tells the type checker so.
    return cast(dict[str, Any], normalise(dict(arguments)))


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))
    return escape(text)


def _name(name: str, limit: int | None) -> str:
    if _PLAIN_NAME.fullmatch(name):
        return name
    return _shown(escape(json.dumps(name, ensure_ascii=False)), limit)


def _shown(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    kept = 0
    for unit in _UNIT.finditer(text):
        if unit.end() > limit:
            break
        kept = unit.end()
    return text[:kept] + _TRUNCATION.format(len(text) - kept)


def _hidden(ch: str) -> bool:
    if ch == " ":
        return False
    return ch in _INVISIBLE or unicodedata.category(ch) in _ESCAPED_CATEGORIES


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    # JSON spells a code point above the BMP as a surrogate pair.
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _findings(text: str) -> list[str]:
    found = []
    if _mixes_scripts(text):
        found.append("mixed scripts")
    if _poses_as_latin(text):
        found.append("looks like Latin letters")
    if any(_styled(ch) for ch in text):
        found.append("look-alike characters")
    # Newlines and tabs show as JSON escapes and hide nothing.
    if any(_hidden(ch) and ch not in "\n\r\t" for ch in text):
        found.append("hidden characters")
    if not unicodedata.is_normalized("NFC", text):
        found.append("not NFC")
    return found


def _tail(found: list[str]) -> str:
    return "".join(f"  ⚠ {finding}" for finding in found)


def _mixes_scripts(text: str) -> bool:
    scripts = set()
    for ch in text:
        if unicodedata.category(ch).startswith("L"):
            script = unicodedata.name(ch, "").partition(" ")[0]
            if script in _LOOKALIKE_SCRIPTS:
                scripts.add(script)
    return len(scripts) > 1


def _poses_as_latin(text: str) -> bool:
    letters = [ch for ch in text if unicodedata.category(ch).startswith("L")]
    return bool(letters) and all(ch in _LATIN_LOOKALIKES for ch in letters)


def _styled(ch: str) -> bool:
    category = unicodedata.category(ch)
    if not (category.startswith("L") or category.startswith("N")):
        return False
    return unicodedata.normalize("NFKC", ch) != ch


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
