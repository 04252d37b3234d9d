"""The card names the tool and every argument, one line each, with nothing hidden."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicegate.canonical import canonical_json
from voicegate.gate.card import names, preview, render, summary
from voicegate.text import escape

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=10,
)
arguments = st.dictionaries(text, json_values, max_size=6)

HIDING = (
    [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
    + [chr(c) for c in range(0x200B, 0x2010)]
    + ["\u2060", "\ufeff", "\u00ad", "\u2028", "\u2029", "\u0085", "\u007f", "\u00a0", "\u3164"]
    + ["\U000e0041", "\ue000"]
)

# A loaded machine must not fail a property on time; speed lives in benchmarks.
NO_DEADLINE = settings(deadline=None)


def value_text(line: str) -> str:
    """The value part of one argument line, without markers.

    Names and values are read as JSON, not split on text: a quoted name may itself hold " = ",
    and a string value may hold the marker's own characters. A value cut short is no longer
    JSON, so it runs to the first marker.
    """
    decoder = json.JSONDecoder()
    body = line.removeprefix("  ")
    name_end = decoder.raw_decode(body)[1] if body.startswith('"') else body.index(" = ")
    rest = body[name_end:].removeprefix(" = ")
    try:
        return rest[: decoder.raw_decode(rest)[1]]
    except json.JSONDecodeError:
        return rest.split("  ⚠ ", 1)[0]


def test_card_names_the_tool_then_each_argument_sorted() -> None:
    card = render("send_email", {"to": "bob@example.com", "amount": 10, "cc": None})
    assert card.splitlines() == [
        "tool: send_email",
        "  amount = 10",
        "  cc = null",
        '  to = "bob@example.com"',
    ]


def test_card_shows_json_types_apart() -> None:
    lines = render("t", {"a": 1, "b": "1", "c": True, "d": "true", "e": 1.0}).splitlines()
    assert lines[1:] == ["  a = 1", '  b = "1"', "  c = true", '  d = "true"', "  e = 1"]


@pytest.mark.parametrize(
    "value",
    [
        "bob', to='evil",
        'bob", to="evil',
        "bob\nto = evil",
        'bob\r\n  to = "evil"',
        "bob\u2028  to = evil",
        "bob\u0085  to = evil",
        "bob\x0b  to = evil",
    ],
)
def test_a_value_cannot_render_as_another_argument(value: str) -> None:
    lines = render("send_email", {"to": value}).splitlines()
    assert len(lines) == 2
    assert lines[1].startswith("  to = ")
    assert json.loads(value_text(lines[1])) == value


def test_a_name_that_is_not_plain_is_quoted_and_escaped() -> None:
    lines = render("t", {'to = "x"\nfrom': 1, "ok_name-1.2": 2, "": 3}).splitlines()
    assert lines[1:] == ['  "" = 3', "  ok_name-1.2 = 2", '  "to = \\"x\\"\\nfrom" = 1']


def test_a_tool_name_that_is_not_plain_is_quoted() -> None:
    assert render("send\u202eliame", {}).splitlines()[0].startswith('tool: "send\\u202eliame"')


@pytest.mark.parametrize("hiding", HIDING)
def test_hiding_characters_show_as_escapes_and_are_flagged(hiding: str) -> None:
    card = render("t", {"v": f"a{hiding}b"})
    assert hiding not in card
    assert "⚠ hidden characters" in card
    assert json.loads(value_text(card.splitlines()[1])) == f"a{hiding}b"


def test_bidi_override_shows_as_a_visible_escape() -> None:
    assert (
        render("t", {"file": "invoice\u202efdp.exe"})
        .splitlines()[1]
        .startswith('  file = "invoice\\u202efdp.exe"')
    )


def test_a_character_above_the_bmp_escapes_as_a_json_surrogate_pair() -> None:
    assert escape("\U000e0041") == "\\udb40\\udc41"


def test_a_literal_backslash_u_cannot_pass_for_an_escape() -> None:
    line = render("t", {"v": "\\u202e"}).splitlines()[1]
    assert value_text(line) == '"\\\\u202e"'
    assert "⚠" not in line


def test_latin_and_cyrillic_in_one_value_are_flagged() -> None:
    card = render("send_email", {"to": "bob@ex\u0430mple.com", "cc": "bob@example.com"})
    lines = card.splitlines()
    assert lines[2].endswith("⚠ mixed scripts")
    assert "⚠" not in lines[1]


def test_a_name_mixing_scripts_is_flagged_as_such() -> None:
    assert "⚠" not in render("t", {"amount": 1})
    line = render("t", {"am\u043eunt": 1}).splitlines()[1]
    assert line == '  "am\u043eunt" = 1  ⚠ mixed scripts in name'


def test_mixed_scripts_inside_nested_values_are_flagged() -> None:
    assert render("t", {"v": {"k": ["p\u0430ypal"]}}).endswith("⚠ mixed scripts")


def test_one_script_per_value_is_not_flagged() -> None:
    card = render("t", {"a": "Привет", "b": "Γειά", "c": "東京タワー", "d": "naïve café"})
    assert "⚠" not in card


def test_look_alike_letters_are_flagged() -> None:
    assert render("t", {"v": "\uff41dmin"}).endswith("⚠ look-alike characters")
    assert render("t", {"v": "\U0001d41a\U0001d41d"}).endswith("⚠ look-alike characters")


def test_strings_not_in_nfc_are_flagged() -> None:
    assert render("t", {"v": "cafe\u0301"}).endswith("⚠ not NFC")
    assert "⚠" not in render("t", {"v": "café"})


def test_long_values_are_cut_with_a_visible_count() -> None:
    line = render("t", {"v": "x" * 500}, max_value_chars=50).splitlines()[1]
    assert line == '  v = "' + "x" * 49 + "… (+452 chars)"


def test_a_cut_never_splits_an_escape() -> None:
    value = "\u202e" * 100
    line = render("t", {"v": value}, max_value_chars=20).splitlines()[1]
    shown = value_text(line).split("…")[0]
    assert shown == '"' + "\\u202e" * 3


def test_floats_show_as_the_hash_binds_them() -> None:
    assert render("t", {"n": 5.0, "m": 2.5}).splitlines()[1:] == ["  m = 2.5", "  n = 5"]


def test_values_that_cannot_be_hashed_cannot_be_shown() -> None:
    with pytest.raises(ValueError):
        render("t", {"n": float("nan")})
    with pytest.raises(ValueError):
        render("t", {"b": b"bytes"})


def test_summary_is_one_line_naming_every_argument() -> None:
    assert summary("send_email", {"to": "bob", "amount": 10}) == 'send_email(amount=10, to="bob")'
    assert summary("t", {"v": "a\nb"}) == 't(v="a\\nb")'


def test_summary_warns_when_the_card_has_a_marker() -> None:
    assert summary("t", {"v": "p\u0430ypal"}).endswith(" ⚠")
    assert summary("t", {"v": ["x\u200b"]}).endswith(" ⚠")


def test_summary_cuts_long_values() -> None:
    assert summary("t", {"v": "x" * 100}).endswith(
        "… (+62 chars))"
    )  # 102 JSON characters, 40 shown


@pytest.mark.slow
@NO_DEADLINE
@given(st.text(max_size=20), arguments)
def test_one_line_per_argument_always(tool: str, args: dict[str, Any]) -> None:
    try:
        card = render(tool, args)
    except ValueError:
        return  # the tool name held a lone surrogate: refused, like the hash refuses it
    lines = card.splitlines()
    assert len(lines) == 1 + len(args)
    assert lines[0].startswith("tool: ")
    assert all(line.startswith("  ") and " = " in line for line in lines[1:])


@pytest.mark.slow
@NO_DEADLINE
@given(arguments)
def test_no_raw_hiding_character_survives(args: dict[str, Any]) -> None:
    card = render("t", args, max_value_chars=10_000)
    for ch in card:
        assert ch == "\n" or unicodedata.category(ch) not in {
            "Cc",
            "Cf",
            "Cs",
            "Co",
            "Cn",
            "Zl",
            "Zp",
        }
        assert ch == " " or ch == "\n" or unicodedata.category(ch) != "Zs"


@NO_DEADLINE
@given(arguments)
def test_each_value_line_decodes_back_to_the_value(args: dict[str, Any]) -> None:
    from voicegate.canonical import normalise

    lines = render("t", args, max_value_chars=1_000_000).splitlines()[1:]
    values = normalise(args)
    for key, line in zip(sorted(values), lines, strict=True):
        assert json.loads(value_text(line)) == values[key]


@NO_DEADLINE
@given(arguments)
def test_summary_is_always_one_line(args: dict[str, Any]) -> None:
    assert len(summary("t", args).splitlines()) == 1


def test_a_value_written_wholly_in_latin_lookalike_cyrillic_is_flagged() -> None:
    card = render("send_payment", {"to": "аѕһа"})
    assert "looks like Latin letters" in card


def test_a_real_russian_word_is_not_flagged_as_posing_as_latin() -> None:
    card = render("send_message", {"text": "Привет"})
    assert "looks like Latin letters" not in card


# Issue 35: the agent's question and the short names of cards and sets are its text too.
PROBE_QUESTION = "Which \u202enote\u200b \u2066now\u2069?\x1b[2J\r\nOK"
SAME_START = "Meet at the usual place on Monday at "
cards = st.lists(
    st.tuples(st.sampled_from(["write_note", "delete_note", "t\u202e"]), arguments),
    min_size=1,
    max_size=5,
    unique_by=lambda c: (c[0], canonical_json(c[1])),
)


def test_a_question_shows_hiding_characters_as_escapes_and_is_flagged() -> None:
    assert preview(PROBE_QUESTION) == (
        "Which \\u202enote\\u200b \\u2066now\\u2069?\\u001b[2J\\u000d\\u000aOK  ⚠ hidden characters"
    )
    assert preview("Which note?") == "Which note?"
    assert preview("Pay p\u0430ypal?") == "Pay p\u0430ypal?  ⚠ mixed scripts"


def test_a_set_asked_as_a_question_is_named_by_it_escaped_and_flagged() -> None:
    name, _ = names([("t", {"v": 1}), ("t", {"v": 2})], PROBE_QUESTION)
    assert name == (
        "“Which \\u202enote\\u200b \\u2066now\\u2069?\\u001b[2J\\u000d\\u000aOK” (one of 2: t) ⚠"
    )
    name, _ = names([("t", {"v": 1}), ("t", {"v": 2})], "Which " + "\u202e" * 70)
    # Cut at 60 units, an escape counting as one and never split.
    assert name.startswith("“Which " + "\\u202e" * 53 + "…” (one of 2: t)")


def test_card_names_are_the_first_differing_value_or_the_first_value() -> None:
    notes = [("write_note", {"name": "shopping", "text": t}) for t in ("milk", "eggs")]
    assert names(notes) == ("one of 2: write_note", ["write_note 'milk'", "write_note 'eggs'"])
    assert names(notes[:1]) == ("write_note 'shopping'", ["write_note 'shopping'"])
    assert names(notes, chosen=2)[0] == "write_note 'eggs'"
    other = [("write_note", {"name": "a"}), ("delete_note", {"name": "a"})]
    assert names(other)[1] == ["write_note 'a'", "delete_note 'a'"]


def test_values_alike_for_their_first_29_characters_get_different_names() -> None:
    _, labels = names([("t", {"v": SAME_START + "10"}), ("t", {"v": SAME_START + "11"})])
    assert labels == ["t 'Meet at th…ce on Monday at 10'", "t 'Meet at th…ce on Monday at 11'"]


def test_three_cards_alike_in_the_first_differing_argument_get_different_names() -> None:
    three = [
        ("t", {"name": "plans", "text": "a"}),
        ("t", {"name": "plans", "text": "b"}),
        ("t", {"name": "other", "text": "a"}),
    ]
    assert names(three)[1] == [
        "t name 'plans', text 'a'",
        "t name 'plans', text 'b'",
        "t name 'other', text 'a'",
    ]


def test_a_card_name_escapes_and_flags_a_hiding_character() -> None:
    _, labels = names([("t", {"v": "\\u202e"}), ("t", {"v": "\u202e"})])
    assert labels == ["t '\\u202e'", "t '\\u202e' ⚠"]


def test_cards_that_show_alike_are_named_with_their_numbers() -> None:
    _, labels = names([("t", {"v": 1}), ("t", {"v": "1"})])
    assert labels == ["t '1' (card 1)", "t '1' (card 2)"]


@pytest.mark.slow
@NO_DEADLINE
@given(cards, text)
def test_names_tell_every_card_apart_and_hide_nothing(
    shown: list[tuple[str, dict[str, Any]]], question: str
) -> None:
    name, labels = names(shown, question)
    assert len(set(labels)) == len(labels)
    assert all(escape(n) == n for n in [name, *labels])
