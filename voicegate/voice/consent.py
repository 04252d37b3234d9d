"""The consent grammar: what one transcript means for a pending set. Pure: text in, Decision out.

The lexicons hold every word; this module holds only structure. A transcript is normalised,
split into the longest known phrases, and then read by a fixed order of rules in which every
doubt refuses: a question, a hedge, a negator near an answer, a sound-alike, an unknown word,
or two different answers. Only what is left can choose a card or confirm. See docs/voice.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind, Reason
from voicegate.voice.lexicon import (
    READING_GROUPS,
    SLOT_NUMBER,
    SLOT_ORDINAL,
    Lexicon,
    Sense,
    Side,
    Vocabulary,
    Word,
    load,
    vocabulary,
)
from voicegate.voice.normalise import QUESTION_MARK, normalise

# A spelling variant must be this close (rapidfuzz ratio, 0-100) and this long to count;
# short words differ by one letter from too many other words ("nahi"/"nai"/"hai").
FUZZY_SCORE = 90.0
FUZZY_MIN_LENGTH = 5
# A word this close to a number or sound-alike is never guessed at ("seconds", "secnd").
FUZZY_GUARD_SCORE = 80.0
# Digit strings longer than this are some big number, certainly no card.
MAX_DIGITS = 6

CANCEL = Decision(Kind.CANCEL)
CONFIRM = Decision(Kind.CONFIRM)
MORE_TIME = Decision(Kind.MORE_TIME)
_ANSWERS = (Word.YES, Word.NUMBER, Word.WAIT)


@dataclass(frozen=True, slots=True)
class Reading:
    """A canonical phrase the grammar accepts at a stage, and what it decides."""

    text: str
    lang: str
    decision: Decision


@dataclass(frozen=True, slots=True)
class GrantWords:
    """A yes that also says how long to allow the same again ("yes, for ten minutes"): what
    its answer part decides, that part's words, and the minutes said after it."""

    decision: Decision
    answer: str
    minutes: int


def refuse(reason: Reason) -> Decision:
    """A refusal with ``reason``."""
    return Decision(Kind.REFUSE, reason=reason)


def read_words(
    transcript: str,
    cards: int,
    stage: Stage,
    card_words: Sequence[str] = (),
    *,
    vocab: Vocabulary | None = None,
) -> Decision:
    """What ``transcript`` means for a set of ``cards`` cards waiting at ``stage``."""
    vocab = vocab if vocab is not None else vocabulary()
    tokens = normalise(transcript).split()
    if all(token == QUESTION_MARK for token in tokens):
        return refuse(Reason.NO_SPEECH)
    senses = [s for s in segment(tokens, vocab, card_words) if s is None or s.word != Word.NOISE]
    if not senses:
        return refuse(Reason.NO_SPEECH)
    # The answer was one word and nothing else: only then is "to" card two ("I want to" is not).
    alone = senses[0] if len(senses) == 1 else None
    content = [s for s in senses if s is None or s.word != Word.FILLER]
    return _meaning(content, cards, stage, alone)


def grant_of(
    transcript: str,
    cards: int,
    stage: Stage,
    card_words: Sequence[str] = (),
    *,
    vocab: Vocabulary | None = None,
) -> GrantWords | None:
    """The answer and the minutes of ``transcript`` when it is an answer that releases followed
    by a grant's length ("yes, for ten minutes", "haan, das minute"); None for anything else.

    Fails closed: the length must end the transcript, be one of the lexicons' ``grant``
    patterns with a plain number in its slot (no "about", no "or so", no "?" after it), and not
    be an answer phrase of its own ("ek minute" is a wait). The words before it are read by
    ``read_words`` unchanged, so a hedge, question, negator or second answer anywhere in them
    refuses exactly as it does without a length; a length after anything but a release is no
    grant. Whether the minutes may be had is the gate's to judge (``grants.refusal``).
    """
    vocab = vocab if vocab is not None else vocabulary()
    tokens = normalise(transcript).split()
    for pattern in sorted(vocab.grant, key=len, reverse=True):
        if len(tokens) <= len(pattern):
            continue
        tail = tokens[-len(pattern) :]
        minutes = _length(pattern, tail, vocab)
        if minutes is None or _answer_alone(pattern, tail, minutes, vocab):
            continue
        answer = " ".join(tokens[: -len(pattern)])
        meant = read_words(answer, cards, stage, card_words, vocab=vocab)
        return GrantWords(meant, answer, minutes) if meant.releases else None
    return None


