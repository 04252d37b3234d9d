"""Text from outside that no store can hold: a lone surrogate or a NUL character.

JSON may spell a lone surrogate (``"\\udc00"``); it decodes to a Python string that has no UTF-8
form, so SQLite and PostgreSQL refuse to bind it, and PostgreSQL refuses NUL in text as well.
Such a value is the sender's mistake, refused as ``bad_request`` where it comes in; it must
never look like a store outage.
"""

from __future__ import annotations

__all__ = ["storable"]


def storable(text: str) -> bool:
    """Whether every store can hold ``text``: it has a UTF-8 form and no NUL character."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
