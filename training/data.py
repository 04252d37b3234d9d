"""What the answer model learns from: real clips of ../shared/corpus and synthetic speech.

Every clip is an ``Item``: where its audio comes from, its class (``answer_model.CLASSES``) and its
fold. Real clips are folded by speaker, so a fold model never heard its fold's speakers: FSDD's
jackson, nicolas, theo and yweweler are folds 0 to 3, and a speech_commands speaker is the fold of
the first hex digit of its id, modulo 4 (its calibration speakers, ids from 0 and 1, are folds 0
and 1, as in ``benchmarks/calibrate.py``). Synthetic clips are folded by phrase, so a fold model
never heard its fold's words in any voice; the held-out near misses (``NEAR_MISSES``, fold -1)
are heard by no model at all.

A synthetic phrase's class is what the consent grammar reads it as (``label``): the grammar is
the meaning, the model learns its sound.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from voicegate.domain import Stage
from voicegate.reasons import Kind
from voicegate.voice import consent
from voicegate.voice.answer_model import OTHER

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("VOICEGATE_CORPUS", ROOT.parent / "shared" / "corpus"))
LEXICONS = ROOT / "voicegate" / "lexicons"
FSDD_FOLDS = {"jackson": 0, "nicolas": 1, "theo": 2, "yweweler": 3}
FOLDS = 4
HELD_OUT = -1
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

# espeak-ng English voices and variants; a clip takes one of each, its speed and its pitch.
ESPEAK_EN = ("en-us", "en-gb", "en-gb-scotland", "en-029", "en-gb-x-rp", "en-gb-x-gbclan",
             "en-gb-x-gbcwmd", "en-us-nyc")  # fmt: skip
ESPEAK_VARIANTS = ("", "+f2", "+m3", "+f4", "+m7", "+klatt", "+f1", "+m1", "+f3", "+m2")
ESPEAK_HI = ("hi", "hi+f2", "hi+m3", "hi+f4", "hi+klatt", "hi+m1")

# Words that differ from an answer by about one sound, by the answer they are near. Each is no
# answer, whatever a transcript makes of it. Homophones ("to", "for", "won", "know", "weight",
# "forth") are left out: no listener tells them from the answer, and the grammar says what they
# do. A seeded third of each row is never trained on (``near_misses``).
NEAR = {
    "yes": "yet yell yelp yeast mess less guess chess dress yen jest guest rest test nest west "
    "vest best zest press bless jess lest yak yawn yesterday yellow",
    "okay": "oak okra croquet hokey obey ochre hooray bouquet oaky toupee",
    "sure": "shore shoe shirt cure pure shear sheer usher",
    "one": "run done gun sun none fun bun wand want win wine when wonder once",
    "two": "tooth tool true tube tune tomb stew zoo moo boo who new toot tutu tout tee toe "
    "tooth brush two way",
    "three": "tree free thee through threw sea tea see thief theme freeze breathe street spree "
    "agree degree flee glee",
    "four": "fork floor door more poor core war pour sore form fort ford forward foal fur far "
    "fear foe fought",
    "five": "fife fine fire hive dive drive live alive file fight fly size thrive wife fie vibe "
    "knife hives",
    "first": "thirst fist burst worst versed frost thirsty furs",
    "second": "secant reckon beckon sickened sequin session succeed",
    "third": "bird herd word heard nerd curd thud shirt thirty",
    "fourth": "north porch torch force horse",
    "fifth": "filth fifty fit fish fizz width",
    "number": "lumber slumber numb plumber summer",
    "wait": "gate late bait weigh white wet wade wake way",
    "stop": "shop top stock step stomp spot stoop drop",
    "no": "go so low now new nose note snow mow",
    "cancel": "candle camel castle tinsel",
}
# A real recording of one of these words (speech_commands' "bird", "tree") is that near miss.
_NEAR_OF = {w: answer for answer, words in NEAR.items() for w in words.split()}
# Phrases that hold an answer word but answer nothing, or answer as the grammar reads them.
PHRASES = (
    "for me", "me too", "to do", "not yet", "go to", "one more", "two of them", "the tree one",
    "free one", "for two", "yes no", "no yes", "not two", "not yes", "yes or no", "two or three",
    "maybe two", "maybe yes", "i think two", "one two", "three four", "yes and no", "not the first",
    "hold on", "hang on", "one second", "just a second", "say again", "what was that", "hello",
    "hey", "okay google", "alexa", "yes but wait", "no wait", "not now", "the next one",
    "the last one", "another one", "none of them", "all of them", "both", "either one",
    "any of them", "number", "option", "card", "the one", "that one", "this one", "good",
    "great", "fine thanks", "nice", "cool", "whatever", "seriously", "really", "right",
    "go", "left", "up", "down", "on", "off",
)  # fmt: skip
OUT_OF_RANGE = ("zero", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen",
                "fourteen", "fifteen", "twenty", "thirty", "forty", "fifty", "hundred", "sixth",
                "seventh", "eighth", "ninth", "tenth", "number six", "number seven",
                "the sixth one", "number zero", "option nine")  # fmt: skip
# Hindi in Devanagari, for the Hindi voice: spoken forms of Hinglish answers and non-answers.
HINDI_OTHER = ("छह", "सात", "आठ", "नौ", "दस", "शायद", "पता नहीं", "क्या", "कौन सा", "हाँ नहीं",
               "सोचने दो", "नमस्ते", "पानी", "खाना", "घर", "अच्छा", "चलो चलते हैं", "दो तीन")  # fmt: skip
# Dictionary words: other words, many of them. Debian's wamerican.
DICTIONARY = Path("/usr/share/dict/american-english")
DICTIONARY_WORDS = 1600
# Never a dictionary negative: homophones and spellings of answers the grammar reads otherwise.
_SAME_SOUNDS = (
    "to too two tu won wan for fore four forth know no weight wait yeah yea sure okay ok "
    "yep yup nope nah first second third fourth fifth one three five ate eight"
)
HOMOPHONES = frozenset(_SAME_SOUNDS.split())


@dataclass(frozen=True, slots=True)
class Item:
    """One clip: where its audio is, what it means, who said it and its fold."""

    id: str
    source: str  # "fsdd", "sc", "espeak", "piper"
    text: str  # the word or phrase said ("" for background)
    label: str  # a class of ``answer_model.CLASSES``
    fold: int  # 0..3, or HELD_OUT
    speaker: str  # a corpus speaker, or the synthetic voice
    path: str = ""  # a corpus file; synthetic clips are rendered from ``voice``
    voice: str = ""
    speed: int = 0
    pitch: int = 0
    near: str = ""  # the answer a near miss is near


def corpus() -> Iterator[Item]:
    """Every real clip of ../shared/corpus with its class and fold."""
    for path in sorted((CORPUS / "fsdd").glob("*.wav")):
        digit, speaker, _ = path.stem.split("_")
        label = f"card{digit}" if 1 <= int(digit) <= 5 else OTHER
        yield Item(f"fsdd/{path.stem}", "fsdd", WORDS[int(digit)], label, FSDD_FOLDS[speaker],
                   speaker, str(path))  # fmt: skip
    sc = CORPUS / "speech_commands"
    for folder in sorted(p for p in sc.iterdir() if p.is_dir()):
        for path in sorted(folder.glob("*.wav")):
            parts = path.stem.split("_")
            if folder.name == "background":
                word, speaker = "", f"background{path.stem}"
                fold = int(path.stem) % FOLDS if path.stem.isdigit() else _fold(path.stem)
            else:
                word = parts[0] if folder.name in ("unknown", "v1") else folder.name
                speaker = parts[1] if folder.name in ("unknown", "v1") else parts[0]
                fold = int(speaker[0], 16) % FOLDS
            yield Item(f"sc/{folder.name}/{path.stem}", "sc", word, word_label(word), fold,
                       speaker, str(path))  # fmt: skip


def near_class(row: dict[str, str]) -> str:
    """The near-miss class of a clip of no answer that sounds close to one ("near_card2" for
    "tooth", said or recorded), else ""."""
    if row["label"] != OTHER:
        return ""
    near = row.get("near") or _NEAR_OF.get(row["text"], "")
    cls = label(near) if near else OTHER
    return "" if cls == OTHER else f"near_{cls}"


def word_label(word: str) -> str:
    """The class of one corpus word: its card, yes, cancel, or other."""
    if word in WORDS[1:6]:
        return f"card{WORDS.index(word)}"
    return {"yes": "yes", "no": "cancel", "stop": "cancel"}.get(word, OTHER)


def label(text: str) -> str:
    """The class the consent grammar gives ``text``: a card (read among five open cards), yes,
    cancel or wait (read at a final card), else other."""
    among = consent.read_words(text, 5, Stage.CHOOSE)
    if among.kind is Kind.CHOOSE and among.card is not None:
        return f"card{among.card}"
    final = consent.read_words(text, 1, Stage.FINAL)
    return {Kind.CONFIRM: "yes", Kind.CANCEL: "cancel", Kind.MORE_TIME: "wait"}.get(
        final.kind, OTHER
    )


def answers() -> list[tuple[str, str]]:
    """(text, language) of every answer phrase of the lexicons and every card form."""
    out: list[tuple[str, str]] = []
    for lang in ("en", "hi-Deva"):
        data = yaml.safe_load((LEXICONS / f"{lang}.yaml").read_text(encoding="utf-8"))
        for key in ("yes", "cancel", "wait"):
            out += [(str(p), lang) for p in data[key]]
        cardinals = {n: w for w, n in data["numbers"]["cardinals"].items() if 1 <= n <= 5}
        ordinals: dict[int, str] = {}
        for w, n in data["numbers"]["ordinals"].items():
            if 1 <= n <= 5 and not any(c.isdigit() for c in str(w)):
                ordinals.setdefault(n, str(w))
        for pattern in data["numbers"]["patterns"]:
            for n in range(1, 6):
                if "{n}" in pattern and n in cardinals:
                    out.append((pattern.replace("{n}", str(cardinals[n])), lang))
                elif "{ordinal}" in pattern and n in ordinals:
                    out.append((pattern.replace("{ordinal}", ordinals[n]), lang))
        out += [(str(w), lang) for n, w in cardinals.items()]
        out += [(w, lang) for w in ordinals.values()]
    return list(dict.fromkeys(out))


def refusals() -> list[tuple[str, str]]:
    """Hedges and questions of the lexicons: no answer."""
    out = []
    for lang in ("en", "hi-Deva"):
        data = yaml.safe_load((LEXICONS / f"{lang}.yaml").read_text(encoding="utf-8"))
        out += [(str(p), lang) for key in ("hedges", "questions") for p in data[key] if p != "?"]
    return out


def near_misses(seed: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(trained, held out): (word, the answer it is near), a seeded third of each row held out.
    The lexicon's own sound-alikes ("tooth", "tree", "fife") are always trained: they are the
    near misses the product names, so the held-out third is drawn from the others."""
    rng = random.Random(seed)
    listed = listed_sound_alikes()
    trained, held = [], []
    for answer, row in NEAR.items():
        words = sorted(set(row.split()) - HOMOPHONES - listed)
        rng.shuffle(words)
        cut = len(words) // 3
        held += [(w, answer) for w in sorted(words[:cut])]
        taught = words[cut:] + [w for w in row.split() if w in listed]
        trained += [(w, answer) for w in sorted(taught)]
    return trained, held


