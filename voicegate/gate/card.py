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

The agent's question above a choice (``preview``) is escaped and marked the same way. The short
names of cards and sets that buttons and announcements use (``names``) escape what they show
too, and end in ``⚠`` where what they name has a marker.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from voicegate.canonical import normalise
from voicegate.text import escape, hidden

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# One displayed unit: a JSON escape, or one character. Cuts fall between units only.
_UNIT = re.compile(r"\\u[0-9a-fA-F]{4}|\\.|.", re.DOTALL)
_LOOKALIKE_SCRIPTS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"})
# Cyrillic and Greek letters drawn like Latin ones. A string written only in these reads as a
# Latin word ("аѕһа" for "asha") although no script is mixed.
_LATIN_LOOKALIKES = frozenset("аеорсухѕіјһԁԛԝүӏкмнтвАВЕКМНОРСТХЅІЈҮοινρτυκαΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")
_TRUNCATION = "… (+{} chars)"
# A short name shows at most this many characters of a value, and of a question.
_NAME_VALUE_CHARS = 30
_NAME_QUESTION_CHARS = 60
# A headline (``headline``) shows at most this many characters of a value.
_HEADLINE_VALUE_CHARS = 40
# A value too long for a name that differs from another only late keeps its first characters,
# then the stretch from a few characters before the first one that differs.
_NAME_HEAD = 10
_NAME_LEAD = 8


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
    flagged = _flagged(tool, values)
    return f"{_name(tool, max_value_chars)}({', '.join(parts)})" + (" ⚠" if flagged else "")


def sentence(tool: str, arguments: Mapping[str, Any], *, max_value_chars: int | None = 200) -> str:
    """The card told as a sentence: ``Write note with name “a” and text “milk”.``

    The tool's words (``write_note``, ``sendEmail``) begin it; each argument follows, keys
    sorted, as its key's words and its value: a string in quotes, escaped as on the card, any
    other value as JSON. A value is cut as on the card (``max_value_chars``; ``None`` cuts
    nothing), and the card's markers follow it in brackets (``“pаypal” (⚠ mixed scripts)``).
    It hides nothing the card shows that a reader could miss; the card itself stays one press
    away on every client.
    """
    values = _arguments(arguments)
    head = _words(tool) or _name(tool, max_value_chars)
    head = head[:1].upper() + head[1:]
    found = _findings(tool)
    if found:
        head += f" ({_marks(found)})"
    parts = []
    for key in sorted(values):
        value = values[key]
        marks = [f"{finding} in name" for finding in _findings(key)]
        for text in _strings(value):
            marks.extend(f for f in _findings(text) if f not in marks)
        shown = (
            f"“{_shown(_json(value)[1:-1], max_value_chars)}”"
            if isinstance(value, str)
            else _shown(_json(value), max_value_chars)
        )
        word = _words(key) or _name(key, max_value_chars)
        parts.append(f"{word} {shown}" + (f" ({_marks(marks)})" if marks else ""))
    if not parts:
        return head + "."
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{head} with {listed}."


def headline(
    cards: Sequence[tuple[str, Mapping[str, Any]]], question: str = "", *, chosen: int | None = None
) -> str:
    """One short line for a set where little room is left, such as a notification: the card's
    sentence with each value cut at 40 characters, or, for a choice, its name (``names``)."""
    if chosen is not None or len(cards) == 1:
        tool, arguments = cards[(chosen or 1) - 1]
        return sentence(tool, arguments, max_value_chars=_HEADLINE_VALUE_CHARS)
    return names(cards, question)[0]


def _words(name: str) -> str:
    """A plain name's words: ``write_note`` and ``writeNote`` read ``write note``; "" for a
    name that is not plain ASCII (it is shown quoted and escaped instead)."""
    if not _PLAIN_NAME.fullmatch(name):
        return ""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return " ".join(
        w.lower() if not w.isupper() else w for w in re.split(r"[_.\-\s]+", spaced) if w
    )


def _marks(found: list[str]) -> str:
    return "; ".join(f"⚠ {finding}" for finding in found)


def preview(text: str) -> str:
    """The line above a set's cards (the question of a choice): escaped like a value, and ending
    in the card's markers for it."""
    return escape(text) + _tail(_findings(text))


