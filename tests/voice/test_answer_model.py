"""The answer model: its shipped weights and record, the answers a question can take, and the
rules by which it joins the decision (``decision.agree``, ``decision.heard_cancel``)."""

from __future__ import annotations

import json
from importlib.resources import files

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind, Reason
from voicegate.voice import answer_model as am
from voicegate.voice.calibration import UNCALIBRATED, Calibration
from voicegate.voice.decision import UNCLEAR, Rule, Ruling, agree, heard_cancel

YES = Decision(Kind.CONFIRM)
TWO = Decision(Kind.CHOOSE, card=2)
THREE = Decision(Kind.CHOOSE, card=3)
NOTHING = Decision(Kind.REFUSE)
HEDGE = Decision(Kind.REFUSE, reason=Reason.HEDGE)
NOT_UNDERSTOOD = Decision(Kind.REFUSE, reason=Reason.NOT_UNDERSTOOD)
CALIBRATED = Calibration(0.9, 0.9, 1, "test", answers={"card": 0.8, "yes": 0.85, "cancel": 0.9})
CANCEL = Decision(Kind.CANCEL)
NO_SPEECH = Decision(Kind.REFUSE, reason=Reason.NO_SPEECH)


def probs(**named: float) -> np.ndarray:
    p = np.zeros(len(am.CLASSES))
    for name, v in named.items():
        p[am.CLASSES.index(name)] = v
    p[0] += 1 - p.sum()
    return p


def test_one_card_at_the_choose_stage_hears_one_and_yes_as_one_confirm() -> None:
    m = am.meanings(probs(yes=0.5, card1=0.3, card2=0.1), 1, Stage.CHOOSE)
    assert m[YES] == pytest.approx(0.8)
    assert m[NOTHING] == pytest.approx(0.2)
    assert sum(m.values()) == pytest.approx(1.0)


def test_a_yes_among_several_cards_and_a_card_not_open_are_no_answer() -> None:
    m = am.meanings(probs(yes=0.4, card2=0.3, card5=0.2), 3, Stage.CHOOSE)
    assert YES not in m
    assert m[TWO] == pytest.approx(0.3)
    assert m[NOTHING] == pytest.approx(0.7)
    assert Decision(Kind.CHOOSE, card=5) not in m


def test_a_number_at_the_final_card_is_no_answer() -> None:
    m = am.meanings(probs(yes=0.3, card1=0.6), 1, Stage.FINAL)
    assert m[YES] == pytest.approx(0.3)
    assert m[NOTHING] == pytest.approx(0.7)


def test_the_shipped_model_loads_for_tiny_en_only() -> None:
    model = am.load("tiny.en")
    assert model is not None and model.width == 384
    assert am.load("base") is None


def test_the_shipped_thresholds_are_the_recorded_fits() -> None:
    """Each shipped threshold is the higher of the two halves' fits in the same record."""
    folder = files("voicegate.voice") / "answer_models"
    record = json.loads((folder / "tiny.en.json").read_text(encoding="utf-8"))
    model = am.load("tiny.en")
    assert model is not None
    assert set(model.thresholds) == {"card", "yes", "cancel"}
    for question, halves in record["fits"].items():
        assert model.thresholds[question] == max(halves.values())
        assert 0.5 <= model.thresholds[question] < 1.0


def test_the_model_gives_a_distribution_and_refuses_frames_of_another_width() -> None:
    model = am.load("tiny.en")
    assert model is not None
    rng = np.random.default_rng(0)
    p = model.probabilities(rng.standard_normal((60, 384)).astype(np.float32))
    assert p.shape == (len(am.CLASSES),) and p.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="384"):
        model.probabilities(np.zeros((60, 512), np.float32))
    with pytest.raises(ValueError):
        model.probabilities(np.zeros((0, 384), np.float32))


def test_frames_paired_already_are_read_as_the_model_reads_raw_frames() -> None:
    """Training holds each clip's frames paired once (``Data``); ``read`` takes them so."""
    model = am.load("tiny.en")
    assert model is not None
    frames = np.random.default_rng(3).standard_normal((61, 384)).astype(np.float32)
    assert model.read(am.paired(frames)) == pytest.approx(model.probabilities(frames))
    assert model.read(am.paired(am.paired(frames))) != pytest.approx(model.probabilities(frames))