def listed_sound_alikes() -> set[str]:
    """The English lexicon's sound-alikes and near-miss readings, homophones left out."""
    data = yaml.safe_load((LEXICONS / "en.yaml").read_text(encoding="utf-8"))
    listed = {str(w) for w in data["sound_alikes"]}
    listed |= {str(w) for w in data["readings"]["near_miss"]}
    return listed - {str(w) for w in data["homophones"]} - HOMOPHONES


# Voices each mined sound-neighbour is said in.
NEIGHBOUR_RENDERS = 3
# Words two sounds from each short answer, a seeded sample (``two_sounds_away``).
TWO_AWAY = 40
# The second round of negatives (``synthetic(more=True)``, ``answer_model.py features --more``):
# more voices for each sound-neighbour, more words two sounds away, more dictionary words;
# measured in docs/voice-measurements.md ("More negatives, and an ensemble"), not shipped.
MORE_NEIGHBOUR_RENDERS = 5
MORE_TWO_AWAY = 80
MORE_DICTIONARY_WORDS = 3000
# The answers whose sound-neighbours are mined from the dictionary (``sound_neighbours``).
_ANSWER_WORDS = (
    "yes yeah yep okay sure confirm approve one two three four five first second third "
    "fourth fifth number option card wait no stop cancel"
)
SOUNDS_OF = _ANSWER_WORDS.split()


