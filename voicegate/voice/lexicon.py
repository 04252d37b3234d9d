"""The consent lexicons: every word the grammar knows, loaded from ``voicegate/lexicons/*.yaml``.

A lexicon says what each phrase means; the grammar in ``consent.py`` only supplies structure.
Loading refuses (``ConfigError``) any lexicon in which one phrase means two incompatible
things, e.g. a word listed both as "yes" and as a negator, or a "yes" phrase that contains
a negator, because the grammar's safety rests on those lists being disjoint.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from voicegate.errors import ConfigError
from voicegate.voice.normalise import QUESTION_MARK, normalise

LANGS: tuple[str, ...] = ("en", "hi-Latn", "hi-Deva")
LEXICON_DIR = Path(__file__).resolve().parents[1] / "lexicons"  # package data, wheel or not
SLOT_NUMBER = "{n}"
SLOT_ORDINAL = "{ordinal}"

# The word lists of a lexicon file, in the order the file documents them.
WORD_LISTS = (
    "yes",
    "cancel",
    "wait",
    "hedges",
    "questions",
    "negators",
    "negators_either_side",
    "fillers",
    "noise",
)
NUMBER_MAPS = ("cardinals", "ordinals", "sound_alikes")
TOP_KEYS = ("lang", "numbers", "sound_alikes", "homophones", "readings", "grant")
READING_GROUPS = (
    "card",
    "yes",
    "cancel",
    "wait",
    "hedge",
    "negation",
    "question",
    "homophone",
    "sound_alike",
    "near_miss",
)

# The only lists that may share a phrase: "no" cancels and negates; "do" is the Hindi two
# inside "do number" but a sound-alike on its own.
_MAY_SHARE = frozenset(
    {
        frozenset({"cancel", "negators"}),
        frozenset({"cancel", "negators_either_side"}),
        frozenset({"negators", "negators_either_side"}),
        frozenset({"cardinals", "sound_alikes"}),
    }
)
# Lists whose phrases must never contain a negator word, so a negator can never be hidden
# inside something that releases or is skipped.
_NEGATOR_FREE = ("yes", "wait", "fillers", "noise", "cardinals", "ordinals")


class Word(StrEnum):
    """What a phrase means to the grammar."""

    YES = "yes"
    NUMBER = "number"
    CANCEL = "cancel"
    WAIT = "wait"
    HEDGE = "hedge"
    QUESTION = "question"
    NEGATOR = "negator"
    SOUND_ALIKE = "sound_alike"
    FILLER = "filler"
    NOISE = "noise"


class Side(StrEnum):
    """Which answers a negator negates: the ones after it, or those on either side."""

    AFTER = "after"
    EITHER = "either"


@dataclass(frozen=True, slots=True)
class Sense:
    """The meaning of one phrase: its word class, the card number, and whether it negates."""

    word: Word
    number: int | None = None
    negates: Side | None = None
    # A sound-alike that sounds exactly like its number ("to" for two); see ``Lexicon``.
    homophone: bool = False
    # A number said as an ordinal or in a pattern ("first", "number one"), not as a bare
    # cardinal or digit ("one", "1").
    phrase: bool = False


@dataclass(frozen=True, slots=True)
class Readings:
    """Canonical phrases per group, for a closed-vocabulary recogniser (templates allowed)."""

    card: tuple[str, ...] = ()
    yes: tuple[str, ...] = ()
    cancel: tuple[str, ...] = ()
    wait: tuple[str, ...] = ()
    hedge: tuple[str, ...] = ()
    negation: tuple[str, ...] = ()
    question: tuple[str, ...] = ()
    # Homophones of a number ("to" for two): at the choose stage they are that card.
    homophone: tuple[str, ...] = ()
    # Sound-alikes that refuse however they are said ("do" alone in Hinglish).
    sound_alike: tuple[str, ...] = ()
    # Sound-alikes that do not sound the same ("tooth", "tree"): scored against the number.
    near_miss: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Lexicon:
    """One language's consent words, normalised."""

    lang: str
    lists: Mapping[str, frozenset[str]]
    cardinals: Mapping[str, int]
    ordinals: Mapping[str, int]
    sound_alikes: Mapping[str, int]
    # Sound-alikes no listener tells from their number ("to"): alone, or in a number pattern
    # ("number to"), they are that number at the choose stage. Every other sound-alike refuses.
    homophones: frozenset[str]
    patterns: tuple[tuple[str, ...], ...]
    readings: Readings
    # How a yes says how long to allow the same again ("for {n} minutes"): each a pattern
    # with one number slot, said after the answer (``consent.grant_of``).
    grant: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """Several lexicons merged into one phrase table, ready for the grammar."""

    langs: tuple[str, ...]
    phrases: Mapping[str, Sense]
    cardinals: Mapping[str, int]
    ordinals: Mapping[str, int]
    homophones: Mapping[str, int]
    patterns: tuple[tuple[str, ...], ...]
    longest: int
    fuzzy_targets: Mapping[str, Sense]
    fuzzy_guards: frozenset[str]
    grant: tuple[tuple[str, ...], ...] = ()