def names(
    cards: Sequence[tuple[str, Mapping[str, Any]]], question: str = "", *, chosen: int | None = None
) -> tuple[str, list[str]]:
    """The set's short name and one per card (``tool``, ``arguments``), for buttons and
    announcements: ``write_note 'eggs'``, ``“Which note?” (one of 2: write_note)``.

    A card is named by its tool and a value: its first argument's alone, or, in a set of several,
    those of the fewest arguments that tell every two cards of one tool apart (chosen greedily,
    the most telling first), each after its key when there are several. A value too long to show
    whole keeps its start; when it differs from another card's only past that, also the stretch
    where it does (``'Meet at th…ce on Monday at 10'``). Cards whose names are still alike end in
    their numbers (`` (card 2)``). What a name shows is escaped as on the card, and it ends in
    ``⚠`` when what it names has a marker. A set of one card, or at its final step (``chosen``),
    is named as that card; a choice by its question, cut at 60 characters.
    """
    tools = [tool for tool, _ in cards]
    values = [_arguments(arguments) for _, arguments in cards]
    labels = _card_names(tools, values)
    if chosen is not None:
        return labels[chosen - 1], labels
    if len(cards) == 1:
        return labels[0], labels
    kinds = ", ".join(dict.fromkeys(_name(tool, _NAME_VALUE_CHARS) for tool in tools))
    asked = question.strip()
    if len(asked) > _NAME_QUESTION_CHARS:
        asked = asked[: _NAME_QUESTION_CHARS - 1].rstrip(" ") + "…"
    asked = escape(asked)
    what = f"one of {len(cards)}: {kinds}"
    name = f"“{asked}” ({what})" if asked else what
    flagged = bool(_findings(question)) or any(
        _flagged(tool, value) for tool, value in zip(tools, values, strict=True)
    )
    return name + (" ⚠" if flagged else ""), labels


def _card_names(tools: list[str], values: list[dict[str, Any]]) -> list[str]:
    # Each value as a name shows it before escaping: a string bare, anything else as JSON.
    texts = [
        {key: v if isinstance(v, str) else _dumps(v) for key, v in value.items()}
        for value in values
    ]
    keys = _telling_keys(tools, values)
    labels = []
    for number, (tool, text) in enumerate(zip(tools, texts, strict=True)):
        parts = []
        for key in [key for key in keys or sorted(text)[:1] if key in text]:
            others = [t[key] for i, t in enumerate(texts) if i != number and key in t]
            shown = f"'{_name_value(text[key], others)}'"
            parts.append(f"{_name(key, _NAME_VALUE_CHARS)} {shown}" if len(keys) > 1 else shown)
        label = _name(tool, _NAME_VALUE_CHARS) + (f" {', '.join(parts)}" if parts else "")
        labels.append(label + (" ⚠" if _flagged(tool, values[number]) else ""))
    alike = {label for label in labels if labels.count(label) > 1}
    return [f"{label} (card {n})" if label in alike else label for n, label in enumerate(labels, 1)]


def _telling_keys(tools: list[str], values: list[dict[str, Any]]) -> list[str]:
    """The fewest keys, chosen greedily, whose values tell apart every two cards of one tool."""
    dumped = [{key: _dumps(v) for key, v in value.items()} for value in values]
    apart = {
        (i, j) for i in range(len(tools)) for j in range(i + 1, len(tools)) if tools[i] == tools[j]
    }
    keys = sorted({key for value in values for key in value})
    chosen: list[str] = []
    while apart:
        told = {
            key: {(i, j) for i, j in apart if dumped[i].get(key) != dumped[j].get(key)}
            for key in keys
        }
        # The first key in order that tells most pairs apart; ``max`` keeps the first of equals.
        best = max(keys, key=lambda key: len(told[key]), default=None)
        if best is None or not told[best]:
            break
        chosen.append(best)
        apart -= told[best]
    return sorted(chosen)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def _name_value(text: str, others: list[str]) -> str:
    """``text`` as a name shows it: whole, or cut so that it still differs from ``others``, and
    escaped. Lengths count characters before escaping: an escape is one character shown."""
    if len(text) <= _NAME_VALUE_CHARS:
        return escape(text)
    differs = max((_common(text, other) for other in others if other != text), default=0)
    if differs < _NAME_VALUE_CHARS - 1:
        return escape(text[: _NAME_VALUE_CHARS - 1].rstrip(" ")) + "…"
    # Room for the head, the stretch and an ellipsis after each; the stretch ends no later
    # than the value, and starts after the head (the difference lies past the first 29).
    size = _NAME_VALUE_CHARS - _NAME_HEAD - 2
    start = min(differs - _NAME_LEAD, len(text) - size)
    more = "…" if start + size < len(text) else ""
    head = escape(text[:_NAME_HEAD].rstrip(" "))
    return f"{head}…{escape(text[start : start + size])}{more}"


def _common(one: str, other: str) -> int:
    """How many characters ``one`` and ``other`` share from the start."""
    n = 0
    for a, b in zip(one, other, strict=False):
        if a != b:
            break
        n += 1
    return n


def _flagged(tool: str, values: dict[str, Any]) -> bool:
    """Whether the card of ``tool`` and ``values`` has a marker anywhere, a key's included."""
    return any(_findings(text) for text in [tool, *_strings(values)])


def _arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    # A mapping normalises to a dict; the cast only tells the type checker so.
    return cast(dict[str, Any], normalise(dict(arguments)))


def _json(value: Any) -> str:
    return escape(_dumps(value))


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


def _findings(text: str) -> list[str]:
    found = []
    if _mixes_scripts(text):
        found.append("mixed scripts")
    if _poses_as_latin(text):
        found.append("looks like Latin letters")
    if any(_styled(ch) for ch in text):
        found.append("look-alike characters")
    # Newlines and tabs show as JSON escapes and hide nothing.
    if any(hidden(ch) and ch not in "\n\r\t" for ch in text):
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
