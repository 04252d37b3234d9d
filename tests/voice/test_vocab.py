"""The closed-vocabulary check never turns a refusal of meaning into a release."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from voicegate.gate.types import Decision
from voicegate.reasons import Kind, Reason
from voicegate.voice.vocab import (
    DEFAULT_POLICY,
    UNCLEAR,
    UNREADABLE,
    Policy,
    Scored,
    check,
    standings,
)

TWO = Decision(Kind.CHOOSE, card=2)
THREE = Decision(Kind.CHOOSE, card=3)
CANCEL = Decision(Kind.CANCEL)
SOUND_ALIKE = Decision(Kind.REFUSE, reason=Reason.SOUND_ALIKE)
NOT_UNDERSTOOD = Decision(Kind.REFUSE, reason=Reason.NOT_UNDERSTOOD)
NO_SPEECH = Decision(Kind.REFUSE, reason=Reason.NO_SPEECH)
POLICY = Policy(margin=2.0, hallucination_margin=4.0, floor=-8.0, rescue=True)


def scores(two: float, three: float, cancel: float = -12.0, to: float = -1.0) -> list[Scored]:
    return [
        Scored("two", TWO, two),
        Scored("the second one", TWO, two - 3),
        Scored("three", THREE, three),
        Scored("cancel", CANCEL, cancel),
        Scored("to", SOUND_ALIKE, to, competes=False),
    ]


def test_grammar_choice_with_a_clear_agreeing_winner_is_released() -> None:
    verdict = check(TWO, scores(-1.0, -6.0), "Two.", POLICY)
    assert verdict.decision == TWO
    assert verdict.rule == "agreed"


def test_grammar_choice_that_the_scores_contradict_is_unclear() -> None:
    assert check(TWO, scores(-7.0, -1.0), "Two.", POLICY).decision == UNCLEAR


def test_grammar_choice_with_a_narrow_lead_is_unclear() -> None:
    assert check(TWO, scores(-2.0, -3.0), "Two.", POLICY).decision == UNCLEAR


def test_grammar_choice_below_the_floor_is_unclear() -> None:
    assert check(TWO, scores(-9.0, -15.0), "Two.", POLICY).decision == UNCLEAR


def test_a_weak_winner_with_a_clear_lead_is_unclear_by_default() -> None:
    # A spoken "not two" heard as ".2": "two" at -6.5 led every other card by 1.7.
    assert check(TWO, scores(-6.5, -8.2), ".2", DEFAULT_POLICY).decision == UNCLEAR
    assert check(TWO, scores(-4.5, -8.2), "2", DEFAULT_POLICY).decision == TWO


def test_grammar_choice_without_scores_is_unclear() -> None:
    assert check(TWO, [], "Two.", POLICY).decision == UNCLEAR


def test_known_mishearing_of_the_clear_winner_is_released() -> None:
    verdict = check(NOT_UNDERSTOOD, scores(-6.0, -1.0), "tea", POLICY)
    assert verdict.decision == THREE
    assert verdict.rule == "misheard"


def test_a_sound_alike_is_never_released_however_clear_the_scores() -> None:
    assert check(SOUND_ALIKE, scores(-0.1, -20.0, to=-30.0), "to", POLICY).decision == SOUND_ALIKE
    assert check(SOUND_ALIKE, scores(-0.1, -20.0), "tool", DEFAULT_POLICY).decision == SOUND_ALIKE


def test_mishearing_of_another_card_keeps_the_grammar_refusal() -> None:
    # "to" sounds like two, but the scores say three: nothing is released.
    assert check(SOUND_ALIKE, scores(-6.0, -1.0), "to", POLICY).decision == SOUND_ALIKE


def test_a_short_unreadable_transcript_with_a_clear_winner_is_rescued() -> None:
    verdict = check(NOT_UNDERSTOOD, scores(-1.0, -9.0, to=-3.0), "Cool.", POLICY)
    assert verdict.decision == TWO
    assert verdict.rule == "rescued"


def test_a_long_unreadable_transcript_is_not_rescued_by_prefix_scores() -> None:
    # "two" may be only the start of what was said.
    transcript = "two banana not really"
    assert check(NOT_UNDERSTOOD, scores(-1.0, -9.0, to=-3.0), transcript, POLICY).decision == (
        NOT_UNDERSTOOD
    )


def test_a_rescue_needs_the_wider_rescue_margin() -> None:
    policy = Policy(margin=2.0, floor=-8.0, rescue_margin=3.0, rescue=True)
    assert check(NOT_UNDERSTOOD, scores(-1.0, -3.5, to=-3.0), "Cool.", policy).decision == (
        NOT_UNDERSTOOD
    )


def test_a_rescue_needs_the_rescue_floor() -> None:
    assert check(NOT_UNDERSTOOD, scores(-7.0, -20.0, to=-9.0), "Cool.", POLICY).decision == (
        NOT_UNDERSTOOD
    )


def test_a_sound_alike_reading_ahead_of_the_winner_blocks_a_rescue() -> None:
    assert check(NOT_UNDERSTOOD, scores(-2.0, -9.0, to=-1.0), "Cool.", POLICY).decision == (
        NOT_UNDERSTOOD
    )


def test_a_mishearing_of_another_card_is_never_rescued_for_the_winner() -> None:
    # "for" names card four; the scores saying two is a contradiction.
    assert check(SOUND_ALIKE, scores(-1.0, -9.0, to=-3.0), "for", POLICY).decision == SOUND_ALIKE
    assert check(SOUND_ALIKE, scores(-1.0, -9.0, to=-3.0), "fife", POLICY).decision == SOUND_ALIKE


def test_homophone_readings_take_no_part_in_the_contest() -> None:
    best, margin = standings(scores(-1.5, -6.0, to=-0.5))
    assert best is not None
    assert best.decision == TWO
    assert margin == 4.5


def test_a_near_miss_reading_competes_with_the_number() -> None:
    # A spoken "tooth" written as "2": the near miss scores close behind "two", so no release.
    near = [*scores(-1.0, -9.0), Scored("tooth", SOUND_ALIKE, -1.6)]
    best, margin = standings(near)
    assert best is not None and best.decision == TWO and math.isclose(margin, 0.6)
    assert check(TWO, near, "2", POLICY).decision == UNCLEAR
    assert (
        check(TWO, [*scores(-1.0, -9.0), Scored("tooth", SOUND_ALIKE, -6.0)], "2").decision == TWO
    )


def test_a_lone_decision_has_an_infinite_lead() -> None:
    _, margin = standings([Scored("two", TWO, -1.0)])
    assert math.isinf(margin)


def test_hallucinated_thank_you_needs_the_wider_margin() -> None:
    assert check(NO_SPEECH, scores(-1.0, -4.0), "Thank you.", POLICY).decision == NO_SPEECH
    assert check(NO_SPEECH, scores(-1.0, -6.0), "Thank you.", POLICY).decision == TWO


def test_cancel_passes_through_whatever_the_scores() -> None:
    assert check(CANCEL, scores(-1.0, -9.0), "cancel", POLICY).decision == CANCEL


def test_a_clear_cancel_heard_as_council_cancels() -> None:
    verdict = check(NOT_UNDERSTOOD, scores(-9.0, -9.0, cancel=-1.0), "Council.", POLICY)
    assert verdict.decision == CANCEL


def test_a_clear_cancel_does_not_turn_a_card_mishearing_into_a_cancel() -> None:
    verdict = check(SOUND_ALIKE, scores(-9.0, -9.0, cancel=-1.0), "to", POLICY)
    assert verdict.decision == SOUND_ALIKE


MEANING_REFUSALS = [r for r in Reason if r not in UNREADABLE]


@given(
    reason=st.sampled_from(MEANING_REFUSALS),
    two=st.floats(-30, 0),
    three=st.floats(-30, 0),
    transcript=st.sampled_from(["not two", "maybe two", "two or three", "to", "Thank you."]),
)
def test_a_refusal_of_meaning_is_never_released(
    reason: Reason, two: float, three: float, transcript: str
) -> None:
    grammar = Decision(Kind.REFUSE, reason=reason)
    assert check(grammar, scores(two, three), transcript, POLICY).decision == grammar


@given(
    grammar=st.sampled_from([TWO, THREE, SOUND_ALIKE, NOT_UNDERSTOOD, NO_SPEECH]),
    two=st.floats(-30, 0),
    three=st.floats(-30, 0),
    cancel=st.floats(-30, 0),
    transcript=st.sampled_from(["two", "to", "three", "tree", "Thank you.", "banana"]),
)
def test_every_release_has_a_clear_winner_that_decides_it(
    grammar: Decision, two: float, three: float, cancel: float, transcript: str
) -> None:
    verdict = check(grammar, scores(two, three, cancel), transcript, POLICY)
    if verdict.decision.releases:
        assert verdict.winner is not None
        assert verdict.winner.decision == verdict.decision
        assert verdict.margin >= POLICY.margin
        assert verdict.winner.score >= POLICY.floor


@given(
    grammar=st.sampled_from([SOUND_ALIKE, NOT_UNDERSTOOD, NO_SPEECH]),
    two=st.floats(-30, 0),
    three=st.floats(-30, 0),
    to=st.floats(-30, 0),
    transcript=st.sampled_from(
        ["two three four", "banana is two", "two no three", "or", "bye", "Thank you."]
    ),
)
def test_a_long_mishearing_or_hallucination_transcript_is_never_rescued(
    grammar: Decision, two: float, three: float, to: float, transcript: str
) -> None:
    verdict = check(grammar, scores(two, three, to=to), transcript, POLICY)
    assert verdict.rule != "rescued"
    if verdict.decision.releases:
        assert verdict.rule in {"misheard", "hallucination"}


def test_the_default_policy_never_rescues_an_unreadable_transcript() -> None:
    scored = [Scored("one", Decision(Kind.CHOOSE, 1), -1.0), Scored("two", TWO, -9.0)]
    grammar = Decision(Kind.REFUSE, None, Reason.NOT_UNDERSTOOD)
    verdict = check(grammar, scored, "I", DEFAULT_POLICY)
    assert not verdict.decision.releases


def test_nothing_is_released_below_the_recogniser_confidence_floor() -> None:
    # A spoken "tooth" under reverberation written "2" at -2.9 per token, "two" far ahead.
    unsure = check(TWO, scores(-1.0, -9.0), "2", DEFAULT_POLICY, confidence=-2.9)
    assert unsure.decision == UNCLEAR and unsure.rule == "unsure"
    assert check(TWO, scores(-1.0, -9.0), "2", DEFAULT_POLICY, confidence=-1.9).decision == TWO
    assert check(TWO, scores(-1.0, -9.0), "2", confidence=math.nan).decision == UNCLEAR
    # A refusal or a cancel stays what it was, however unsure.
    assert check(CANCEL, scores(-1.0, -9.0), "cancel", confidence=-9.0).decision == CANCEL
