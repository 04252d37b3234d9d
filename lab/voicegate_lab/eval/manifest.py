"""The evaluation manifest: JSON Lines, one audio case a line, run in file order.

One line::

    {"id": "g0001", "audio": "clips/g0001.ogg", "cards": 3, "stage": "choose",
     "expect": "choose:2", "class": "genuine", "lang": "en", "user": "u1", "replay_of": null}

``audio`` is relative to the manifest; ``user`` defaults to ``"u1"``; ``replay_of`` names an
earlier line whose recording this one reuses, and such a case must expect ``refuse``.

A line with ``"enrol": true`` is no case: it is one enrolment take of ``user`` for the answer
``expect`` (``confirm``, ``cancel``, ``more_time`` or ``choose:K``), taught through the device
API before the lines after it. It needs only ``id``, ``audio`` and ``expect``; ``cards``,
``stage``, ``class`` and ``lang`` may be left out. ``"hard": true`` on an enrolment line also
says, for ``user``, "my speech is hard for recognisers" (``POST /device/enrol/hard``).
Parsing is pure (``parse``); ``load`` reads the file and checks that every clip exists.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from voicegate.domain import Decision, Stage
from voicegate.errors import VoicegateError
from voicegate.reasons import Kind

LANGS = ("en", "hi-Latn", "hi-Deva", "none")
MAX_CARDS = 5
REQUIRED = ("id", "audio", "cards", "stage", "expect", "class", "lang")
OPTIONAL = ("user", "replay_of", "enrol", "hard")
# An enrolment line needs only these; the rest of REQUIRED takes ENROL_DEFAULTS.
ENROL_REQUIRED = ("id", "audio", "expect")
ENROL_DEFAULTS: Mapping[str, Any] = {"cards": MAX_CARDS, "stage": "choose", "class": "enrol",
                                     "lang": "none"}  # fmt: skip
TEACHABLE = frozenset({Kind.CHOOSE, Kind.CONFIRM, Kind.CANCEL, Kind.MORE_TIME})
DEFAULT_USER = "u1"


class ManifestError(VoicegateError):
    """A manifest line is malformed; ``line`` is its 1-based number (0: the whole file)."""

    def __init__(self, line: int, detail: str) -> None:
        self.line = line
        self.detail = detail
        super().__init__(f"line {line}: {detail}" if line else detail)


@dataclass(frozen=True, slots=True)
class Case:
    """One audio case: what to upload, which cards are open, and the answer it must give."""

    id: str
    audio: str
    path: Path
    cards: int
    stage: Stage
    expect: Decision
    label: str
    lang: str
    user: str = DEFAULT_USER
    replay_of: str | None = None
    line: int = 0
    # An enrolment take (not a case): taught as ``expect`` for ``user`` before later lines;
    # ``hard``: the user also says their speech is hard for recognisers.
    enrol: bool = False
    hard: bool = False

    @property
    def expect_text(self) -> str:
        """The expectation as the manifest writes it: ``choose:2``, ``confirm``, ``refuse``."""
        return decision_text(self.expect)


def decision_text(decision: Decision) -> str:
    """``choose:K`` for a choice, otherwise the kind's value."""
    if decision.kind is Kind.CHOOSE:
        return f"choose:{decision.card}"
    return decision.kind.value


def parse_expect(text: str) -> Decision:
    """``"choose:2"`` -> Decision(CHOOSE, 2); ``"confirm"`` etc.; ValueError otherwise."""
    kind_text, sep, card_text = text.partition(":")
    kind = Kind(kind_text)
    if kind is Kind.CHOOSE:
        if not sep or not card_text.isdigit():
            raise ValueError(f"choose needs a card number: {text!r}")
        return Decision(Kind.CHOOSE, card=int(card_text))
    if sep:
        raise ValueError(f"only choose takes a card number: {text!r}")
    return Decision(kind)


def case_to_dict(case: Case) -> dict[str, Any]:
    """The manifest line of ``case`` (``user`` and ``replay_of`` only when they say something)."""
    out: dict[str, Any] = {
        "id": case.id,
        "audio": case.audio,
        "cards": case.cards,
        "stage": case.stage.value,
        "expect": case.expect_text,
        "class": case.label,
        "lang": case.lang,
        "user": case.user,
    }
    if case.replay_of is not None:
        out["replay_of"] = case.replay_of
    if case.enrol:
        out["enrol"] = True
    if case.hard:
        out["hard"] = True
    return out


