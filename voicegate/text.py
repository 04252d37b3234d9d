r"""Text from outside: what no store can hold, and how a terminal may print it.

``storable``: JSON may spell a lone surrogate (``"\udc00"``); it decodes to a Python string that
has no UTF-8 form, so SQLite and PostgreSQL refuse to bind it, and PostgreSQL refuses NUL in
text as well. Such a value is the sender's mistake, refused as ``bad_request`` where it comes
in; it must never look like a store outage.

``printable``: what a command prints of a device name, a user, a tool name or a receipt is text
someone else chose. An escape sequence in it (``ESC [2J``, a title change, a bidi override)
would act on the operator's terminal, so every such character is printed as a ``\uXXXX``
escape (``escape``, the card's own rule), line by line so that a JSON document stays JSON that
decodes to the same values.
"""

from __future__ import annotations

import unicodedata

__all__ = ["escape", "hidden", "printable", "storable"]

_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
# Letters and marks that render as nothing although Unicode does not call them format chars.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")


def escape(text: str) -> str:
    """``text`` with every hiding or reordering character replaced by a ``\\uXXXX`` escape."""
    return "".join(_escape_char(ch) if hidden(ch) else ch for ch in text)


def hidden(ch: str) -> bool:
    """Whether ``ch`` would hide or reorder text: a control, format, separator, private-use or
    unassigned character, an unusual space, or a letter that renders as nothing."""
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


def storable(text: str) -> bool:
    """Whether every store can hold ``text``: it has a UTF-8 form and no NUL character."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """``text`` with each control, bidi or other hiding character escaped; lines stay lines."""
    return "\n".join(escape(line) for line in text.split("\n"))


def counted(n: int, noun: str, plural: str = "") -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: "1 problem", "2 problems", "0 problems"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
