"""Text normalisation for transcripts and lexicon phrases, so both compare as the same string.

Deliberately not Whisper's own text normaliser: that one maps है ("is") and हाँ ("yes") to the
same string, which would let a sentence answer a yes/no question.
"""

from __future__ import annotations

import unicodedata

QUESTION_MARK = "?"

# Characters that mean "question" in other scripts keep the one question signal.
_QUESTION_MARKS = frozenset("?？¿؟")
# Apostrophes join a word ("don't" -> "dont") instead of splitting it.
_APOSTROPHES = frozenset("'’‘ʼ`´")
_CHANDRABINDU = "\u0901"
_ANUSVARA = "\u0902"
_NUKTA = "\u093c"
_DANDAS = frozenset("\u0964\u0965")


def normalise(text: str) -> str:
    """Casefolded, punctuation-free, single-spaced text; "?" survives as its own token."""
    # Decompose so precomposed nukta letters (ज़, ड़, ऩ) expose the nukta for removal.
    text = unicodedata.normalize("NFD", unicodedata.normalize("NFC", text).casefold())
    out: list[str] = []
    for char in text:
        out.append(_fold(char))
    folded = unicodedata.normalize("NFC", "".join(out)).casefold()
    return " ".join(unicodedata.normalize("NFC", folded).split())


def _fold(char: str) -> str:
    """One character's normal form: a digit, a space, nothing, or itself."""
    if char in _QUESTION_MARKS:
        return f" {QUESTION_MARK} "
    if char in _APOSTROPHES or char == _NUKTA:
        return ""
    if char == _CHANDRABINDU:
        # हाँ and हां are written both ways for the same word.
        return _ANUSVARA
    if char in _DANDAS:
        return " "
    category = unicodedata.category(char)
    if category == "Nd":
        # Devanagari and other decimal digits read as ASCII digits: २ -> 2.
        return str(unicodedata.decimal(char))
    if category[0] in "PSZ" or category == "Cc":
        return " "
    if category == "Cf":
        # Zero-width joiners and marks change the look of Devanagari, not the word.
        return ""
    return char
