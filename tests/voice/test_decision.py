"""The voice decision on numbers: probabilities per decision, the veto, thresholds, support."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from voicegate.gate.types import Decision, Stage
from voicegate.reasons import Kind, Reason
from voicegate.voice import calibration, consent
from voicegate.voice.decision import (
    ANSWERS,
    MEANING,
    UNCALIBRATED,
    UNCLEAR,
    Calibration,
    Hypothesis,
    Taught,
    decide,
    fuse,
    fused_probability,
    fusion_evidence,
    posteriors,
    question,
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


def test_a_clear_supported_card_is_chosen() -> None:
    hyps = [free("Two.", TWO, -1.0), reading("three", THREE, -6.0)]
    verdict = decide(hyps, TWO, Stage.CHOOSE, EVEN, 3)
    assert verdict.decision == TWO and verdict.rule == "decided" and verdict.probability > 0.99


def test_a_card_the_scores_do_not_make_likely_enough_is_unclear() -> None:
    hyps = [free("Two.", TWO, -1.0), reading("three", THREE, -1.1), reading("no", CANCEL, -1.2)]
    verdict = decide(hyps, TWO, Stage.CHOOSE, EVEN, 3)
    assert verdict.decision.reason is Reason.UNCLEAR and verdict.rule == "unclear"


def test_a_choice_among_cards_and_a_yes_have_their_own_thresholds() -> None:
    hyps = [free("Two.", TWO, -1.0), reading("no", CANCEL, -2.5)]  # P(two) = 0.82
    assert decide(hyps, TWO, Stage.CHOOSE, EVEN, 3).decision == TWO
    yes = [free("Yes.", CONFIRM, -1.0), reading("no", CANCEL, -2.5)]
    assert decide(yes, CONFIRM, Stage.FINAL, EVEN).decision.reason is Reason.UNCLEAR
    assert decide(yes, CONFIRM, Stage.CHOOSE, EVEN, 1).decision.reason is Reason.UNCLEAR


def test_a_refusal_of_meaning_in_the_transcript_is_the_decision() -> None:
    hyps = [reading("two", TWO, -0.1)]
    for reason in MEANING:
        verdict = decide(hyps, refuse(reason), Stage.CHOOSE, EVEN, 3)
        assert verdict.decision == refuse(reason) and verdict.rule == "veto"


def test_a_likeliest_hedge_blocks_a_release_but_not_a_cancel() -> None:
    hedge = free("Hmm.", refuse(Reason.HEDGE), -0.5, rank=1)
    blocked = decide([hedge, free("Yes.", CONFIRM, -0.6)], CONFIRM, Stage.FINAL,
                     Calibration(0.1, 0.1, 5, "test"))  # fmt: skip
    assert blocked.decision.reason is Reason.HEDGE
    not_ = free("not", refuse(Reason.NEGATION), -2.9, rank=1)
    nope = [not_, free("Nope.", CANCEL, -3.1), reading("no", CANCEL, -3.5)]
    assert decide(nope, refuse(Reason.NOT_UNDERSTOOD), Stage.CHOOSE,
                  Calibration(0.5, 0.5, 5, "test")).decision == CANCEL  # fmt: skip


def test_a_transcript_that_says_cancel_or_wait_is_decided_so() -> None:
    hyps = [reading("two", TWO, -0.1)]
    assert decide(hyps, CANCEL, Stage.CHOOSE, EVEN, 3).decision == CANCEL
    wait = Decision(Kind.MORE_TIME)
    assert decide(hyps, wait, Stage.CHOOSE, EVEN, 3).decision == wait


def test_scores_that_favour_another_answer_than_the_transcript_are_unclear() -> None:
    hyps = [free("Two.", TWO, -3.0), reading("three", THREE, -0.5)]
    verdict = decide(hyps, TWO, Stage.CHOOSE, EVEN, 3)
    assert verdict.decision.reason is Reason.UNCLEAR and verdict.rule == "disagree"


def test_an_unreadable_transcript_may_stand_for_a_clear_winner_with_support() -> None:
    hyps = [free("Board.", refuse(Reason.NOT_UNDERSTOOD), -4.5), free("Four.", Decision(
        Kind.CHOOSE, card=4), -1.0, rank=1)]  # fmt: skip
    verdict = decide(hyps, refuse(Reason.NOT_UNDERSTOOD), Stage.CHOOSE, EVEN, 3)
    assert verdict.decision == Decision(Kind.CHOOSE, card=4)


def test_scores_alone_never_release_what_no_transcript_says() -> None:
    # "haan nahin" heard as "Hannain": the readings favour yes, no transcript reads as yes.
    hyps = [free("Hannain", refuse(Reason.NOT_UNDERSTOOD), -6.0), reading("haan", CONFIRM, -1.0)]
    verdict = decide(hyps, refuse(Reason.NOT_UNDERSTOOD), Stage.FINAL, EVEN)
    assert not verdict.decision.releases and verdict.rule == "unsupported"
    assert verdict.decision.reason is Reason.NOT_UNDERSTOOD


def test_support_deeper_than_the_calibrated_depth_does_not_count() -> None:
    hyps = [free("Board.", refuse(Reason.NOT_UNDERSTOOD), -4.5), free("Four.", Decision(
        Kind.CHOOSE, card=4), -1.0, rank=1)]  # fmt: skip
    shallow = Calibration(0.5, 0.5, 1, "test")
    assert not decide(hyps, refuse(Reason.NOT_UNDERSTOOD), Stage.CHOOSE, shallow).decision.releases


def test_an_uncalibrated_model_releases_nothing() -> None:
    hyps = [free("Two.", TWO, -0.01)]
    assert not decide(hyps, TWO, Stage.CHOOSE, UNCALIBRATED).decision.releases
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


@given(HYPOTHESES, st.sampled_from(sorted(MEANING)), st.sampled_from(list(Stage)))
def test_scores_never_turn_a_refusal_of_meaning_into_a_release(
    hyps: list[Hypothesis], reason: Reason, stage: Stage
) -> None:
    cal = Calibration(0.5, 0.5, 5, "test")
    assert decide(hyps, refuse(reason), stage, cal).decision == refuse(reason)


@given(HYPOTHESES, DECISIONS, st.sampled_from(list(Stage)))
def test_a_release_is_always_the_likeliest_answer_above_the_threshold_and_supported(
    hyps: list[Hypothesis], transcript: Decision, stage: Stage
) -> None:
    cal = Calibration(0.6, 0.8, 3, "test")
    verdict = decide(hyps, transcript, stage, cal, 3)
    if verdict.decision.releases:
        post = posteriors(hyps)
        assert post[verdict.decision] >= cal.need(stage, 3)
        assert any(
            h.decision == verdict.decision and h.rank is not None and h.rank < 3 for h in hyps
        )
        assert transcript.kind is not Kind.REFUSE or transcript.reason not in MEANING


@given(st.text(max_size=30), st.integers(1, 5), st.sampled_from(list(Stage)))
def test_a_negator_in_the_transcript_never_releases_whatever_the_scores(
    text: str, cards: int, stage: Stage
) -> None:
    said = f"not {text}"
    transcript = consent.decide(said, cards, stage)
    hyps = [free(said, transcript, -0.1), reading("yes", CONFIRM, 0.0), reading("two", TWO, 0.0)]
    assert not decide(hyps, transcript, stage, Calibration(0.5, 0.5, 5, "test")).decision.releases


# Personal answers: the verdict combined with the user's templates.
# Weights of the fused probability for these tests: the recogniser's log-odds count once, and
# a nearest meaning twice as close as the next (log 2 = 0.69) adds 0.69 * 2.
WEIGHTS = (0.0, 1.0, 2.0, 1.0)
FUSING = Calibration(card=0.8, yes=0.9, support=1, source="test", fusion=WEIGHTS, alone=0.0)


def near(meaning: Decision | None, clear: bool, hard: bool = False, **more: object) -> Taught:
    """Templates whose nearest meaning is ``meaning``, twice as close as any other and at its
    radius, unless ``more`` says otherwise."""
    fields: dict[str, object] = {"distance": 1.0, "runner_up": 2.0, "radius": 1.0} | more
    return Taught(meaning, clear, hard, **fields)  # type: ignore[arg-type]


def fused(
    hyps: list[Hypothesis], transcript: Decision, taught: Taught | None, cards: int = 3
) -> Decision:
    verdict = decide(hyps, transcript, Stage.CHOOSE, FUSING, cards)
    return fuse(verdict, hyps, transcript, taught, Stage.CHOOSE, FUSING, cards).decision


UNREAD = refuse(Reason.NOT_UNDERSTOOD)


def test_without_templates_the_verdict_stands() -> None:
    hyps = [reading("two", TWO, -1.0), reading("three", THREE, -1.5), free("Tu", UNREAD, -0.5)]
    verdict = decide(hyps, UNREAD, Stage.CHOOSE, FUSING, 3)
    assert fuse(verdict, hyps, UNREAD, None, Stage.CHOOSE, FUSING, 3) == verdict
    assert fused(hyps, UNREAD, Taught(None, False)) == verdict.decision


def test_templates_that_agree_release_what_the_recogniser_alone_found_too_unsure() -> None:
    # "Two." is heard, but with 0.39 of the probability: under the 0.8 the card needs.
    hyps = [free("Two.", TWO, -1.0), reading("three", THREE, -1.2), free("Tu", UNREAD, -1.3, 1)]
    assert fused(hyps, TWO, None) == UNCLEAR
    # Templates four times nearer two than anything else: log-odds -0.44 + 2 log 4 = 2.33.
    assert fused(hyps, TWO, near(TWO, clear=False, runner_up=4.0)) == TWO
    assert fused(hyps, TWO, near(TWO, clear=False)) == UNCLEAR  # 2 log 2 is not enough


def test_templates_never_release_what_no_transcript_says() -> None:
    hyps = [reading("two", TWO, -1.0), reading("three", THREE, -1.5), free("Tu", UNREAD, -2.0)]
    assert not fused(hyps, UNREAD, near(TWO, clear=False, runner_up=100.0)).releases


def test_templates_that_contradict_a_release_refuse_it() -> None:
    hyps = [reading("two", TWO, -0.1), free("Two.", TWO, -0.1)]
    assert fused(hyps, TWO, None) == TWO
    assert fused(hyps, TWO, near(THREE, clear=True, hard=True)) == UNCLEAR


def test_a_transcript_that_reads_as_another_answer_is_not_overruled_by_templates() -> None:
    hyps = [reading("two", TWO, -3.0), reading("three", THREE, -0.2), free("Three.", THREE, -4.0)]
    assert fused(hyps, THREE, near(TWO, clear=True, hard=True)) == UNCLEAR


def test_a_clear_match_decides_alone_only_for_a_user_whose_speech_is_hard() -> None:
    hyps = [reading("two", TWO, -9.0), reading("three", THREE, -1.0), free("Mhm", UNREAD, -0.5)]
    assert fused(hyps, UNREAD, near(TWO, clear=True)) == UNREAD
    assert fused(hyps, UNREAD, near(TWO, clear=False, hard=True)) == UNREAD
    assert fused(hyps, UNREAD, near(TWO, clear=True, hard=True)) == TWO


def test_a_clear_match_of_a_hard_user_decides_nothing_alone_where_the_model_keeps_it_shut() -> None:
    hyps = [reading("two", TWO, -9.0), reading("three", THREE, -1.0), free("Mhm", UNREAD, -0.5)]
    shut = replace(FUSING, alone=math.inf)
    taught = near(TWO, clear=True, hard=True)
    verdict = decide(hyps, UNREAD, Stage.CHOOSE, shut, 3)
    assert not fuse(verdict, hyps, UNREAD, taught, Stage.CHOOSE, shut, 3).decision.releases


def test_a_taught_card_that_is_not_open_is_no_answer() -> None:
    hyps = [reading("two", TWO, -9.0), free("Mhm", UNREAD, -0.5)]
    five = Decision(Kind.CHOOSE, card=5)
    assert not fused(hyps, UNREAD, near(five, clear=True, hard=True)).releases


def test_a_likeliest_refusal_of_meaning_wins_over_a_clear_template() -> None:
    hyps = [reading("two", TWO, -3.0), free("Mm.", refuse(Reason.HEDGE), -0.2, 1)]
    assert fused(hyps, UNREAD, near(TWO, clear=True, hard=True)) == refuse(Reason.HEDGE)


TAUGHT = st.builds(
    Taught,
    st.one_of(st.none(), DECISIONS),
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), DECISIONS),
    st.frozensets(DECISIONS, max_size=4),
    st.floats(0.0, 10.0) | st.just(math.inf),
    st.floats(0.0, 10.0) | st.just(math.inf),
    st.floats(0.0, 10.0),
)


@given(HYPOTHESES, st.sampled_from(sorted(MEANING)), TAUGHT, st.sampled_from(list(Stage)))
def test_templates_never_turn_a_refusal_of_meaning_into_a_release(
    hyps: list[Hypothesis], reason: Reason, taught: Taught, stage: Stage
) -> None:
    verdict = decide(hyps, refuse(reason), stage, FUSING, 3)
    out = fuse(verdict, hyps, refuse(reason), taught, stage, FUSING, 3)
    assert out.decision == refuse(reason)


@given(HYPOTHESES, DECISIONS, TAUGHT, st.sampled_from(list(Stage)), st.integers(1, 5))
def test_a_fused_release_is_the_taught_meaning_or_the_recogniser_alone(
    hyps: list[Hypothesis], transcript: Decision, taught: Taught, stage: Stage, cards: int
) -> None:
    verdict = decide(hyps, transcript, stage, FUSING, cards)
    out = fuse(verdict, hyps, transcript, taught, stage, FUSING, cards)
    if out.decision.releases:
        finite = [h for h in hyps if math.isfinite(h.score)]
        if finite:  # with nothing scored, only a clear template of a "hard" user decides
            likeliest = max(finite, key=lambda h: h.score).decision
            assert not (likeliest.kind is Kind.REFUSE and likeliest.reason in MEANING)
        else:
            assert out.rule == "template"
        assert out.decision == verdict.decision or (
            taught.nearest is not None and not verdict.decision.releases
        )
        if taught.nearest is not None and out.decision != verdict.decision:
            assert transcript.kind not in ANSWERS or transcript == out.decision
        if out.rule == "fused":
            assert any(h.decision == out.decision and h.rank == 0 for h in finite)
            p = posteriors(finite)[out.decision]
            assert out.probability == fused_probability(WEIGHTS, p, taught) >= FUSING.card
            assert question(stage, cards) == "card"
        if out.rule == "template":
            assert taught.hard and taught.clear


def test_a_release_of_a_taught_answer_nearer_another_taught_answer_is_refused() -> None:
    hyps = [reading("two", TWO, -0.1), free("Two.", TWO, -0.1)]
    taught = frozenset({TWO, THREE})
    near_three = Taught(None, clear=False, closest=THREE, meanings=taught)
    assert fused(hyps, TWO, near_three) == UNCLEAR
    assert fused(hyps, TWO, Taught(None, clear=False, closest=TWO, meanings=taught)) == TWO


def test_a_release_of_an_answer_the_user_never_taught_is_left_to_the_recogniser() -> None:
    hyps = [reading("two", TWO, -0.1), free("Two.", TWO, -0.1)]
    only_three = Taught(None, clear=False, closest=THREE, meanings=frozenset({THREE}))
    assert fused(hyps, TWO, only_three) == TWO


def test_a_taught_yes_never_makes_a_release_on_a_yes_question_it_was_not_fitted_for() -> None:
    # "yes" at 0.70 is under the recogniser's own 0.9 but over the fused 0.3 (fitted on cards).
    hyps = [reading("yes", CONFIRM, -1.0), free("Yeah.", UNREAD, -1.85)]
    for stage in (Stage.CHOOSE, Stage.FINAL):
        verdict = decide(hyps, UNREAD, stage, FUSING, 1)
        assert not verdict.decision.releases
        out = fuse(verdict, hyps, UNREAD, near(CONFIRM, clear=True), stage, FUSING, 1)
        assert not out.decision.releases


def test_the_fused_probability_weighs_the_recogniser_and_how_clearly_the_templates_point() -> None:
    clear = near(TWO, clear=True)
    assert math.isclose(fused_probability(WEIGHTS, 0.5, clear), 0.8)  # log-odds 0 + 2 log 2
    assert fused_probability(WEIGHTS, 0.9, clear) > fused_probability(WEIGHTS, 0.5, clear)
    closer = near(TWO, clear=True, runner_up=3.0)
    assert fused_probability(WEIGHTS, 0.5, closer) > fused_probability(WEIGHTS, 0.5, clear)
    inside = near(TWO, clear=True, radius=1.5)
    assert fused_probability(WEIGHTS, 0.5, inside) > fused_probability(WEIGHTS, 0.5, clear)


def test_no_fused_probability_without_weights_or_without_evidence_from_the_templates() -> None:
    assert fused_probability(None, 0.99, near(TWO, clear=True)) == 0.0
    # One taught meaning has no runner-up: beating nothing is no evidence.
    assert fusion_evidence(0.99, near(TWO, clear=True, runner_up=math.inf)) is None
    # A meaning with one take has no radius.
    assert fusion_evidence(0.99, near(TWO, clear=True, radius=0.0)) is None
    assert fusion_evidence(0.99, Taught(TWO, clear=True)) is None
    assert fused_probability(WEIGHTS, 0.99, Taught(TWO, clear=True)) == 0.0


def test_a_recogniser_probability_of_zero_or_one_gives_a_finite_fused_probability() -> None:
    for p in (0.0, 1.0):
        assert 0.0 < fused_probability(WEIGHTS, p, near(TWO, clear=True)) < 1.0
    assert fused_probability((-800.0, 0.0, 0.0, 0.0), 0.5, near(TWO, clear=True)) == 0.0


def test_templates_without_fitted_weights_release_nothing_the_recogniser_did_not() -> None:
    hyps = [reading("two", TWO, -1.0), reading("three", THREE, -1.5), free("Tu", UNREAD, -2.0)]
    unfitted = replace(FUSING, fusion=None, alone=math.inf)
    verdict = decide(hyps, UNREAD, Stage.CHOOSE, unfitted, 3)
    out = fuse(verdict, hyps, UNREAD, near(TWO, clear=True), Stage.CHOOSE, unfitted, 3)
    assert not out.decision.releases


def test_a_match_outside_the_radius_may_lower_the_fused_probability_but_never_raise_it() -> None:
    # Four times nearer than the next meaning, but outside the radius (1.0 > 0.8).
    outside = near(TWO, clear=False, runner_up=4.0, radius=0.8)
    for p in (0.1, 0.5, 0.9):
        assert fused_probability(WEIGHTS, p, outside) <= p + 1e-12
    assert fused_probability(WEIGHTS, 0.5, near(TWO, clear=True, runner_up=4.0)) > 0.5
    far = near(TWO, clear=False, runner_up=1.0, radius=0.2)  # no margin, far outside
    assert fused_probability(WEIGHTS, 0.9, far) < 0.9


SHIPPED = calibration.of("tiny.en")
ONE = Decision(Kind.CHOOSE, card=1)


def test_the_shipped_fusion_keeps_the_breath_noised_nine_below_the_card_threshold() -> None:
    # Measured (docs/voice.md): heard "One." at 0.858, 1.34 times nearer "one" than anything
    # else but outside its radius (1.64 > 1.42). Uncapped, the fitted ratio gave it 0.96.
    nine = near(ONE, clear=False, distance=1.64, runner_up=2.2, radius=1.42)
    got = fused_probability(SHIPPED.fusion, 0.858, nine, SHIPPED.fusion_limits)
    assert got <= 0.858 < SHIPPED.card


def test_templates_never_overrule_a_recogniser_sure_of_another_answer() -> None:
    # "Two." is the best transcript, but cancel takes 0.99 of the probability.
    hyps = [free("Two.", TWO, -5.0), reading("cancel", CANCEL, 0.0)]
    verdict = decide(hyps, TWO, Stage.CHOOSE, SHIPPED, 3)
    assert verdict.winner == CANCEL
    taught = near(TWO, clear=True, distance=10.0, runner_up=15.0, radius=15.0)
    out = fuse(verdict, hyps, TWO, taught, Stage.CHOOSE, SHIPPED, 3)
    assert not out.decision.releases


def test_the_template_ratio_stops_at_the_largest_features_it_was_fitted_on() -> None:
    copy = near(TWO, clear=True, distance=1e-9, runner_up=2.0, radius=1.0)  # a near copy
    limit = SHIPPED.fusion_limits
    assert limit is not None
    at_limit = near(TWO, clear=True, distance=1.0, runner_up=math.exp(limit[0]),
                    radius=math.exp(limit[1]))  # fmt: skip
    p = 0.01
    capped = fused_probability(SHIPPED.fusion, p, copy, limit)
    assert math.isclose(capped, fused_probability(SHIPPED.fusion, p, at_limit, limit))
    assert capped < fused_probability(SHIPPED.fusion, p, copy)  # unclipped would go further


def test_impossible_distances_give_no_evidence() -> None:
    impossible = ((1.0, 0.5, 1.0), (1.0, 0.0, 1.0), (-1.0, 2.0, 1.0), (1.0, 2.0, math.inf))
    for d1, d2, radius in impossible:
        assert fusion_evidence(0.5, near(TWO, clear=True, distance=d1, runner_up=d2,
                                         radius=radius)) is None  # fmt: skip
