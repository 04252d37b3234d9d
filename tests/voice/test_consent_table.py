"""The consent grammar against its phrase table (tests/voice/consent_table.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind, Reason
from voicegate.voice.consent import read_words, readings
from voicegate.voice.hypotheses import read_transcript
from voicegate.voice.lexicon import LANGS

TABLE = Path(__file__).with_name("consent_table.yaml")


def expected(text: str) -> Decision:
    """A table entry such as "choose 2", "confirm" or "hedge" as a Decision."""
    kind, _, card = text.partition(" ")
    if card:
        return Decision(Kind(kind), card=int(card))
    if kind in {k.value for k in Kind}:
        return Decision(Kind(kind))
    return Decision(Kind.REFUSE, reason=Reason(kind))


def rows() -> list[Any]:
    params = []
    for group in yaml.safe_load(TABLE.read_text(encoding="utf-8")):
        stage = Stage(group["stage"])
        words = tuple(group.get("card_words", ()))
        for phrase, want in group["expect"].items():
            assert isinstance(phrase, str), f"quote the table key {phrase!r}"
            name = f"{phrase!r}-{group['cards']}-{stage.value}"
            params.append(pytest.param(phrase, group["cards"], stage, words, want, id=name))
    return params


ROWS = rows()


def test_table_holds_at_least_three_hundred_phrases() -> None:
    assert len(ROWS) >= 300


@pytest.mark.parametrize(("phrase", "cards", "stage", "card_words", "want"), ROWS)
def test_phrase_decides_as_the_table_says(
    phrase: str, cards: int, stage: Stage, card_words: tuple[str, ...], want: str
) -> None:
    assert read_words(phrase, cards, stage, card_words) == expected(want)


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("cards", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("lang", LANGS)
def test_each_reading_decides_to_its_own_decision(lang: str, cards: int, stage: Stage) -> None:
    found = readings(cards, stage, (lang,))
    assert found
    for reading in found:
        assert reading.lang == lang
        assert read_words(reading.text, cards, stage) == reading.decision, reading.text


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("cards", [1, 3, 5])
@pytest.mark.parametrize("lang", LANGS)
def test_readings_stay_short(lang: str, cards: int, stage: Stage) -> None:
    # Each reading is one forced sequence to score: about 5 ms each on 2 CPU cores, less for the
    # one-token numbers that share a batch (up to ten of them among several cards).
    assert 5 <= len(readings(cards, stage, (lang,))) <= 42


@pytest.mark.parametrize("cards", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("lang", LANGS)
def test_readings_name_every_card_when_choosing(lang: str, cards: int) -> None:
    chosen = {r.decision.card for r in readings(cards, Stage.CHOOSE, (lang,))}
    assert chosen - {None} == set(range(1, cards + 1))


@pytest.mark.parametrize("lang", LANGS)
def test_readings_offer_refusals_to_compete_with_answers(lang: str) -> None:
    kinds = {r.decision.kind for r in readings(3, Stage.CHOOSE, (lang,))}
    reasons = {r.decision.reason for r in readings(3, Stage.CHOOSE, (lang,))}
    assert {Kind.CHOOSE, Kind.CANCEL, Kind.MORE_TIME, Kind.REFUSE} <= kinds
    assert {Reason.HEDGE, Reason.NEGATION, Reason.SOUND_ALIKE} <= reasons


def test_final_readings_name_no_card() -> None:
    final = readings(3, Stage.FINAL, LANGS)
    assert all(r.decision.kind != Kind.CHOOSE for r in final)
    assert any(r.decision.kind == Kind.CONFIRM for r in final)


def test_plain_yes_reading_is_ambiguous_among_several_cards() -> None:
    yes = [r for r in readings(3, Stage.CHOOSE) if r.text == "yes"]
    assert [r.decision.reason for r in yes] == [Reason.AMBIGUOUS]


def test_readings_of_several_languages_do_not_repeat_a_text() -> None:
    texts = [r.text for r in readings(5, Stage.CHOOSE, LANGS)]
    assert len(texts) == len(set(texts))


def test_homophone_readings_are_their_card_and_near_misses_refuse() -> None:
    decided = {r.text: r.decision for r in readings(5, Stage.CHOOSE, LANGS)}
    for text, card in (("to", 2), ("for", 4), ("won", 1)):
        assert decided[text] == Decision(Kind.CHOOSE, card=card)
    for text in ("tooth", "tool", "true", "tree", "fife", "do", "दो", "तो", "टू"):
        assert decided[text].reason is Reason.SOUND_ALIKE
    # A near miss the lexicon names without a scored reading is read so in a transcript.
    assert read_transcript("Fork.", 5, Stage.CHOOSE).reason is Reason.SOUND_ALIKE
    # "for" names card four: with three cards open it is no reading at all.
    assert "for" not in {r.text for r in readings(3, Stage.CHOOSE, LANGS)}