def parse(data: Any, lang: str) -> Lexicon:
    """A checked ``Lexicon`` from one YAML document; raises ``ConfigError`` when unsafe."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"lexicon {lang}: expected a mapping at the top")
    # YAML reads a bare yes/no key as a boolean: quote it.
    unknown = set(data) - {*TOP_KEYS, *WORD_LISTS}
    if unknown:
        raise ConfigError(f"lexicon {lang}: unknown keys {sorted(map(repr, unknown))}")
    lists = {name: _phrases(data, name, lang) for name in WORD_LISTS}
    numbers = data.get("numbers", {})
    if not isinstance(numbers, Mapping):
        raise ConfigError(f"lexicon {lang}: 'numbers' must be a mapping")
    maps = {
        name: _number_map(numbers if name != "sound_alikes" else data, name, lang)
        for name in NUMBER_MAPS
    }
    patterns = tuple(_pattern(p, lang) for p in _strings(numbers, "patterns", lang))
    grant = tuple(_pattern(p, lang, ordinal=False) for p in _strings(data, "grant", lang))
    homophones = frozenset(normalise(p) for p in _strings(data, "homophones", lang))
    if strays := sorted(homophones - set(maps["sound_alikes"])):
        raise ConfigError(f"lexicon {lang}: homophones {strays} are not sound_alikes")
    lexicon = Lexicon(
        lang=lang,
        lists=MappingProxyType(lists),
        cardinals=maps["cardinals"],
        ordinals=maps["ordinals"],
        sound_alikes=maps["sound_alikes"],
        homophones=homophones,
        patterns=patterns,
        readings=_readings(data.get("readings", {}), lang),
        grant=grant,
    )
    _check_disjoint(lexicon)
    _check_negator_free(lexicon, _negator_words([lexicon]))
    return lexicon


@functools.lru_cache(maxsize=16)
def load(lang: str, directory: Path = LEXICON_DIR) -> Lexicon:
    """The lexicon ``<directory>/<lang>.yaml``, parsed and checked once per process."""
    path = directory / f"{lang}.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"lexicon {lang}: cannot read {path}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"lexicon {lang}: {path} is not valid YAML: {exc}") from exc
    return parse(data, lang)


@functools.lru_cache(maxsize=16)
def vocabulary(langs: tuple[str, ...] = LANGS, directory: Path = LEXICON_DIR) -> Vocabulary:
    """The merged vocabulary of ``langs``, cached; Hinglish answers mix all three lexicons."""
    return merge([load(lang, directory) for lang in langs])


def merge(lexicons: Sequence[Lexicon]) -> Vocabulary:
    """One phrase table from several lexicons; a phrase meaning two things is a ``ConfigError``."""
    negators = _negator_words(lexicons)
    phrases: dict[str, Sense] = {}
    owner: dict[str, str] = {}
    for lexicon in lexicons:
        _check_negator_free(lexicon, negators)
        for phrase, sense in _senses(lexicon).items():
            if phrase in phrases and phrases[phrase] != sense:
                raise ConfigError(
                    f"'{phrase}' means {phrases[phrase].word} in {owner[phrase]} "
                    f"but {sense.word} in {lexicon.lang}"
                )
            phrases[phrase] = sense
            owner[phrase] = lexicon.lang
    cardinals = _merge_numbers([lx.cardinals for lx in lexicons], "cardinal")
    ordinals = _merge_numbers([lx.ordinals for lx in lexicons], "ordinal")
    homophones = _merge_numbers(
        [{p: n for p, n in lx.sound_alikes.items() if p in lx.homophones} for lx in lexicons],
        "homophone",
    )
    patterns = tuple(dict.fromkeys(p for lx in lexicons for p in lx.patterns))
    grant = tuple(dict.fromkeys(p for lx in lexicons for p in lx.grant))
    longest = max([len(p.split()) for p in phrases] + [len(p) for p in patterns] + [1])
    fuzzy_targets = {
        phrase: sense
        for phrase, sense in phrases.items()
        if " " not in phrase
        and sense.word not in (Word.NUMBER, Word.SOUND_ALIKE)
        and not any(c.isdigit() for c in phrase)
    }
    guards = {*cardinals, *ordinals}
    guards.update(p for p, s in phrases.items() if s.word in (Word.NUMBER, Word.SOUND_ALIKE))
    return Vocabulary(
        langs=tuple(lx.lang for lx in lexicons),
        phrases=MappingProxyType(phrases),
        cardinals=cardinals,
        ordinals=ordinals,
        homophones=homophones,
        patterns=patterns,
        longest=longest,
        fuzzy_targets=MappingProxyType(fuzzy_targets),
        fuzzy_guards=frozenset(guards),
        grant=grant,
    )


def _senses(lexicon: Lexicon) -> dict[str, Sense]:
    """Each phrase of one lexicon with its single meaning (lists already checked disjoint)."""
    lists = lexicon.lists
    simple = {
        "yes": Word.YES,
        "wait": Word.WAIT,
        "hedges": Word.HEDGE,
        "questions": Word.QUESTION,
        "fillers": Word.FILLER,
        "noise": Word.NOISE,
    }
    senses: dict[str, Sense] = {}
    for name, word in simple.items():
        senses.update((phrase, Sense(word)) for phrase in lists[name])
    for phrase in lists["negators"] | lists["negators_either_side"] | lists["cancel"]:
        side = None
        if phrase in lists["negators_either_side"]:
            side = Side.EITHER
        elif phrase in lists["negators"]:
            side = Side.AFTER
        word = Word.CANCEL if phrase in lists["cancel"] else Word.NEGATOR
        senses[phrase] = Sense(word, negates=side)
    for table, ordinal in ((lexicon.cardinals, False), (lexicon.ordinals, True)):
        senses.update(
            (phrase, Sense(Word.NUMBER, number, phrase=ordinal)) for phrase, number in table.items()
        )
    # A sound-alike wins over a cardinal spelt the same: bare "do" never means two.
    senses.update(
        (phrase, Sense(Word.SOUND_ALIKE, number, homophone=phrase in lexicon.homophones))
        for phrase, number in lexicon.sound_alikes.items()
    )
    return senses


def _check_disjoint(lexicon: Lexicon) -> None:
    """Refuse a phrase listed under two meanings that cannot share it."""
    named: dict[str, Iterable[str]] = {**lexicon.lists}
    named.update(cardinals=lexicon.cardinals, ordinals=lexicon.ordinals)
    named.update(sound_alikes=lexicon.sound_alikes)
    seen: dict[str, str] = {}
    for name, phrases in named.items():
        for phrase in phrases:
            other = seen.get(phrase)
            if other is not None and frozenset({other, name}) not in _MAY_SHARE:
                raise ConfigError(f"lexicon {lexicon.lang}: '{phrase}' is in {other} and {name}")
            seen.setdefault(phrase, name)
    for name in WORD_LISTS:
        if name != "questions" and any(QUESTION_MARK in p.split() for p in lexicon.lists[name]):
            raise ConfigError(f"lexicon {lexicon.lang}: '?' belongs in questions, not {name}")


def _check_negator_free(lexicon: Lexicon, negators: frozenset[str]) -> None:
    """Refuse a releasing or skipped phrase that contains a negator word."""
    named: dict[str, Iterable[str]] = {**lexicon.lists}
    named.update(cardinals=lexicon.cardinals, ordinals=lexicon.ordinals)
    named["patterns"] = [" ".join(p) for p in lexicon.patterns]
    named["grant"] = [" ".join(p) for p in lexicon.grant]
    for name in (*_NEGATOR_FREE, "patterns", "grant"):
        for phrase in named[name]:
            padded = f" {phrase} "
            hit = next((n for n in negators if f" {n} " in padded), None)
            if hit is not None:
                raise ConfigError(
                    f"lexicon {lexicon.lang}: {name} phrase '{phrase}' contains negator '{hit}'"
                )


def _negator_words(lexicons: Iterable[Lexicon]) -> frozenset[str]:
    return frozenset(
        phrase
        for lx in lexicons
        for phrase in lx.lists["negators"] | lx.lists["negators_either_side"]
    )


def _merge_numbers(tables: Iterable[Mapping[str, int]], what: str) -> Mapping[str, int]:
    merged: dict[str, int] = {}
    for table in tables:
        for phrase, number in table.items():
            if merged.setdefault(phrase, number) != number:
                raise ConfigError(f"{what} '{phrase}' has two values: {merged[phrase]}, {number}")
    return MappingProxyType(merged)


def _strings(data: Mapping[str, Any], name: str, lang: str) -> list[str]:
    values = data.get(name, [])
    if values is None:
        return []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"lexicon {lang}: '{name}' must be a list of strings")
    return values


def _phrase(raw: str, name: str, lang: str) -> str:
    phrase = normalise(raw)
    if not phrase:
        raise ConfigError(f"lexicon {lang}: {name} has an empty phrase {raw!r}")
    return phrase


def _phrases(data: Mapping[str, Any], name: str, lang: str) -> frozenset[str]:
    return frozenset(_phrase(raw, name, lang) for raw in _strings(data, name, lang))


def _number_map(data: Mapping[str, Any], name: str, lang: str) -> Mapping[str, int]:
    values = data.get(name, {})
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"lexicon {lang}: '{name}' must map words to numbers")
    table: dict[str, int] = {}
    for raw, number in values.items():
        if not isinstance(raw, str) or isinstance(number, bool) or not isinstance(number, int):
            raise ConfigError(f"lexicon {lang}: {name} entry {raw!r}: {number!r} is not a number")
        if number < 0:
            raise ConfigError(f"lexicon {lang}: {name} entry {raw!r} is negative")
        phrase = _phrase(raw, name, lang)
        if " " in phrase:
            raise ConfigError(f"lexicon {lang}: {name} entry {raw!r} must be one word")
        table[phrase] = number
    return MappingProxyType(table)


def _pattern(raw: str, lang: str, *, ordinal: bool = True) -> tuple[str, ...]:
    """A number phrase pattern such as "the {ordinal} one", as tokens with one slot (a
    grant's length, ``ordinal=False``, has a cardinal slot only)."""
    slots = (SLOT_NUMBER, SLOT_ORDINAL) if ordinal else (SLOT_NUMBER,)
    tokens: list[str] = []
    for part in raw.split():
        if part in slots:
            tokens.append(part)
        else:
            tokens.extend(_phrase(part, "patterns", lang).split())
    if sum(t in slots for t in tokens) != 1 or len(tokens) < 2:
        raise ConfigError(f"lexicon {lang}: pattern {raw!r} needs one slot and one word")
    return tuple(tokens)


def _readings(data: Any, lang: str) -> Readings:
    if not isinstance(data, Mapping):
        raise ConfigError(f"lexicon {lang}: 'readings' must be a mapping")
    unknown = set(data) - set(READING_GROUPS)
    if unknown:
        raise ConfigError(f"lexicon {lang}: unknown reading groups {sorted(map(repr, unknown))}")
    return Readings(**{group: tuple(_strings(data, group, lang)) for group in READING_GROUPS})