def test_the_embedding_is_the_attention_mean_then_the_maximum_of_the_hidden_layer() -> None:
    """What the outputs read (and what an enrolment prototype would keep, benchmarks/enrol.py
    prototypes): a mean weighted by attention lies between 0 (ReLU) and the maximum over time."""
    model = am.load("tiny.en")
    assert model is not None
    x = am.paired(np.random.default_rng(4).standard_normal((60, 384)).astype(np.float32))
    e = model.embedding(x)
    hidden = model.hidden.shape[1]
    assert e.shape == (2 * hidden,)
    assert (e >= 0).all() and (e[:hidden] <= e[hidden:] + 1e-9).all()
    assert model.logits(x) == pytest.approx(e @ model.out + model.out_bias)


def test_weights_for_other_classes_are_refused() -> None:
    with pytest.raises(ValueError, match="classes"):
        am.from_arrays("tiny.en", {}, {"classes": ["other", "yes"]})


def _arrays(outputs: int, bias: list[float]) -> dict[str, np.ndarray]:
    """Weights of a network that reads nothing from its frames: its answer is its biases."""
    width, hidden = 4, 3
    return {
        "mean": np.zeros(width),
        "scale": np.ones(width),
        "hidden": np.zeros((width, hidden)),
        "hidden_bias": np.zeros(hidden),
        "attention": np.zeros(hidden + 1),
        "out": np.zeros((2 * hidden, outputs)),
        "out_bias": np.array(bias),
    }


def test_a_near_miss_output_is_read_as_no_answer() -> None:
    """A near miss of card 2 ("tooth") is taught apart from other words; heard, it is OTHER."""
    record = {"classes": list(am.CLASSES), "refusals": ["near_card2"]}
    card2 = am.CLASSES.index("card2")
    bias = [0.0] * (len(am.CLASSES) + 1)
    bias[-1], bias[card2] = 3.0, 1.0
    model = am.from_arrays("tiny.en", _arrays(len(bias), bias), record)
    p = model.probabilities(np.ones((6, 4), np.float32))
    e = np.exp(np.array(bias))
    assert p.shape == (len(am.CLASSES),) and p.sum() == pytest.approx(1.0)
    assert p[0] == pytest.approx((e[0] + e[-1]) / e.sum())
    assert p[card2] == pytest.approx(e[card2] / e.sum())


def test_weights_with_outputs_their_record_does_not_name_are_refused() -> None:
    arrays = _arrays(len(am.CLASSES) + 2, [0.0] * (len(am.CLASSES) + 2))
    with pytest.raises(ValueError, match="outputs"):
        am.from_arrays("tiny.en", arrays, {"classes": list(am.CLASSES), "refusals": ["near_yes"]})


def test_a_release_the_answer_model_does_not_hear_is_refused() -> None:
    decided = Ruling(TWO, 0.97, Rule.DECIDED, TWO)
    answers = am.meanings(probs(card2=0.3, card3=0.5), 4, Stage.CHOOSE)
    v = agree(decided, answers, Stage.CHOOSE, CALIBRATED, 4)
    assert v.decision.kind is Kind.REFUSE and v.decision.reason is Reason.UNCLEAR
    assert v.rule == "answer_model" and v.heard == pytest.approx(0.3)


def test_a_release_the_answer_model_hears_too_unsurely_is_refused() -> None:
    decided = Ruling(YES, 0.99, Rule.DECIDED, YES)
    answers = am.meanings(probs(yes=0.84), 1, Stage.FINAL)
    assert agree(decided, answers, Stage.FINAL, CALIBRATED, 1).rule == "answer_model"


def test_a_release_both_hear_stands_with_the_models_probability() -> None:
    decided = Ruling(TWO, 0.97, Rule.DECIDED, TWO)
    answers = am.meanings(probs(card2=0.95), 4, Stage.CHOOSE)
    v = agree(decided, answers, Stage.CHOOSE, CALIBRATED, 4)
    assert v.decision == TWO and v.rule == "decided" and v.heard == pytest.approx(0.95)


def test_the_answer_model_never_releases_what_the_words_did_not() -> None:
    unsure = Ruling(NOT_UNDERSTOOD, 0.6, Rule.UNCLEAR, THREE)
    answers = am.meanings(probs(card3=0.99), 4, Stage.CHOOSE)
    assert agree(unsure, answers, Stage.CHOOSE, CALIBRATED, 4) == unsure