def _text(data: Mapping[str, Any], key: str, line: int) -> str:
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise ManifestError(line, f"{key!r} must be a non-empty string")
    return value


def _case(data: Mapping[str, Any], line: int, base: Path, seen: Mapping[str, Case]) -> Case:
    enrol = data.get("enrol", False)
    if not isinstance(enrol, bool):
        raise ManifestError(line, "'enrol' must be true or false")
    if enrol:
        missing = [k for k in ENROL_REQUIRED if k not in data]
        if missing:
            raise ManifestError(line, f"missing keys: {', '.join(missing)}")
        if "replay_of" in data:
            raise ManifestError(line, "an enrolment take cannot be a replay")
        data = {**ENROL_DEFAULTS, **data}
    hard = data.get("hard", False)
    if not isinstance(hard, bool):
        raise ManifestError(line, "'hard' must be true or false")
    if hard and not enrol:
        raise ManifestError(line, "'hard' belongs on an enrolment line")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ManifestError(line, f"missing keys: {', '.join(missing)}")
    unknown = sorted(set(data) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ManifestError(line, f"unknown keys: {', '.join(unknown)}")
    case_id = _text(data, "id", line)
    if case_id in seen:
        raise ManifestError(line, f"duplicate id {case_id!r} (first on line {seen[case_id].line})")
    audio = _text(data, "audio", line)
    if PurePosixPath(audio).is_absolute() or "\\" in audio:
        raise ManifestError(line, "'audio' must be a relative POSIX path")
    cards = data["cards"]
    if isinstance(cards, bool) or not isinstance(cards, int) or not 1 <= cards <= MAX_CARDS:
        raise ManifestError(line, f"'cards' must be an integer from 1 to {MAX_CARDS}")
    try:
        stage = Stage(data["stage"])
    except ValueError:
        raise ManifestError(line, "'stage' must be 'choose' or 'final'") from None
    try:
        expect = parse_expect(_text(data, "expect", line))
    except ValueError:
        raise ManifestError(line, f"bad 'expect': {data['expect']!r}") from None
    if expect.kind is Kind.CHOOSE and not 1 <= (expect.card or 0) <= cards:
        raise ManifestError(line, "'expect' chooses a card that is not open")
    if expect.kind is Kind.CHOOSE and stage is Stage.FINAL:
        raise ManifestError(line, "a final card cannot expect a choice")
    lang = data["lang"]
    if lang not in LANGS:
        raise ManifestError(line, f"'lang' must be one of {', '.join(LANGS)}")
    user = _text(data, "user", line) if "user" in data else DEFAULT_USER
    replay_of = data.get("replay_of")
    if replay_of is not None:
        if not isinstance(replay_of, str) or replay_of not in seen:
            raise ManifestError(line, "'replay_of' must name an earlier case")
        if expect.kind is not Kind.REFUSE:
            raise ManifestError(line, "a replay must expect 'refuse'")
    if enrol and expect.kind not in TEACHABLE:
        raise ManifestError(line, "an enrolment take teaches an answer, not 'refuse'")
    return Case(
        id=case_id,
        audio=audio,
        path=base / audio,
        cards=cards,
        stage=stage,
        expect=expect,
        label=_text(data, "class", line),
        lang=lang,
        user=user,
        replay_of=replay_of,
        line=line,
        enrol=enrol,
        hard=hard,
    )


def parse(lines: Iterable[str], base: Path) -> list[Case]:
    """Validate manifest lines (blank lines allowed) into cases; ManifestError at a fault."""
    cases: dict[str, Case] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ManifestError(number, f"not JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise ManifestError(number, "a line must be a JSON object")
        case = _case(data, number, base, cases)
        cases[case.id] = case
    if not any(not c.enrol for c in cases.values()):
        raise ManifestError(0, "the manifest has no cases")
    return list(cases.values())


def load(path: Path, *, check_audio: bool = True) -> list[Case]:
    """Read and validate the manifest at ``path``; with ``check_audio`` every clip must exist."""
    text = path.read_text(encoding="utf-8")
    cases = parse(text.splitlines(), path.parent)
    if check_audio:
        for case in cases:
            if not case.path.is_file():
                raise ManifestError(case.line, f"audio file not found: {case.audio}")
    return cases