def _answer_alone(
    pattern: Sequence[str], tail: Sequence[str], number: int, vocab: Vocabulary
) -> bool:
    """Whether ``tail`` is an answer phrase of its own with its number spelt any way: "ek
    minute" is a wait, and so is "1 minute", which is how a recogniser may write it."""
    slot = list(pattern).index(SLOT_NUMBER)
    spellings = {tail[slot], *(word for word, n in vocab.cardinals.items() if n == number)}
    return any(
        " ".join([*tail[:slot], spelt, *tail[slot + 1 :]]) in vocab.phrases for spelt in spellings
    )


def _length(pattern: Sequence[str], tail: Sequence[str], vocab: Vocabulary) -> int | None:
    """The number in ``tail`` where it is ``pattern`` with a cardinal or digits in its slot."""
    number: int | None = None
    for want, token in zip(pattern, tail, strict=True):
        if want == SLOT_NUMBER:
            number = vocab.cardinals.get(token, _digits(token))
        elif want != token:
            return None
    return number


def words_of(text: str, vocab: Vocabulary | None = None) -> tuple[str, ...]:
    """The words of ``text``, each cardinal and digit string as its number ("1." is "one")."""
    vocab = vocab if vocab is not None else vocabulary()
    out = []
    for token in normalise(text).split():
        number = vocab.cardinals.get(token, _digits(token))
        out.append(token if number is None else str(number))
    return tuple(out)


def part_of(words: Sequence[str], whole: Sequence[str]) -> bool:
    """True when ``words`` is a shorter run of consecutive words inside ``whole``."""
    size = len(words)
    return 0 < size < len(whole) and any(
        tuple(whole[i : i + size]) == tuple(words) for i in range(len(whole) - size + 1)
    )


def segment(
    tokens: Sequence[str], vocab: Vocabulary, card_words: Sequence[str] = ()
) -> list[Sense | None]:
    """The longest known phrase at each point, left to right; ``None`` for an unknown word."""
    extra = {t for w in card_words for t in normalise(w).split() if t != QUESTION_MARK}
    senses: list[Sense | None] = []
    start = 0
    while start < len(tokens):
        size, sense = _longest(tokens, start, vocab)
        if size == 0:
            size, sense = 1, _single(tokens[start], vocab, extra)
        senses.append(sense)
        start += size
    return senses


def _meaning(
    content: list[Sense | None], cards: int, stage: Stage, alone: Sense | None = None
) -> Decision:
    """The decision for the phrases that carry meaning (fillers and noise removed)."""
    words = {s.word for s in content if s is not None}
    if Word.QUESTION in words:
        return refuse(Reason.QUESTION)
    if Word.HEDGE in words:
        return refuse(Reason.HEDGE)
    negation = _negation(content)
    if negation is not None:
        return negation
    numbers = {s.number for s in content if s is not None and s.word == Word.NUMBER}
    single = content[0] if len(content) == 1 else None
    if cards == 1 and stage == Stage.CHOOSE and single is not None and _bare_one(single):
        # One card asks yes or no. A bare "one" is no yes: "on", "won" and "one" are one sound,
        # and a spoken "on" was heard "One." (docs/voice.md). "The first one" still chooses it.
        return refuse(Reason.NOT_UNDERSTOOD)
    # "to" alone sounds exactly like "two": on a set with a card two, it is card two.
    if (
        alone is not None
        and alone.homophone
        and stage == Stage.CHOOSE
        and alone.number is not None
        and 1 <= alone.number <= cards
    ):
        return Decision(Kind.CHOOSE, card=alone.number)
    if stage != Stage.CHOOSE and (numbers or Word.SOUND_ALIKE in words):
        return refuse(Reason.NUMBER_ON_FINAL)
    if Word.SOUND_ALIKE in words:
        return refuse(Reason.SOUND_ALIKE)
    if None in content or not words & {Word.YES, Word.NUMBER, Word.CANCEL, Word.WAIT}:
        return refuse(Reason.NOT_UNDERSTOOD)
    # "yes" agrees with a card number ("yes, the second one"); nothing else mixes.
    others = words & {Word.CANCEL, Word.WAIT}
    lone_yes = Word.YES in words and not numbers
    if len(others) + len(numbers) + lone_yes > 1:
        return refuse(Reason.CONTRADICTION)
    if Word.CANCEL in others:
        return CANCEL
    if Word.WAIT in others:
        return MORE_TIME
    if numbers:
        (number,) = numbers
        if number is None or not 1 <= number <= cards:
            return refuse(Reason.OUT_OF_RANGE)
        return Decision(Kind.CHOOSE, card=number)
    if stage != Stage.CHOOSE or cards == 1:
        return CONFIRM
    return refuse(Reason.AMBIGUOUS)