def phonemes(words: list[str], voice: str = "en-us") -> dict[str, str]:
    """espeak-ng's phonemes of each word, stress marks dropped."""
    text = "".join(f"{w}.\n" for w in words)
    out = subprocess.run(["espeak-ng", "-q", "-x", "-v", voice], input=text, capture_output=True,
                         text=True, check=True).stdout.split("\n")  # fmt: skip
    said = [line.strip().replace("'", "").replace(",", "") for line in out if line.strip()]
    if len(said) != len(words):
        raise SystemExit(f"espeak-ng gave {len(said)} phoneme strings for {len(words)} words")
    return dict(zip(words, said, strict=True))


def sound_neighbours(avoid: set[str]) -> list[tuple[str, str]]:
    """(word, the answer it is near): dictionary words one sound from an answer (an edit
    distance of 1 over espeak-ng's phoneme letters, 2 for answers of five or more), never one
    that sounds the same (a homophone) nor one sounding like a word in ``avoid``."""
    words = dictionary_words() - HOMOPHONES - set(SOUNDS_OF)
    sounds = phonemes(sorted(words))
    targets = phonemes(list(SOUNDS_OF))
    avoided = set(phonemes(sorted(avoid)).values()) if avoid else set()
    same = set(targets.values())
    out = []
    for word, ph in sorted(sounds.items()):
        if ph in same or ph in avoided or word in avoid:
            continue
        for answer, target in targets.items():
            if within(ph, target, 1 if len(target) < 5 else 2):
                out.append((word, answer))
                break
    return out


