"""The calibrated thresholds of the voice decision, one entry per recogniser model.

Each number was fitted by ``benchmarks/calibrate.py fit`` on the calibration split of the real
recordings in ``../shared/corpus`` (FSDD speakers jackson and nicolas; speech_commands speakers
whose id starts with 0 or 1): the lowest probability, from 0.50 up, at which that split released
nothing wrongly, or, where a near miss of the English corpus needs more, one grid step above
the highest near miss a threshold can stop (tiny.en's card). The figures on the other split are
in docs/voice.md ("Calibration"). A model that is not listed releases nothing by voice.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from voicegate.voice.decision import UNCALIBRATED, Calibration

CALIBRATIONS: Mapping[str, Calibration] = {
    # "card", 2026-12-01: all 2,000 FSDD takes heard with the numbers-only card prompt of then
    # ("One, two, three, four, five."; jackson and
    # nicolas, 1,000, calibrate) fit 0.91, just above a spoken "zero" of nicolas, heard "Two.",
    # that gave card two 0.904. Shipped 0.94: told the question, tiny.en also heard two near
    # misses of the English corpus (espeak-ng "tool" and piper "tooth") as "Two." at 0.925 and
    # 0.932; 0.94 is the lowest grid step above both (the corpus's three other near-miss
    # releases, 0.98 to 0.999, no threshold stops, and they were released before the prompt).
    # 2026-12-02, with the prior of "anything else" below: the fit is 0.89, and a piper
    # "tool" of the English corpus (0806, heard "Two.", "Fuel." fifth in the beam) went from
    # 0.919 to 0.9496. The lowest grid step above it, 0.95, would clear it by 0.0004, while
    # int8 scores differ between machines by as much as 0.05 (corpus 0514), so the threshold
    # ships one step higher, at 0.96 (FSDD 805 of 1,000 right against 819 at 0.95).
    # "yes", 2026-12-01: 358 speech_commands clips of the calibration speakers, heard with no
    # prompt: 0.91, just above a spoken "left" heard "Yes." that gave yes 0.90. Shipped 0.92:
    # the same clips heard again on another machine (int8 scores differ a little between
    # machines) gave that "left" just over 0.91, and the fit there
    # (benchmarks/calibrate.py fit --cache bench-out/hear-tiny-sc.jsonl --fsdd-takes 0) is
    # 0.92; on both caches 0.92 keeps every right answer of 0.91.
    # 2026-12-02, 0.98: the 666 clips heard again, on an "AMD EPYC" machine
    # (benchmarks/calibrate.py hear --model tiny.en --fsdd-takes 0, then fit; docs/voice.md,
    # "This release"). There the beam of that speaker's two spoken "left"s (0d53e045_nohash_0
    # and _1) holds a "Yes?" or "Yeah?" below the best "Yes." or "Yeah.", and a question
    # spelling of the best transcript means what it means (voice/hypotheses.py): yes 0.976 and
    # 0.951 (0.903 and 0.907 with the spellings read apart), so 0.92 released both, at one
    # card and at the final card. The fit there is 0.98, the lowest step that releases
    # nothing of the calibration split; the report split keeps 54 of 56 yeses (56 at 0.92).
    "tiny.en": Calibration(
        # 0.95, 2026-12-02, with the card prompt below that says "not" (PROMPTS): the fit on all
        # 2,000 FSDD takes heard with it is 0.91, and the corpus's "tool" 0806 falls from 0.947
        # (numbers-only prompt, same "AMD EPYC" machine, prior -5) to 0.937, so 0.94 is the
        # lowest grid step above it and 0.95 keeps the one-step margin kept before
        # (docs/voice.md, "The question"). FSDD 832 of 1,000 against 825 for the numbers-only
        # prompt at 0.96; at one threshold the numbers-only prompt hears real digits as well or
        # better (836 against 832 at 0.95), so the gain is the threshold the synthetic "tool"
        # no longer pins, and the corpus's ordinal answers (160 of 211 against 153).
        card=0.95,
        yes=0.98,
        support=1,
        # "other", 2026-12-02: the prior log-odds of "anything else" at a choice among cards,
        # fitted by the same command on all 2,000 FSDD takes heard with the card prompt
        # (benchmarks/calibrate.py, OTHER_GRID): from 0 to -3 the calibration split's right
        # answers at its own fitted threshold (0.89 throughout) rose from 343 to 364 and no
        # further to -5; -3 is the nearest 0 of the best (numbers-only prompt). It discounts
        # free transcripts that read as no answer ("Bye." beside "Five.") and nothing else. At
        # a yes-or-no question anything else counts as scored: the same prior there only
        # raised the threshold the calibration split needs (0.92 at 0, 0.95 at -0.5, 0.99 at
        # -2, none from -3), for no more right answers, since the spoken "left" heard "Yes."
        # gains with it.
        # 2026-12-02, -5: the 2,000 FSDD takes heard again on an "AMD EPYC" machine (the same
        # command, bench-out/hear-tiny.jsonl): there the calibration split's right answers at
        # each prior's own fitted threshold (0.94 throughout) rose from 357 at -3 to 363 at -5,
        # and no further to -8; on the first machine -3 to -5 were equal (364), so -5 is the
        # best of both. At the card threshold 0.96 it gives FSDD 825 of 1,000 against 811
        # (report split 475 against 467), 0 wrong cards and 0 of 1,000 other digits released;
        # on the English corpus's choices among cards (benchmarks/card_grid.py) the same 153
        # of 211 genuine answers right and the same four sound-alikes released as at -3.
        # Under the card prompt that says "not", the fit's own rule picks -8 (367 of the
        # calibration split at 0.91 against 364 at -5), but at the shipped 0.95 -5, -6 and -8
        # give 832, 833 and 833 of 1,000 FSDD takes, so -5 stays (one answer apart).
        other=-5.0,
        source="benchmarks/calibrate.py fit --model tiny.en --fsdd-takes 50 (card); "
        "--fsdd-takes 0 (yes)",
        # The fused probability of the recogniser's winner (taught.fused_probability),
        # 2026-12-01: benchmarks/enrol.py fused --cache bench-out/hear-tiny-prompted-takes30.jsonl
        # (FSDD takes 0-29 of every digit and speaker heard with the numbers-only card prompt;
        # docs/voice.md, "Measured: fused"). Per FSDD speaker, takes 0-2 of "one".."five"
        # enrolled; the templates' likelihood ratio is a logistic fit, on the 316 decided takes
        # of jackson and nicolas whose recogniser's winner was a taught card (at every distance:
        # the 70 inside some radius held 1 wrong winner, too one-sided to fit on), of whether
        # that card was said, less the log-odds of that set's base rate (248 of 316); the
        # recogniser's log-odds count once (Bayes' rule). Used only inside some taught radius,
        # read against the card threshold itself, so no threshold was fitted for it; a match
        # outside the radius of the winner only ever lowers it. Rechecked on all 50 takes heard
        # under the card prompt that says "not" (enrol.py fused --cache bench-out/fsdd-E.jsonl):
        # a refit there gives the same counts as these weights (794 of 940), so they stay.
        fusion=(4.852, 1.0, 0.895, 14.392),
        # The largest log(other / distance) and log(radius / distance) of those 316 takes.
        fusion_limits=(0.935, 0.472),
        # A hard user's clear match decides where the recogniser gives its meaning at least
        # this (2026-12-03, templates of tiny.en's encoder frames: benchmarks/enrol.py fused
        # --cache bench-out/fsdd-E.jsonl --frames bench-out/frames-tiny.en.npz, the "hard"
        # grid). Every step from 0 to 0.5 releases nothing wrongly on either split (jackson,
        # nicolas: 360 right at 0 to 0.1, 359 from 0.2; theo, yweweler: 464 at each); 0.5, so
        # a template carries an answer only where the recogniser's posterior of it (with the
        # prior of anything else) is at least even. Choices among cards only (decision.fuse).
        # (On MFCC templates it released 2 of 1,000 other digits and was shut.)
        alone=0.5,
    ),
    # 2026-12-02, English and Hindi on, no prompt: FSDD takes 0-9 of every digit and speaker
    # (400) and all 666 speech_commands clips, heard with
    # benchmarks/calibrate.py hear --model base --lang en --lang hi --fsdd-takes 10.
    # "card" 0.92: the calibration speakers' lowest step that releases nothing wrongly; below it
    # a spoken "seven" of jackson, heard "Second.", chose card two at 0.918 (the 0.5 fitted on
    # 260 clips, of FSDD take 0 of each digit of jackson and theo only, released it). "yes"
    # never: no threshold up to 0.99 holds (a spoken "left" of a calibration speaker, heard
    # "Yeah.", gives yes 0.998). With Hindi on, a yes is a tap until a larger calibration or the
    # user's own enrolment says otherwise.
    "base": Calibration(
        card=0.92,
        yes=math.inf,
        support=1,
        source="benchmarks/calibrate.py fit --model base --lang en --lang hi --fsdd-takes 10",
    ),
}


# The question each model is told was asked (Whisper's previous-text prompt, voice/prompts.py),
# per kind of question ("card": which of several cards; "yes": a yes-or-no question) and
# language. A model's thresholds hold only for the prompts it was fitted with, so they live here.
# A yes-or-no question has none: told "Yes or no?", tiny.en heard two spoken "left"s as "Yes."
# (one of them "Thank you." untold), for 4 more right of 50 "yes" (docs/voice.md).
# A choice among cards is told its numbers, a way to say one ("the first one") and a "not",
# so that the prompt does not teach the decoder that every answer is a card: told only
# numbers and ordinals, tiny.en wrote espeak-ng's "not two" as "That's two." and "not three"
# as "The third three." (card three at 0.915); told this prompt, it writes them as it did told
# the numbers alone ("Not two.", and "That's free.", refused), and one "not two" the numbers
# alone wrote "That's two." it writes "Not two." (not every prompt with a "not" keeps them:
# docs/voice.md, "The question"; benchmarks/prompts.py).
PROMPTS: Mapping[str, Mapping[str, Mapping[str, str]]] = {
    "tiny.en": {"card": {"en": "One, two, three, four, five. The first one, not the second one."}},
}


def of(model: str) -> Calibration:
    """The calibration of ``model``; ``UNCALIBRATED`` (nothing released) when it has none."""
    return CALIBRATIONS.get(model, UNCALIBRATED)


def at(model: str, window: str) -> Calibration:
    """The calibration of ``model`` heard at ``window``: its thresholds hold only at the window
    they were fitted at, so at any other window nothing is released by voice."""
    fitted = of(model)
    if fitted.window != window:
        return dataclasses.replace(
            UNCALIBRATED, source=f"{model} is calibrated at the {fitted.window} window only"
        )
    return fitted


def prompt(model: str, question: str, language: str) -> str:
    """The question ``model`` is told was asked, for a ``question`` kind in ``language``."""
    return PROMPTS.get(model, {}).get(question, {}).get(language, "")