def _bare_one(sense: Sense) -> bool:
    """True for "one", "1" or "won" said alone, not inside a number pattern."""
    bare = sense.word == Word.NUMBER and not sense.phrase
    return sense.number == 1 and (bare or (sense.word == Word.SOUND_ALIKE and sense.homophone))


def _negation(content: list[Sense | None]) -> Decision | None:
    """NEGATION or CONTRADICTION when a negator touches an answer; ``None`` when none does."""
    negators = [(i, s) for i, s in enumerate(content) if s is not None and s.negates is not None]
    if not negators:
        return None
    answers = [i for i, s in enumerate(content) if s is not None and s.word in _ANSWERS]
    if answers:
        # "yes no" takes the answer back: two answers. "no yes", "ruko mat": negated.
        taken_back = all(
            i > max(answers) and s.word == Word.CANCEL and s.negates == Side.AFTER
            for i, s in negators
        )
        return refuse(Reason.CONTRADICTION if taken_back else Reason.NEGATION)
    if any(s.word == Word.NEGATOR for _, s in negators):
        return refuse(Reason.NEGATION)
    # "don't cancel": a negator beside a plain cancel word cancels the cancel.
    for i, _ in negators:
        for near in content[max(i - 1, 0) : i + 2]:
            if near is not None and near.word == Word.CANCEL and near.negates is None:
                return refuse(Reason.NEGATION)
    return None


def _longest(tokens: Sequence[str], start: int, vocab: Vocabulary) -> tuple[int, Sense | None]:
    """The size and sense of the longest phrase or number pattern starting at ``start``."""
    for size in range(min(vocab.longest, len(tokens) - start), 0, -1):
        window = tokens[start : start + size]
        sense = vocab.phrases.get(" ".join(window))
        if sense is None and size > 1:
            sense = _pattern(window, vocab)
        if sense is not None:
            return size, sense
    return 0, None


def _pattern(window: Sequence[str], vocab: Vocabulary) -> Sense | None:
    """A number phrase such as "number two" or "the second one", if ``window`` is one."""
    for pattern in vocab.patterns:
        if len(pattern) != len(window):
            continue
        number: int | None = None
        for want, token in zip(pattern, window, strict=True):
            if want == SLOT_NUMBER:
                number = vocab.cardinals.get(token, vocab.homophones.get(token, _digits(token)))
            elif want == SLOT_ORDINAL:
                number = vocab.ordinals.get(token)
            elif want != token:
                break
        else:
            if number is not None:
                return Sense(Word.NUMBER, number, phrase=True)
    return None


def _single(token: str, vocab: Vocabulary, card_words: set[str]) -> Sense | None:
    """An unlisted word: digits, one of the card's own words, or a close spelling variant."""
    number = _digits(token)
    if number is not None:
        return Sense(Word.NUMBER, number)
    if token in card_words:
        return Sense(Word.FILLER)
    return _variant(token, vocab)


def _digits(token: str) -> int | None:
    if not (token.isascii() and token.isdigit()):
        return None
    digits = token.lstrip("0") or "0"
    return int(digits) if len(digits) <= MAX_DIGITS else 10**MAX_DIGITS


def _variant(token: str, vocab: Vocabulary) -> Sense | None:
    """The lexicon word ``token`` misspells, if exactly one meaning is that close."""
    if len(token) < FUZZY_MIN_LENGTH:
        return None
    if process.extractOne(
        token, vocab.fuzzy_guards, scorer=fuzz.ratio, score_cutoff=FUZZY_GUARD_SCORE
    ):
        return None
    # A variant keeps its first letter, so a prefix ("unconfirmed") is never a variant.
    targets = [t for t in vocab.fuzzy_targets if len(t) >= FUZZY_MIN_LENGTH and t[0] == token[0]]
    matches = process.extract(
        token, targets, scorer=fuzz.ratio, score_cutoff=FUZZY_SCORE, limit=None
    )
    senses = {vocab.fuzzy_targets[match[0]] for match in matches}
    return senses.pop() if len(senses) == 1 else None