def two_sounds_away(
    avoid: set[str], taken: set[str], seed: int, each: int = TWO_AWAY
) -> list[tuple[str, str]]:
    """(word, answer): dictionary words exactly two sounds from a short answer (under five
    phoneme letters, where one sound is much of the word), ``each`` a seeded sample for each
    answer; none in ``taken``, none in ``avoid`` or sounding like one."""
    words = dictionary_words() - HOMOPHONES - set(SOUNDS_OF) - taken - avoid
    sounds = phonemes(sorted(words))
    targets = {a: t for a, t in phonemes(list(SOUNDS_OF)).items() if len(t) < 5}
    avoided = set(phonemes(sorted(avoid)).values()) if avoid else set()
    rng = random.Random(seed)
    out = []
    for answer, target in targets.items():
        near = sorted(
            w
            for w, ph in sounds.items()
            if ph not in avoided and within(ph, target, 2) and not within(ph, target, 1)
        )
        out += [(w, answer) for w in rng.sample(near, min(each, len(near)))]
    return list(dict.fromkeys(out))


def within(a: Sequence[str], b: Sequence[str], most: int) -> bool:
    """True when ``a`` is within ``most`` single-letter (or single-phone) edits of ``b``."""
    if abs(len(a) - len(b)) > most:
        return False
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1] <= most


def dictionary_words() -> set[str]:
    """Debian's wamerican words of 2 to 9 plain letters, lower-cased."""
    if not DICTIONARY.exists():
        raise SystemExit(f"{DICTIONARY} is missing: apt-get install wamerican")
    text = DICTIONARY.read_text(encoding="utf-8", errors="replace")
    return {w.lower() for w in text.split() if w.isalpha() and w.isascii() and 2 <= len(w) <= 9}


def dictionary(seed: int, avoid: set[str], count: int = DICTIONARY_WORDS) -> list[str]:
    """``DICTIONARY_WORDS`` plain words of 2 to 9 letters, none an answer or a held-out word."""
    words = sorted(dictionary_words() - HOMOPHONES - avoid)
    rng = random.Random(seed)
    picked = rng.sample(words, count * 2)
    return [w for w in picked if label(w) == OTHER][:count]


