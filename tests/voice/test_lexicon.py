"""Loading and checking the consent lexicons."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml

from voicegate.domain import Stage
from voicegate.errors import ConfigError
from voicegate.reasons import Kind, Reason
from voicegate.voice import consent
from voicegate.voice.consent import read_words
from voicegate.voice.lexicon import (
    LANGS,
    LEXICON_DIR,
    Side,
    Word,
    load,
    merge,
    parse,
    vocabulary,
)


def minimal(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "lang": "xx",
        "yes": ["yes"],
        "cancel": ["no", "cancel"],
        "wait": ["wait"],
        "negators": ["no", "not"],
        "numbers": {"cardinals": {"one": 1, "two": 2}, "patterns": ["number {n}"]},
    }
    data.update(changes)
    return data


@pytest.mark.parametrize("lang", LANGS)
def test_shipped_lexicon_loads(lang: str) -> None:
    lexicon = load(lang)
    assert lexicon.lang == lang
    assert lexicon.lists["yes"] and lexicon.lists["cancel"] and lexicon.cardinals


def test_shipped_lexicons_merge_into_one_vocabulary() -> None:
    vocab = vocabulary()
    assert vocab.langs == LANGS
    assert vocab.phrases["yes"].word == Word.YES
    assert vocab.phrases["हां"].word == Word.YES


def test_load_is_cached() -> None:
    assert load("en") is load("en")
    assert vocabulary() is vocabulary()


def test_word_listed_as_yes_and_negator_is_rejected() -> None:
    with pytest.raises(ConfigError):
        parse(minimal(yes=["yes", "not"]), "xx")


def test_yes_phrase_containing_a_negator_is_rejected() -> None:
    with pytest.raises(ConfigError):
        parse(minimal(yes=["yes", "not really"]), "xx")


def test_filler_containing_a_negator_is_rejected() -> None:
    with pytest.raises(ConfigError):
        parse(minimal(fillers=["no problem"]), "xx")


def test_number_pattern_containing_a_negator_is_rejected() -> None:
    numbers = {"cardinals": {"one": 1}, "patterns": ["not {n}"]}
    with pytest.raises(ConfigError):
        parse(minimal(numbers=numbers), "xx")


def test_word_listed_as_yes_and_cancel_is_rejected() -> None:
    with pytest.raises(ConfigError):
        parse(minimal(cancel=["yes"]), "xx")


def test_word_listed_as_yes_and_number_is_rejected() -> None:
    numbers = {"cardinals": {"yes": 1}, "patterns": []}
    with pytest.raises(ConfigError):
        parse(minimal(numbers=numbers), "xx")


def test_spellings_that_normalise_alike_count_as_one_word() -> None:
    with pytest.raises(ConfigError):
        parse(minimal(yes=["हाँ"], cancel=["हां"]), "xx")


def test_question_mark_outside_questions_is_rejected() -> None:
    with pytest.raises(ConfigError):
        parse(minimal(yes=["yes?"]), "xx")


def test_unquoted_yaml_yes_key_is_rejected() -> None:
    data = yaml.safe_load("lang: xx\nyes: [okay]\n")
    with pytest.raises(ConfigError):
        parse(data, "xx")


@pytest.mark.parametrize(
    "bad",
    [
        {"yes": "yes"},
        {"yes": [True]},
        {"yes": [""]},
        {"wait": ["..."]},
        {"numbers": {"cardinals": {"one": "1"}}},
        {"numbers": {"cardinals": {"one": -1}}},
        {"numbers": {"cardinals": {"one": True}}},
        {"numbers": {"cardinals": {"twenty one": 21}}},
        {"numbers": {"patterns": ["number"]}},
        {"numbers": {"patterns": ["{n} {ordinal}"]}},
        {"numbers": []},
        {"readings": {"cards": ["{n}"]}},
        {"readings": []},
        {"colour": ["red"]},
    ],
)
def test_malformed_lexicon_is_rejected(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        parse(minimal(**bad), "xx")


def test_top_level_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(ConfigError):
        parse(["yes"], "xx")


def test_missing_lexicon_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load("en", tmp_path)


def test_invalid_yaml_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "en.yaml").write_text("yes: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError):
        load("en", tmp_path)


def test_phrase_meaning_two_things_across_lexicons_is_rejected() -> None:
    first = parse(minimal(), "aa")
    second = parse(minimal(yes=["okay"], cancel=["yes"], negators=[]), "bb")
    with pytest.raises(ConfigError):
        merge([first, second])


def test_negator_of_one_lexicon_inside_yes_of_another_is_rejected() -> None:
    first = parse(minimal(negators_either_side=["mat"]), "aa")
    second = parse(minimal(yes=["mat please"], negators=[]), "bb")
    with pytest.raises(ConfigError):
        merge([first, second])


def test_cardinal_may_also_be_a_sound_alike_and_alone_it_is_the_sound_alike() -> None:
    numbers = {"cardinals": {"do": 2}, "patterns": ["number {n}"]}
    vocab = merge([parse(minimal(numbers=numbers, sound_alikes={"do": 2}), "xx")])
    assert vocab.phrases["do"].word == Word.SOUND_ALIKE
    assert vocab.cardinals["do"] == 2
    assert read_words("do", 3, Stage.CHOOSE, vocab=vocab).reason == Reason.SOUND_ALIKE
    assert read_words("number do", 3, Stage.CHOOSE, vocab=vocab).card == 2


def test_cancel_word_may_also_negate() -> None:
    vocab = merge([parse(minimal(), "xx")])
    no = vocab.phrases["no"]
    assert (no.word, no.negates) == (Word.CANCEL, Side.AFTER)
    assert read_words("no", 2, Stage.CHOOSE, vocab=vocab).kind == Kind.CANCEL
    assert read_words("no two", 2, Stage.CHOOSE, vocab=vocab).reason == Reason.NEGATION


def test_grammar_module_spells_no_lexicon_word() -> None:
    """The grammar holds structure only; every word lives in the YAML lexicons."""
    source = Path(consent.__file__).read_text(encoding="utf-8")
    strings = {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    words = {t for phrase in vocabulary().phrases for t in phrase.split()}
    group_names = {"card", "yes", "cancel", "wait", "hedge", "negation", "question"}
    assert strings & words <= group_names


def test_default_lexicon_directory_holds_every_language() -> None:
    assert all((LEXICON_DIR / f"{lang}.yaml").is_file() for lang in LANGS)


def test_lexicons_are_package_data_so_a_wheel_reads_them() -> None:
    import tomllib

    import voicegate

    package = Path(voicegate.__file__).parent
    assert package / "lexicons" == LEXICON_DIR
    pyproject = tomllib.loads((package.parent / "pyproject.toml").read_text())
    assert "lexicons/*.yaml" in pyproject["tool"]["setuptools"]["package-data"]["voicegate"]