def test_without_an_answer_model_the_recogniser_decides_alone() -> None:
    decided = Ruling(TWO, 0.97, Rule.DECIDED, TWO)
    assert agree(decided, None, Stage.CHOOSE, CALIBRATED, 4) == decided
    answers = am.meanings(probs(card2=0.1), 4, Stage.CHOOSE)
    assert agree(decided, answers, Stage.CHOOSE, UNCALIBRATED, 4) == decided


DECISIONS = st.sampled_from(
    [YES, TWO, THREE, NOTHING, HEDGE, NOT_UNDERSTOOD, Decision(Kind.CANCEL),
     Decision(Kind.REFUSE, reason=Reason.NEGATION), Decision(Kind.MORE_TIME)]
)  # fmt: skip


@given(
    decided=DECISIONS,
    weights=st.lists(st.floats(0, 1), min_size=len(am.CLASSES), max_size=len(am.CLASSES)),
    cards=st.integers(1, 5),
    final=st.booleans(),
)
def test_the_answer_model_only_ever_takes_a_release_away(
    decided: Decision, weights: list[float], cards: int, final: bool
) -> None:
    stage = Stage.FINAL if final else Stage.CHOOSE
    w = np.asarray(weights) + 1e-9
    answers = am.meanings(w / w.sum(), cards, stage)
    ruling = Ruling(decided, 0.5, Rule.DECIDED, decided)
    v = agree(ruling, answers, stage, CALIBRATED, cards)
    assert v.decision in (decided, UNCLEAR)
    if v.decision.releases:
        need = CALIBRATED.answers["card" if cards > 1 and not final else "yes"]  # type: ignore[index]
        assert max(answers, key=lambda d: answers[d]) == v.decision
        assert answers[v.decision] >= need
    if not decided.releases:
        assert v == ruling


def test_the_sound_cancels_where_the_words_said_nothing() -> None:
    """A spoken "no" heard "Now.": the grammar reads no answer, the model hears cancel."""
    unread = Ruling(NOT_UNDERSTOOD, 0.0, Rule.NO_ANSWER)
    answers = am.meanings(probs(cancel=0.95), 1, Stage.FINAL)
    v = heard_cancel(unread, answers, NOT_UNDERSTOOD, CALIBRATED)
    assert v.decision == CANCEL and v.rule == "heard_cancel" and v.heard == pytest.approx(0.95)
    heard_nothing = Ruling(NO_SPEECH, 0.0, Rule.RECOGNISER)
    assert heard_cancel(heard_nothing, answers, NO_SPEECH, CALIBRATED).decision == CANCEL


def test_the_sound_cancels_only_at_its_threshold_and_as_its_likeliest_answer() -> None:
    unread = Ruling(NOT_UNDERSTOOD, 0.0, Rule.NO_ANSWER)
    unsure = am.meanings(probs(cancel=0.89), 1, Stage.FINAL)
    assert heard_cancel(unread, unsure, NOT_UNDERSTOOD, CALIBRATED) == unread
    yes = am.meanings(probs(yes=0.95, cancel=0.05), 1, Stage.FINAL)
    assert heard_cancel(unread, yes, NOT_UNDERSTOOD, CALIBRATED) == unread


def test_the_sound_never_cancels_against_the_words() -> None:
    """Words that meant something stand, each guard on its own: the sound cancels only where
    nothing was understood."""
    answers = am.meanings(probs(cancel=0.99), 1, Stage.FINAL)
    # The ruling a refusal of meaning, the transcript unreadable (a likeliest hedge's veto).
    hedge = Ruling(HEDGE, 0.0, Rule.VETO)
    assert heard_cancel(hedge, answers, NOT_UNDERSTOOD, CALIBRATED) == hedge
    # A release the answer model refused: the recogniser's winner releases.
    refused = Ruling(UNCLEAR, 0.97, Rule.ANSWER_MODEL, YES)
    assert heard_cancel(refused, answers, NOT_UNDERSTOOD, CALIBRATED) == refused
    # An unsure yes: the winner releases, though the ruling is "not understood".
    unsure_yes = Ruling(NOT_UNDERSTOOD, 0.7, Rule.UNCLEAR, YES)
    assert heard_cancel(unsure_yes, answers, NOT_UNDERSTOOD, CALIBRATED) == unsure_yes
    # The best transcript reads as an answer.
    other_words = Ruling(NOT_UNDERSTOOD, 0.0, Rule.NO_ANSWER)
    assert heard_cancel(other_words, answers, YES, CALIBRATED) == other_words
    # The likeliest hypothesis is a refusal of meaning ("maybe" scored above all).
    assert heard_cancel(other_words, answers, NOT_UNDERSTOOD, CALIBRATED, HEDGE) == other_words
    # A transcript the token limit cut (the recogniser's ``unclear``).
    cut = Ruling(UNCLEAR, 0.0, Rule.RECOGNISER)
    assert heard_cancel(cut, answers, NOT_UNDERSTOOD, CALIBRATED) == cut