def synthetic(seed: int, more: bool = False) -> Iterator[Item]:
    """Every synthetic clip to render: answers and near misses in many voices, the rest in few;
    with ``more``, a second round of negatives after them (measured, not shipped)."""
    rng = random.Random(seed)
    trained, held = near_misses(seed)
    held_words = {w for w, _ in held}
    plan: list[tuple[str, str, int, str, int]] = []  # text, lang, renders, near, fold
    for text, lang in answers():
        plan.append((text, lang, 10 if lang == "en" else 8, "", _fold(text)))
    for text, near in trained:
        plan.append((text, "en", 8, near, _fold(text)))
    for text, lang in refusals():
        plan.append((text, lang, 4, "", _fold(text)))
    for text in PHRASES + OUT_OF_RANGE:
        plan.append((text, "en", 4, "", _fold(text)))
    for text in HINDI_OTHER:
        plan.append((text, "hi-Deva", 4, "", _fold(text)))
    for text in dictionary(seed, held_words | {w for w, _ in trained}):
        plan.append((text, "en", 1, "", _fold(text)))
    for text, near in held:
        plan.append((text, "en", 0, near, HELD_OUT))  # every held-out voice, below
    # Last, so that adding them left every clip above as it was rendered.
    near_words = sound_neighbours(held_words)
    for text, near in near_words:
        plan.append((text, "en", NEIGHBOUR_RENDERS, near, _fold(text)))
    two_away = two_sounds_away(held_words, {w for w, _ in near_words}, seed)
    for text, near in two_away:
        plan.append((text, "en", NEIGHBOUR_RENDERS, near, _fold(text)))
    # More of the negatives that teach most, after all of the above so it keeps its voices: the
    # sound-neighbours in more voices, more words two sounds away, more dictionary words.
    taken = held_words | {w for w, _ in trained} | {w for w, _ in near_words + two_away}
    for text, near in near_words if more else ():
        plan.append((text, "en", MORE_NEIGHBOUR_RENDERS, near, _fold(text)))
    if more:
        for text, near in two_sounds_away(held_words, taken, seed + 1, MORE_TWO_AWAY):
            plan.append((text, "en", NEIGHBOUR_RENDERS, near, _fold(text)))
        for text in sorted(set(dictionary(seed + 1, taken, MORE_DICTIONARY_WORDS)) - taken):
            plan.append((text, "en", 1, "", _fold(text)))
    for text, lang, renders, near, fold in plan:
        name = "latin" if lang == "en" else "hindi"
        cls = label(text)
        if fold == HELD_OUT:
            for n, voice in enumerate(HELD_OUT_VOICES):
                yield _say(n, text, cls, fold, voice, 160, 50, near)
            continue
        for n in range(renders):
            if lang == "en" and rng.random() < 0.15:
                yield _say(n, text, cls, fold, "piper", rng.choice((80, 100, 120)), 0, near)
                continue
            base = rng.choice(ESPEAK_EN) if name == "latin" else rng.choice(ESPEAK_HI)
            if name == "latin":
                base += rng.choice(ESPEAK_VARIANTS)
            yield _say(n, text, cls, fold, base, rng.randint(115, 195), rng.randint(20, 80), near)


# The held-out near misses, each said by seven espeak-ng voices and piper's.
HELD_OUT_VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-029", "en-us+f3", "en-gb-x-rp+m3",
                   "en-us-nyc+f2", "piper")  # fmt: skip


def _say(n: int, text: str, cls: str, fold: int, voice: str, speed: int, pitch: int,
         near: str) -> Item:  # fmt: skip
    """One synthetic clip, named by what it is (``n``: its render of that phrase), so adding
    phrases to the plan leaves every other clip's name, and its encoded copy, as it was."""
    source = "piper" if voice == "piper" else "espeak"
    said = f"{text}|{n}|{voice}|{speed}|{pitch}|{fold}"
    name = hashlib.sha256(said.encode()).hexdigest()[:16]
    return Item(f"synth/{name}", source, text, cls, fold, voice, "", voice, speed, pitch, near)


def _fold(text: str) -> int:
    """A phrase's fold, the same on every machine."""
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % FOLDS