def readings(cards: int, stage: Stage, langs: Sequence[str] = ("en",)) -> list[Reading]:
    """The short canonical phrases for ``cards`` cards at ``stage``, with their decisions.

    Refusing phrases (hedges, negations, near misses of the card numbers) are included on
    purpose, so the decision can tell when a refusal is the likelier reading.
    """
    seen: set[str] = set()
    result: list[Reading] = []
    for lang in langs:
        lexicon = load(lang)
        for group in READING_GROUPS:
            for text, decision in _expand(lexicon, group, cards, stage):
                if text not in seen:
                    seen.add(text)
                    result.append(Reading(text, lang, decision))
    return result


def _expand(
    lexicon: Lexicon, group: str, cards: int, stage: Stage
) -> Iterator[tuple[str, Decision]]:
    """The readings of one group, templates filled in for each card that exists."""
    templates: tuple[str, ...] = getattr(lexicon.readings, group)
    choosing = stage == Stage.CHOOSE
    for template in templates:
        # On a single card a bare "one" is no answer (``_bare_one``); it still competes.
        bare = refuse(Reason.NOT_UNDERSTOOD) if cards == 1 else None
        if group == "card" and choosing:
            alone = template.strip() == SLOT_NUMBER
            for card in range(1, cards + 1):
                text = _fill(template, card, lexicon)
                if text is not None:
                    yield text, (bare if alone and bare else Decision(Kind.CHOOSE, card=card))
            # Among several cards (a "card" question); a yes question has its own competitors.
            if alone and cards > 1:
                yield from _other_numbers(lexicon, cards)
        elif group == "homophone" and choosing:
            card = lexicon.sound_alikes.get(normalise(template), cards + 1)
            if card <= cards:
                yield template, bare or Decision(Kind.CHOOSE, card=card)
        elif group in ("sound_alike", "near_miss") and choosing:
            if lexicon.sound_alikes.get(normalise(template), cards + 1) <= cards:
                yield template, refuse(Reason.SOUND_ALIKE)
        elif group == "yes":
            yes = not choosing or cards == 1
            yield template, CONFIRM if yes else refuse(Reason.AMBIGUOUS)
        elif group in _FIXED:
            yield template, _FIXED[group]


_FIXED = {
    "cancel": CANCEL,
    "wait": MORE_TIME,
    "hedge": refuse(Reason.HEDGE),
    "negation": refuse(Reason.NEGATION),
    "question": refuse(Reason.QUESTION),
}


def _other_numbers(lexicon: Lexicon, cards: int) -> Iterator[tuple[str, Decision]]:
    """The numbers no open card has, each a refusal: the nearest competitors of the cards'.

    A "six" heard a little like "three" must count against card three, not be left out of the
    sum. Sound-alikes of other words are left out ("do", "nau"): alone they are no number.
    """
    for word, number in lexicon.cardinals.items():
        other = (number == 0 or number > cards) and word not in lexicon.sound_alikes
        # The first word for each number only (as a card's reading has), never a sound-alike.
        if other and _fill(SLOT_NUMBER, number, lexicon) == word:
            yield word, refuse(Reason.OUT_OF_RANGE)


def _fill(template: str, card: int, lexicon: Lexicon) -> str | None:
    """``template`` with its slot replaced by the first word for ``card``, if there is one."""
    # A sound-alike cardinal ("do", "दो") is a card only inside a longer phrase.
    alone = template.strip() == SLOT_NUMBER
    cardinal = next(
        (
            word
            for word, number in lexicon.cardinals.items()
            if number == card and not (alone and word in lexicon.sound_alikes)
        ),
        None,
    )
    ordinal = next((word for word, number in lexicon.ordinals.items() if number == card), None)
    text = template
    for slot, word in ((SLOT_NUMBER, cardinal), (SLOT_ORDINAL, ordinal)):
        if slot in text:
            if word is None:
                return None
            text = text.replace(slot, word)
    return text
