r"""Text from outside: what no store can hold, and how a terminal may print it.

``storable``: JSON may spell a lone surrogate (``"\udc00"``); it decodes to a Python string that
has no UTF-8 form, so SQLite and PostgreSQL refuse to bind it, and PostgreSQL refuses NUL in
text as well. Such a value is the sender's mistake, refused as ``bad_request`` where it comes
in; it must never look like a store outage.

``printable``: what a command prints of a device name, a user, a tool name or a receipt is text
someone else chose. An escape sequence in it (``ESC [2J``, a title change, a bidi override)
would act on the operator's terminal, so every such character is printed as a ``\uXXXX``
escape, the card's own rule (``gate.card.escape``), line by line so that a JSON document
stays JSON that decodes to the same values.
"""

from __future__ import annotations

from voicegate.gate.card import escape

__all__ = ["printable", "storable"]


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
