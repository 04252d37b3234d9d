"""The voice decision's calibration: what one holds, and the fitted one of each recogniser model.

Each number was fitted by ``benchmarks/calibrate.py fit`` on the calibration split of the real
recordings in ``../shared/corpus`` (FSDD speakers jackson and nicolas; speech_commands speakers
whose id starts with 0 or 1): the lowest probability, from 0.50 up, at which that split released
nothing wrongly, or, where a near miss of the English corpus needs more, one grid step above
the highest near miss a threshold can stop (tiny.en's card). The figures on the other split are
in docs/voice.md ("Current figures") and docs/voice-measurements.md ("Calibration"), and how
each number moved to where it is in docs/calibration-history.md. A model that is not listed
releases nothing by voice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from voicegate.domain import Stage


class Question(StrEnum):
    """The kind of question a set asks, as the calibration and the answer model name it."""

    CARD = "card"  # which of several cards
    YES = "yes"  # yes or no: a single card at the choose stage, and the final card


@dataclass(frozen=True, slots=True)
class Calibration:
    """The probability an answer needs, and where the numbers came from (``decision.weigh``).

    ``card`` applies to choosing among two or more cards, ``yes`` to every yes-or-no question:
    a single card at the choose stage and the final card. They are fitted apart, on answers of
    each kind. ``support`` is how deep in a language's beam a transcript may support a release
    (rule 3).
    """

    card: float
    yes: float
    support: int
    source: str
    # The weights of the fused probability of a taught meaning (``fused_probability``): bias,
    # the recogniser's log-odds, log(other / distance) and log(radius / distance). No
    # weights: the templates say nothing, and the recogniser decides alone.
    fusion: tuple[float, float, float, float] | None = None
    # The largest margin and radius features the fusion was fitted on (``fused_probability``).
    fusion_limits: tuple[float, float] | None = None
    # What the recogniser must still give a clear match of a user whose speech is hard for
    # recognisers before the match decides "alone" (``fuse``); infinity keeps that path shut.
    alone: float = math.inf
    # The log prior odds, at a choice among cards, of "anything else" (a free transcript the
    # grammar reads as no answer) against a reading: its score counts plus this (``prior``).
    other: float = 0.0
    # The answer model's thresholds by question ("card", "yes"; ``agree``) and for its cancel
    # ("cancel"; ``heard_cancel``), from its own record (voice/answer_models/); None where this
    # recogniser has no answer model.
    answers: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        # A prior above 0 could lift "anything else" over a refusal of meaning and so move the
        # likeliest hypothesis off a veto; below 0 it can only add vetoes.
        if not self.other <= 0.0:
            raise ValueError(f"the prior of anything else must be 0 or below, not {self.other}")

    def need(self, stage: Stage, cards: int) -> float:
        """The threshold for a set of ``cards`` cards at ``stage``."""
        return self.card if question(stage, cards) is Question.CARD else self.yes

    def prior(self, stage: Stage, cards: int) -> float:
        """The log prior odds of "anything else" for a set of ``cards`` cards at ``stage``."""
        return self.other if question(stage, cards) is Question.CARD else 0.0


def question(stage: Stage, cards: int) -> Question:
    """The kind of question a set asks: which of several cards, or yes or no."""
    return Question.CARD if stage is Stage.CHOOSE and cards > 1 else Question.YES


# Nothing is released by voice through a model that was never calibrated.
UNCALIBRATED = Calibration(math.inf, math.inf, 0, "no calibration: voice releases nothing")


CALIBRATIONS: Mapping[str, Calibration] = {
    # How each number below was fitted, with every earlier value and why it moved:
    # docs/calibration-history.md. One line each here: where the number comes from now.
    "tiny.en": Calibration(
        # Card: the lowest grid step one above the English corpus's "tool" (0806, 0.937) that
        # benchmarks/calibrate.py fit (all 2,000 FSDD takes, card prompt with a "not") needs.
        card=0.95,
        # Yes: the lowest step at which the calibration split releases nothing (two spoken
        # "left"s heard "Yes?" at 0.976 and 0.951), benchmarks/calibrate.py fit --fsdd-takes 0.
        yes=0.98,
        support=1,
        # Prior log-odds of "anything else" at a choice among cards: the best calibration-split
        # count on two machines (benchmarks/calibrate.py, OTHER_GRID).
        other=-5.0,
        source="benchmarks/calibrate.py fit --model tiny.en --fsdd-takes 50 (card); "
        "--fsdd-takes 0 (yes)",
        # Templates' likelihood ratio: a logistic fit on 316 decided FSDD takes of jackson and
        # nicolas (benchmarks/fusion.py).
        fusion=(4.852, 1.0, 0.895, 14.392),
        # The largest log(other / distance) and log(radius / distance) of those 316 takes.
        fusion_limits=(0.935, 0.472),
        # A hard user's clear match decides where the recogniser's posterior of it is at least
        # even: every step 0-0.5 released nothing on either split (benchmarks/fusion.py).
        alone=0.5,
    ),
    "base": Calibration(
        # The calibration speakers' lowest step that releases nothing (a "seven" heard
        # "Second." at 0.918), benchmarks/calibrate.py fit --model base --lang en --lang hi.
        card=0.92,
        # No step up to 0.99 holds (a spoken "left" heard "Yeah." at 0.998): a yes is a tap.
        yes=math.inf,
        support=1,
        source="benchmarks/calibrate.py fit --model base --lang en --lang hi --fsdd-takes 10",
    ),
}


# The question each model is told was asked (Whisper's previous-text prompt, voice/prompts.py),
# per kind of question ("card": which of several cards; "yes": a yes-or-no question) and
# language. A model's thresholds hold only for the prompts it was fitted with, so they live here.
# A yes-or-no question has none: told "Yes or no?", tiny.en heard two spoken "left"s as "Yes."
# (one of them "Thank you." untold), for 4 more right of 50 "yes" (docs/voice-measurements.md).
# A choice among cards is told its numbers, a way to say one ("the first one") and a "not",
# so that the prompt does not teach the decoder that every answer is a card: told only
# numbers and ordinals, tiny.en wrote espeak-ng's "not two" as "That's two." and "not three"
# as "The third three." (card three at 0.915); told this prompt, it writes them as it did told
# the numbers alone ("Not two.", and "That's free.", refused), and one "not two" the numbers
# alone wrote "That's two." it writes "Not two." (not every prompt with a "not" keeps them:
# docs/voice-measurements.md, "One clip, one encoder pass"; benchmarks/prompts.py).
PROMPTS: Mapping[str, Mapping[str, Mapping[str, str]]] = {
    "tiny.en": {"card": {"en": "One, two, three, four, five. The first one, not the second one."}},
}


def of(model: str) -> Calibration:
    """The calibration of ``model``; ``UNCALIBRATED`` (nothing released) when it has none."""
    return CALIBRATIONS.get(model, UNCALIBRATED)


def prompt(model: str, question: str, language: str) -> str:
    """The question ``model`` is told was asked, for a ``question`` kind in ``language``."""
    return PROMPTS.get(model, {}).get(question, {}).get(language, "")
