"""Text normalisation of transcripts and lexicon phrases."""

from __future__ import annotations

import pytest

from voicegate.voice.normalise import normalise


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Yes.", "yes"),
        ("  YES   please  ", "yes please"),
        ("Don't!", "dont"),
        ("Don’t", "dont"),
        ("yes,no", "yes no"),
        ("2-3", "2 3"),
        ("theek hai?", "theek hai ?"),
        ("Two?!", "two ?"),
        ("¿qué?", "? qué ?"),
        ("हाँ", "हां"),
        ("हां", "हां"),
        ("ज़रा", "जरा"),
        ("थोड़ा", "थोडा"),
        ("फ़ाइव", "फाइव"),
        ("२", "2"),
        ("०१२३४५६७८९", "0123456789"),
        ("हाँ। ठीक है॥", "हां ठीक है"),
        ("क्\u200dष", "क्ष"),
        ("[Music]", "music"),
        ("...", ""),
        ("", ""),
        ("Ｙｅｓ", "ｙｅｓ"),
    ],
)
def test_normalise_folds_text_to_one_spelling(text: str, want: str) -> None:
    assert normalise(text) == want


def test_normalise_keeps_is_and_yes_apart() -> None:
    """Whisper's own normaliser maps है and हाँ to one string; this one must not."""
    assert normalise("है") != normalise("हाँ")


def test_normalise_keeps_precomposed_and_decomposed_forms_equal() -> None:
    assert normalise("caf\u00e9") == normalise("cafe\u0301")
    assert normalise("\u095b") == normalise("\u091c\u093c") == "\u091c"