def test_without_a_cancel_threshold_the_sound_cancels_nothing() -> None:
    unread = Ruling(NOT_UNDERSTOOD, 0.0, Rule.NO_ANSWER)
    answers = am.meanings(probs(cancel=0.99), 1, Stage.FINAL)
    assert heard_cancel(unread, answers, NOT_UNDERSTOOD, UNCALIBRATED) == unread
    no_cancel = Calibration(0.9, 0.9, 1, "test", answers={"card": 0.8, "yes": 0.85})
    assert heard_cancel(unread, answers, NOT_UNDERSTOOD, no_cancel) == unread
    assert heard_cancel(unread, None, NOT_UNDERSTOOD, CALIBRATED) == unread


REFUSALS = st.sampled_from([Decision(Kind.REFUSE, reason=r) for r in Reason] + [NOTHING])
RULINGS = st.one_of(DECISIONS, REFUSALS)
# Half the time a refusal that says nothing was understood, so that rule 5 is often in question.
UNREAD = st.one_of(st.sampled_from([NOT_UNDERSTOOD, NO_SPEECH]), RULINGS)


@settings(max_examples=400)
@given(
    ruled=UNREAD,
    transcript=UNREAD,
    likeliest=st.one_of(st.none(), st.just(NOT_UNDERSTOOD), RULINGS),
    rule=st.sampled_from(list(Rule)),
    winner=st.one_of(st.none(), st.just(CANCEL), DECISIONS),
    cancel=st.one_of(st.floats(0.85, 1), st.floats(0, 1)),
    rest=st.lists(st.floats(0, 1), min_size=len(am.CLASSES), max_size=len(am.CLASSES)),
    cards=st.integers(1, 5),
    final=st.booleans(),
)
def test_the_sound_cancels_exactly_where_nothing_was_understood_and_it_hears_cancel(
    ruled: Decision,
    transcript: Decision,
    likeliest: Decision | None,
    rule: Rule,
    winner: Decision | None,
    cancel: float,
    rest: list[float],
    cards: int,
    final: bool,
) -> None:
    """``heard_cancel`` turns a ruling into a cancel if and only if every condition of rule 5
    holds, and otherwise leaves it exactly as it was: it never releases."""
    stage = Stage.FINAL if final else Stage.CHOOSE
    w = np.asarray(rest) * (1 - cancel) / (sum(rest) + 1e-9)
    w[am.CLASSES.index("cancel")] = cancel
    answers = am.meanings(w + 1e-12, cards, stage)
    ruling = Ruling(ruled, 0.5, rule, winner)
    v = heard_cancel(ruling, answers, transcript, CALIBRATED, likeliest)
    said = max(answers, key=lambda d: answers[d])
    meaning = {Reason.QUESTION, Reason.HEDGE, Reason.NEGATION, Reason.CONTRADICTION,
               Reason.NUMBER_ON_FINAL, Reason.OUT_OF_RANGE, Reason.AMBIGUOUS,
               Reason.SOUND_ALIKE}  # fmt: skip
    fires = (
        ruled.kind is Kind.REFUSE
        and ruled.reason in (Reason.NOT_UNDERSTOOD, Reason.NO_SPEECH)
        and transcript.kind is Kind.REFUSE
        and transcript.reason in (Reason.NOT_UNDERSTOOD, Reason.NO_SPEECH)
        and (likeliest is None or likeliest.kind is not Kind.REFUSE
             or likeliest.reason not in meaning)
        and (winner is None or not winner.releases)
        and said == CANCEL
        and answers[CANCEL] >= 0.9
    )  # fmt: skip
    event("cancels" if fires else "stands")
    if fires:
        assert v.decision == CANCEL and v.rule == "heard_cancel" and not v.decision.releases
    else:
        assert v == ruling
