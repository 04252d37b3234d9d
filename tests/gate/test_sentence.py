"""A card told as a sentence: the tool's words, then each argument, hiding nothing the card
marks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicegate.gate.card import sentence
from voicegate.text import escape


def test_a_card_reads_as_a_sentence_of_its_tool_and_arguments() -> None:
    said = sentence("write_note", {"name": "a", "text": "milk"})
    assert said == "Write note with name “a” and text “milk”."


def test_a_tool_without_arguments_is_one_short_sentence() -> None:
    assert sentence("deleteAll", {}) == "Delete all."


@pytest.mark.parametrize(
    ("value", "shown"),
    [(5, "n 5"), (True, "n true"), (None, "n null"), (["a", 2], 'n ["a", 2]'), ("5", "n “5”")],
)
def test_values_keep_their_json_types_apart(value: Any, shown: str) -> None:
    assert sentence("count", {"n": value}) == f"Count with {shown}."


def test_a_value_that_hides_characters_is_escaped_and_marked() -> None:
    said = sentence("pay", {"to": "\u202epaypal"})
    assert "\u202e" not in said
    assert "“\\u202epaypal” (⚠ hidden characters)" in said


def test_a_look_alike_value_keeps_its_marker() -> None:
    assert "(⚠ mixed scripts)" in sentence("pay", {"to": "pаypal"})


def test_a_long_value_is_cut_as_on_the_card_and_says_so() -> None:
    said = sentence("write_note", {"text": "x" * 300})
    assert "… (+100 chars)" in said
    assert "x" * 300 in sentence("write_note", {"text": "x" * 300}, max_value_chars=None)


@settings(deadline=None)
@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=40))
def test_a_sentence_never_holds_a_character_the_card_escapes(value: str) -> None:
    said = sentence("write_note", {"text": value})
    assert escape(said) == said
