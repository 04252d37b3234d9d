"""Invariants of the consent grammar and normalisation, checked with Hypothesis."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from voicegate.domain import Stage
from voicegate.reasons import Kind
from voicegate.voice.consent import read_words
from voicegate.voice.lexicon import LANGS, SLOT_NUMBER, SLOT_ORDINAL, load, vocabulary
from voicegate.voice.normalise import normalise

VOCAB = vocabulary()
LEXICONS = [load(lang) for lang in LANGS]
NEGATORS = sorted(
    {
        word
        for lx in LEXICONS
        for word in lx.lists["negators"] | lx.lists["negators_either_side"]
        if " " not in word
    }
)
WORDS = sorted(
    {token for phrase in VOCAB.phrases for token in phrase.split()}
    | {t for p in VOCAB.patterns for t in p if t not in (SLOT_NUMBER, SLOT_ORDINAL)}
)
YES = sorted({p for lx in LEXICONS for p in lx.lists["yes"]})
CANCEL = sorted({p for lx in LEXICONS for p in lx.lists["cancel"]})
WAIT = sorted({p for lx in LEXICONS for p in lx.lists["wait"]})
# Words that split two phrases apart, so neither can swallow the other ("second", "one").
SEPARATORS = [" please ", " or ", ", please, ", " ji "]


def number_phrases(card: int) -> list[str]:
    """Every single-card phrase the lexicons build for ``card``."""
    cardinals = [w for w, n in VOCAB.cardinals.items() if n == card]
    ordinals = [w for w, n in VOCAB.ordinals.items() if n == card]
    phrases = [w for w in cardinals + ordinals if VOCAB.phrases[w].word == "number"]
    phrases.append(str(card))
    for pattern in VOCAB.patterns:
        fill = [*cardinals, str(card)] if SLOT_NUMBER in pattern else ordinals
        phrases.extend(
            " ".join(word if t in (SLOT_NUMBER, SLOT_ORDINAL) else t for t in pattern)
            for word in fill
        )
    return phrases


NUMBERS = {card: number_phrases(card) for card in range(1, 6)}

stages = st.sampled_from(list(Stage))
cards = st.integers(min_value=1, max_value=5)
words = st.sampled_from(WORDS) | st.text(max_size=6)
card_words = st.lists(st.sampled_from(WORDS) | st.text(max_size=10), max_size=4)
separators = st.sampled_from([" ", ", ", ". ", "! ", " - ", "... "])


@st.composite
def utterances_with_a_negator(draw: st.DrawFn) -> str:
    tokens = draw(st.lists(words, max_size=8))
    tokens.insert(draw(st.integers(0, len(tokens))), draw(st.sampled_from(NEGATORS)))
    return draw(separators).join(tokens)


@given(utterances_with_a_negator(), cards, stages, card_words)
@settings(max_examples=500)
def test_input_containing_a_negator_never_releases(
    text: str, count: int, stage: Stage, extra: list[str]
) -> None:
    assert not read_words(text, count, stage, extra).releases


@given(st.data(), cards, stages)
@settings(max_examples=500)
def test_input_with_two_different_answers_never_releases(
    data: st.DataObject, count: int, stage: Stage
) -> None:
    first, second = data.draw(st.lists(st.integers(1, 5), min_size=2, max_size=2, unique=True))
    release = st.sampled_from(YES) | st.sampled_from(NUMBERS[first])
    one, other = data.draw(
        st.sampled_from(
            [
                (st.sampled_from(NUMBERS[first]), st.sampled_from(NUMBERS[second])),
                (release, st.sampled_from(CANCEL)),
                (release, st.sampled_from(WAIT)),
            ]
        )
    )
    answers = data.draw(st.permutations([data.draw(one), data.draw(other)]))
    filler = data.draw(st.lists(st.sampled_from(["please", "ji", "the", "just"]), max_size=2))
    text = data.draw(st.sampled_from(SEPARATORS)).join([*filler, *answers])
    assert not read_words(text, count, stage).releases, text


@given(
    st.sampled_from(NEGATORS),
    st.sampled_from(YES + WAIT + NUMBERS[1] + NUMBERS[2]),
    st.booleans(),
    cards,
    stages,
)
@settings(max_examples=300)
def test_negated_answer_is_refused_not_cancelled_or_delayed(
    negator: str, answer: str, negator_first: bool, count: int, stage: Stage
) -> None:
    parts = [negator, answer] if negator_first else [answer, negator]
    assert read_words(" please ".join(parts), count, stage).kind == Kind.REFUSE


@given(st.text())
@settings(max_examples=500)
def test_normalisation_is_idempotent(text: str) -> None:
    once = normalise(text)
    assert normalise(once) == once


@given(
    st.text(
        alphabet=st.characters(min_codepoint=0x0900, max_codepoint=0x097F)
        | st.sampled_from(" ?.,'")
    )
)
@settings(max_examples=300)
def test_normalisation_of_devanagari_is_idempotent(text: str) -> None:
    once = normalise(text)
    assert normalise(once) == once


@given(st.text(), st.integers(), stages, st.lists(st.text(), max_size=5))
@settings(max_examples=500)
def test_decide_never_raises_and_returns_a_decision(
    text: str, count: int, stage: Stage, extra: list[str]
) -> None:
    decision = read_words(text, count, stage, extra)
    assert decision.kind in set(Kind)
    assert (decision.reason is not None) == (decision.kind == Kind.REFUSE)
    assert (decision.card is not None) == (decision.kind == Kind.CHOOSE)


@given(st.lists(words, max_size=10).map(" ".join), cards, stages, card_words)
@settings(max_examples=500)
def test_lexicon_word_salad_never_raises_and_chosen_card_exists(
    text: str, count: int, stage: Stage, extra: list[str]
) -> None:
    decision = read_words(text, count, stage, extra)
    if decision.kind == Kind.CHOOSE:
        assert stage == Stage.CHOOSE
        assert decision.card is not None and 1 <= decision.card <= count
    if decision.kind == Kind.CONFIRM:
        assert stage != Stage.CHOOSE or count == 1
