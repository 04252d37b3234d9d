"""The voice decision on numbers: probabilities per decision, the veto, thresholds, support.

The templates' part (``fuse``) is tests/voice/test_fusion.py.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind, Reason
from voicegate.voice import calibration, consent
from voicegate.voice.calibration import UNCALIBRATED, Calibration
from voicegate.voice.decision import (
    MEANING,
    Hypothesis,
    Rule,
    posteriors,
    refused_by_recogniser,
    weigh,
)

TWO = Decision(Kind.CHOOSE, card=2)
THREE = Decision(Kind.CHOOSE, card=3)
CONFIRM = Decision(Kind.CONFIRM)
CANCEL = Decision(Kind.CANCEL)
EVEN = Calibration(card=0.5, yes=0.9, support=5, source="test")


def refuse(reason: Reason) -> Decision:
    return Decision(Kind.REFUSE, reason=reason)


def reading(text: str, decision: Decision, score: float) -> Hypothesis:
    return Hypothesis(text, decision, score)


def free(text: str, decision: Decision, score: float, rank: int = 0) -> Hypothesis:
    return Hypothesis(text, decision, score, "en", rank)


def test_probabilities_sum_the_hypotheses_of_each_decision() -> None:
    post = posteriors(
        [
            reading("two", TWO, math.log(0.3)),
            reading("to", TWO, math.log(0.3)),
            reading("three", THREE, math.log(0.4)),
        ]
    )
    assert math.isclose(post[TWO], 0.6) and math.isclose(post[THREE], 0.4)


def test_anything_else_counts_at_its_prior_odds_at_a_choice_among_cards() -> None:
    hyps = [
        free("Two.", TWO, math.log(0.5)),
        free("Bye.", refuse(Reason.NOT_UNDERSTOOD), math.log(0.5), 1),
    ]
    post = posteriors(hyps, math.log(0.25))
    assert math.isclose(post[TWO], 0.8)
    prior = Calibration(card=0.75, yes=0.75, support=1, source="test", other=math.log(0.25))
    assert weigh(hyps, TWO, Stage.CHOOSE, prior, 3).decision == TWO
    # As scored (no prior), two has only half: unclear.
    assert (
        weigh(hyps, TWO, Stage.CHOOSE, Calibration(0.75, 0.75, 1, "test"), 3).rule == Rule.UNCLEAR
    )
    # A yes-or-no question counts anything else as scored.
    assert prior.prior(Stage.CHOOSE, 1) == prior.prior(Stage.FINAL, 3) == 0.0


def test_the_prior_leaves_refusals_of_meaning_and_readings_as_scored() -> None:
    hedge = free("Maybe two.", refuse(Reason.HEDGE), math.log(0.5), 1)
    other = reading("bye", refuse(Reason.NOT_UNDERSTOOD), math.log(0.5))  # a reading, not free
    for second in (hedge, other):
        post = posteriors([free("Two.", TWO, math.log(0.5)), second], -5.0)
        assert math.isclose(post[TWO], 0.5)


def test_a_clear_supported_card_is_chosen() -> None:
    hyps = [free("Two.", TWO, -1.0), reading("three", THREE, -6.0)]
    ruling = weigh(hyps, TWO, Stage.CHOOSE, EVEN, 3)
    assert ruling.decision == TWO and ruling.rule == Rule.DECIDED and ruling.probability > 0.99


def test_a_card_the_scores_do_not_make_likely_enough_is_unclear() -> None:
    hyps = [free("Two.", TWO, -1.0), reading("three", THREE, -1.1), reading("no", CANCEL, -1.2)]
    ruling = weigh(hyps, TWO, Stage.CHOOSE, EVEN, 3)
    assert ruling.decision.reason is Reason.UNCLEAR and ruling.rule == Rule.UNCLEAR


def test_a_choice_among_cards_and_a_yes_have_their_own_thresholds() -> None:
    hyps = [free("Two.", TWO, -1.0), reading("no", CANCEL, -2.5)]  # P(two) = 0.82
    assert weigh(hyps, TWO, Stage.CHOOSE, EVEN, 3).decision == TWO
    yes = [free("Yes.", CONFIRM, -1.0), reading("no", CANCEL, -2.5)]
    assert weigh(yes, CONFIRM, Stage.FINAL, EVEN).decision.reason is Reason.UNCLEAR
    assert weigh(yes, CONFIRM, Stage.CHOOSE, EVEN, 1).decision.reason is Reason.UNCLEAR


def test_a_refusal_of_meaning_in_the_transcript_is_the_decision() -> None:
    hyps = [reading("two", TWO, -0.1)]
    for reason in MEANING:
        ruling = weigh(hyps, refuse(reason), Stage.CHOOSE, EVEN, 3)
        assert ruling.decision == refuse(reason) and ruling.rule == Rule.VETO


def test_a_likeliest_hedge_blocks_a_release_but_not_a_cancel() -> None:
    hedge = free("Hmm.", refuse(Reason.HEDGE), -0.5, rank=1)
    blocked = weigh([hedge, free("Yes.", CONFIRM, -0.6)], CONFIRM, Stage.FINAL,
                     Calibration(0.1, 0.1, 5, "test"))  # fmt: skip
    assert blocked.decision.reason is Reason.HEDGE
    not_ = free("not", refuse(Reason.NEGATION), -2.9, rank=1)
    nope = [not_, free("Nope.", CANCEL, -3.1), reading("no", CANCEL, -3.5)]
    assert weigh(nope, refuse(Reason.NOT_UNDERSTOOD), Stage.CHOOSE,
                  Calibration(0.5, 0.5, 5, "test")).decision == CANCEL  # fmt: skip


def test_a_transcript_that_says_cancel_or_wait_is_decided_so() -> None:
    hyps = [reading("two", TWO, -0.1)]
    assert weigh(hyps, CANCEL, Stage.CHOOSE, EVEN, 3).decision == CANCEL
    wait = Decision(Kind.MORE_TIME)
    assert weigh(hyps, wait, Stage.CHOOSE, EVEN, 3).decision == wait


def test_scores_that_favour_another_answer_than_the_transcript_are_unclear() -> None:
    hyps = [free("Two.", TWO, -3.0), reading("three", THREE, -0.5)]
    ruling = weigh(hyps, TWO, Stage.CHOOSE, EVEN, 3)
    assert ruling.decision.reason is Reason.UNCLEAR and ruling.rule == Rule.DISAGREE


def test_an_unreadable_transcript_may_stand_for_a_clear_winner_with_support() -> None:
    hyps = [free("Board.", refuse(Reason.NOT_UNDERSTOOD), -4.5), free("Four.", Decision(
        Kind.CHOOSE, card=4), -1.0, rank=1)]  # fmt: skip
    ruling = weigh(hyps, refuse(Reason.NOT_UNDERSTOOD), Stage.CHOOSE, EVEN, 3)
    assert ruling.decision == Decision(Kind.CHOOSE, card=4)


def test_scores_alone_never_release_what_no_transcript_says() -> None:
    # "haan nahin" heard as "Hannain": the readings favour yes, no transcript reads as yes.
    hyps = [free("Hannain", refuse(Reason.NOT_UNDERSTOOD), -6.0), reading("haan", CONFIRM, -1.0)]
    ruling = weigh(hyps, refuse(Reason.NOT_UNDERSTOOD), Stage.FINAL, EVEN)
    assert not ruling.decision.releases and ruling.rule == Rule.UNSUPPORTED
    assert ruling.decision.reason is Reason.NOT_UNDERSTOOD


def test_support_deeper_than_the_calibrated_depth_does_not_count() -> None:
    hyps = [free("Board.", refuse(Reason.NOT_UNDERSTOOD), -4.5), free("Four.", Decision(
        Kind.CHOOSE, card=4), -1.0, rank=1)]  # fmt: skip
    shallow = Calibration(0.5, 0.5, 1, "test")
    assert not weigh(hyps, refuse(Reason.NOT_UNDERSTOOD), Stage.CHOOSE, shallow).decision.releases


def test_an_uncalibrated_model_releases_nothing() -> None:
    hyps = [free("Two.", TWO, -0.01)]
    assert not weigh(hyps, TWO, Stage.CHOOSE, UNCALIBRATED).decision.releases
    assert calibration.of("no-such-model") == UNCALIBRATED


def test_every_shipped_calibration_says_where_it_came_from() -> None:
    for name, cal in calibration.CALIBRATIONS.items():
        # A threshold is a probability, or infinity where no probability held ("never").
        assert all(0.5 <= x <= 1 or x == math.inf for x in (cal.card, cal.yes)), name
        assert cal.support >= 1 and "calibrate.py" in cal.source, name


DECISIONS = st.sampled_from(
    [TWO, THREE, CONFIRM, CANCEL, Decision(Kind.MORE_TIME)]
    + [refuse(r) for r in (*MEANING, Reason.NOT_UNDERSTOOD, Reason.SOUND_ALIKE)]
)
HYPOTHESES = st.lists(
    st.builds(
        Hypothesis,
        st.text(max_size=8),
        DECISIONS,
        st.floats(min_value=-60, max_value=0),
        st.just("en"),
        st.one_of(st.none(), st.integers(0, 4)),
    ),
    max_size=12,
)


# The prior log-odds of "anything else" the calibration fit may choose (benchmarks/calibrate.py).
PRIORS = st.sampled_from([0.0, -1.0, -3.0, -5.0])


@given(
    HYPOTHESES,
    st.sampled_from(sorted(MEANING)),
    st.sampled_from(list(Stage)),
    PRIORS,
    st.integers(1, 5),
)
def test_scores_never_turn_a_refusal_of_meaning_into_a_release(
    hyps: list[Hypothesis], reason: Reason, stage: Stage, other: float, cards: int
) -> None:
    cal = Calibration(0.5, 0.5, 5, "test", other=other)
    assert weigh(hyps, refuse(reason), stage, cal, cards).decision == refuse(reason)


@given(HYPOTHESES, st.sampled_from(sorted(MEANING)), DECISIONS, PRIORS, st.integers(1, 5))
def test_no_prior_releases_past_a_likeliest_refusal_of_meaning(
    hyps: list[Hypothesis], reason: Reason, transcript: Decision, other: float, cards: int
) -> None:
    """Whatever the transcript and the prior of anything else, a refusal of meaning that is
    the likeliest hypothesis as scored keeps anything from being released."""
    top = max((h.score for h in hyps), default=0.0)
    hyps = [*hyps, free("Maybe.", refuse(reason), top + 1.0, 3)]
    cal = Calibration(0.5, 0.5, 5, "test", other=other)
    for stage in Stage:
        assert not weigh(hyps, transcript, stage, cal, cards).decision.releases


def test_a_prior_above_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="prior of anything else"):
        Calibration(0.5, 0.5, 1, "test", other=0.5)
    with pytest.raises(ValueError, match="prior of anything else"):
        Calibration(0.5, 0.5, 1, "test", other=math.nan)


@given(HYPOTHESES, DECISIONS, st.sampled_from(list(Stage)), PRIORS)
def test_a_release_is_always_the_likeliest_answer_above_the_threshold_and_supported(
    hyps: list[Hypothesis], transcript: Decision, stage: Stage, other: float
) -> None:
    cal = Calibration(0.6, 0.8, 3, "test", other=other)
    ruling = weigh(hyps, transcript, stage, cal, 3)
    if ruling.decision.releases:
        post = posteriors(hyps, cal.prior(stage, 3))
        assert post[ruling.decision] >= cal.need(stage, 3)
        assert any(
            h.decision == ruling.decision and h.rank is not None and h.rank < 3 for h in hyps
        )
        assert transcript.kind is not Kind.REFUSE or transcript.reason not in MEANING


@given(st.text(max_size=30), st.integers(1, 5), st.sampled_from(list(Stage)))
def test_a_negator_in_the_transcript_never_releases_whatever_the_scores(
    text: str, cards: int, stage: Stage
) -> None:
    said = f"not {text}"
    transcript = consent.read_words(said, cards, stage)
    hyps = [free(said, transcript, -0.1), reading("yes", CONFIRM, 0.0), reading("two", TWO, 0.0)]
    assert not weigh(hyps, transcript, stage, Calibration(0.5, 0.5, 5, "test")).decision.releases


@given(st.sampled_from(sorted(Reason, key=lambda r: r.value)), st.text(max_size=40))
def test_a_hearing_the_recogniser_refused_never_releases(refusal: Reason, text: str) -> None:
    for stage, cards in ((Stage.CHOOSE, 3), (Stage.CHOOSE, 1), (Stage.FINAL, 1)):
        ruling = refused_by_recogniser(refusal, consent.read_words(text, cards, stage))
        assert not ruling.decision.releases
        if ruling.rule == Rule.GRAMMAR:
            assert refusal is Reason.NO_SPEECH
