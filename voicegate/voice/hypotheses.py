"""The scored texts of one hearing, and what the grammar reads each as. Pure.

Every reading the card allows and every free transcript of the beam becomes a
``decision.Hypothesis``: its text, its whole-sequence score and the decision it stands for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from voicegate.domain import Decision, Stage
from voicegate.voice import consent, decision
from voicegate.voice.normalise import QUESTION_MARK
from voicegate.voice.transcribe import Hearing

__all__ = ["LEXICONS", "SPOKEN", "hypotheses", "read_transcript"]

# Whisper language -> the grammar's lexicons for it.
LEXICONS: Mapping[str, tuple[str, ...]] = {"en": ("en",), "hi": ("hi-Deva", "hi-Latn")}
# A lexicon -> the Whisper language its readings are scored in.
SPOKEN: Mapping[str, str] = {lex: lang for lang, lexes in LEXICONS.items() for lex in lexes}


def hypotheses(
    readings: Sequence[consent.Reading],
    hearing: Hearing,
    cards: int,
    stage: Stage,
    card_words: Sequence[str] = (),
    *,
    partial: bool = True,
) -> list[decision.Hypothesis]:
    """Every scored text of one hearing with what it decides: the readings, then the free ones.

    With one card open, choosing card 1 and yes release the same action: they are one decision.
    A text that is a run of consecutive words inside its language's best transcript ("one" in
    "The second one.", "too" in "Me too.") is a partial hearing of that transcript, not another
    answer: where its own reading would release, it means what the best transcript means.
    Whisper drops leading words, and measured on "the second one" in 17 espeak-ng voices, the
    bare "One." took up to half the probability. A free transcript that is exactly the best
    transcript's words and one final "?" ("Yes?" below "Yes.") is the same words with another
    guess at the intonation: it means what the best transcript means, where every such
    question spelling together is less likely than the spellings of the words without it
    (else the question stands). On real speech_commands "yes" clips heard "Yes.", the "?"
    spellings took 1-39 % of the probability (docs/voice-measurements.md, "Punctuation").
    ``partial=False`` reads every text on its own (``benchmarks/phrases.py --compare``).
    """
    same = decision.merge(cards, stage)
    scores = dict(hearing.scores)
    best = _best(hearing, cards, stage, card_words) if partial else {}
    # A free transcript spelt exactly like a reading is that reading, counted once.
    covered = {h.reading for h in hearing.hypotheses if h.reading is not None}
    out = []
    for r in readings:
        if r.text not in covered:
            lang = SPOKEN.get(r.lang, "en")
            meaning = _within(r.text, lang, best, same(r.decision))
            out.append(decision.Hypothesis(r.text, meaning, scores.get(r.text, -math.inf), lang))
    ranks: dict[str, int] = {}
    for heard in hearing.hypotheses:
        rank = ranks[heard.language] = ranks.get(heard.language, -1) + 1
        own = read_transcript(heard.text, cards, stage, card_words)
        if rank:
            own = _respelt(heard.text, heard.language, best, own)
        meaning = _within(heard.text, heard.language, best, own) if rank else own
        out.append(decision.Hypothesis(heard.text, meaning, heard.score, heard.language, rank))
    return out


@dataclass(frozen=True, slots=True)
class _Best:
    """A language's best transcript: its words, what the grammar reads it as, and whether its
    question spellings are its own (``_respelt``)."""

    words: tuple[str, ...]
    meaning: Decision
    respelt: bool


def _best(
    hearing: Hearing, cards: int, stage: Stage, card_words: Sequence[str]
) -> dict[str, _Best]:
    """Each language's best transcript. Its question spellings (its words and one final "?")
    are its own when it releases, has no "?" of its own, and all of them together are less
    likely than all of its spellings without one."""
    best: dict[str, _Best] = {}
    mass: dict[tuple[str, bool], float] = {}
    for heard in hearing.hypotheses:
        words = consent.words_of(heard.text)
        if heard.language not in best:
            meaning = read_transcript(heard.text, cards, stage, card_words)
            best[heard.language] = _Best(words, meaning, False)
        whole = best[heard.language].words
        if words in (whole, (*whole, QUESTION_MARK)):
            key = (heard.language, words != whole)
            mass[key] = mass.get(key, 0.0) + math.exp(heard.score)
    for lang, b in best.items():
        plain_likelier = mass.get((lang, True), 0.0) < mass.get((lang, False), 0.0)
        if b.meaning.releases and QUESTION_MARK not in b.words and plain_likelier:
            best[lang] = _Best(b.words, b.meaning, True)
    return best


def _respelt(text: str, language: str, best: Mapping[str, _Best], own: Decision) -> Decision:
    """What ``text`` means when it is a question spelling of the best transcript that is the
    best one's own (``_best``): the best transcript's meaning; else ``own``."""
    b = best.get(language)
    if b is None or not b.respelt or consent.words_of(text) != (*b.words, QUESTION_MARK):
        return own
    return b.meaning


def _within(text: str, language: str, best: Mapping[str, _Best], own: Decision) -> Decision:
    """What ``text`` means: the best transcript's meaning when ``text`` is a part of it and
    its ``own`` reading would release, else ``own``. A part that is itself a refusal of
    meaning ("yes" inside "Yes, two." with three cards open, "to" inside "Go to two.") keeps
    it, so the likeliest hypothesis still vetoes as it did before partial hearings."""
    if language not in best or not own.releases:
        return own
    b = best[language]
    return b.meaning if consent.part_of(consent.words_of(text), b.words) else own


def read_transcript(
    text: str, cards: int, stage: Stage, card_words: Sequence[str] = ()
) -> Decision:
    """The grammar's decision for one transcript, card 1 and yes merged on a single card."""
    return decision.merge(cards, stage)(consent.read_words(text, cards, stage, card_words))
