"""The voice decision: one probability per decision, and the grammar as the veto for meaning.

Pure logic on numbers. Every hypothesis is a text the recogniser scored as a whole sequence
(end-of-text included), log P(text, language | audio): every reading the card allows, the
refusing readings beside them, and the free transcripts of the beam search, which stand for
"anything else was said" when the grammar reads them as no answer, at the calibrated prior
odds ``Calibration.other``. A decision's probability is the sum over the hypotheses that mean
it, out of the sum over all of them. Then:

1. **Veto.** When the grammar reads the best transcript as a refusal of meaning (a question,
   hedge, negation, contradiction, near miss, number on the final card or out of range, a
   "yes" among several cards), that refusal is the decision; when it reads the likeliest
   hypothesis so, nothing is released (a cancel stands). Scores never turn a refusal of
   meaning into a release.
2. **Probability.** A best transcript that reads as cancel or more time is decided so: it
   releases nothing, and the user's words say it. Otherwise the likeliest of choose k, confirm,
   cancel and more time decides when its probability reaches the stage's calibrated threshold
   (``Calibration``) and, if the best transcript reads as an answer, it is that answer.
3. **Support.** A release also needs a free transcript read as exactly that release among the
   first ``Calibration.support`` of a language's beam: scores alone were measured confirming
   the Hindi contradiction "haan nahin", whose transcripts ("Hannain") the grammar cannot read.

4. **The sound agrees.** Where the recogniser has an answer model (``voice/answer_model.py``,
   a classifier over the encoder's frames trained on real and synthetic speech, near misses
   above all), a release also needs the model's likeliest answer to be that release, with at
   least its calibrated probability (``Calibration.answers``; ``agree``). Every transcript of the
   beam can say "Two." for a spoken "tooth"; the sound alone can tell them apart. The model only
   takes releases away: it releases nothing the words did not.
5. **The sound may cancel.** Where the words said nothing (the best transcript reads as no
   answer: "Now." for a spoken "no", or Whisper heard no speech), the likeliest hypothesis is no
   refusal of meaning and the recogniser's likeliest answer is no release, the answer model's
   cancel decides when it is its likeliest answer at its calibrated probability
   (``heard_cancel``). A transcript the token limit cut is not read even so. A cancel releases
   nothing; the user's own "no" should not need saying twice.

Everything else refuses, with the grammar's own reason when it had one, else ``UNCLEAR``.

**Personal answers** (``fuse``, docs/voice.md "Enrolment"). Where the user taught templates,
they count only as evidence about the recogniser's own likeliest answer, by Bayes' rule in
log-odds (``voicegate.voice.taught.fused_probability``): the recogniser's log-odds for it plus
the likelihood ratio of the template distances, fitted on real speech. A template of another
meaning nearer than the answer's own lowers the probability by its ratio; it never refuses
outright. An answer outside every taught meaning's radius, or one the user never taught, gets
no ratio: the recogniser decides alone. A refusal of meaning the recogniser heard, in the
transcript or as the likeliest hypothesis, and a cancel or wait in the words, still decide. A
release needs the fused probability to reach the same threshold as the recogniser alone
("fused", else "fused_unclear"); on a choice among cards the templates may also lift an answer
the recogniser alone found too unsure, when a free transcript at the top of a language's beam
says it, it reads as no other answer, it is the likeliest hypothesis (weighed by the prior of
anything else) and the templates point at it. At a yes-or-no question, which the ratio was not
fitted on, they may only lower. For a user who said their speech is hard for recognisers, a
clear template match may also decide on its own at a choice among cards, where the model opens
that path (``Calibration.alone``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind, Reason
from voicegate.voice.calibration import Calibration, Question, question
from voicegate.voice.taught import Taught, fused_probability

# Grammar refusals that say what the words mean, not that they could not be read.
# SOUND_ALIKE is a word the lexicon names as sounding unlike the number ("tooth", "fife"): the
# user said a word that is not the answer (with English and Hindi on, base heard a corpus
# "tooth" as "Tooth" and still gave card two 0.55 from other readings).
MEANING = frozenset(
    {Reason.QUESTION, Reason.HEDGE, Reason.NEGATION, Reason.CONTRADICTION}
    | {Reason.NUMBER_ON_FINAL, Reason.OUT_OF_RANGE, Reason.AMBIGUOUS, Reason.SOUND_ALIKE}
)
ANSWERS = frozenset({Kind.CHOOSE, Kind.CONFIRM, Kind.CANCEL, Kind.MORE_TIME})
UNCLEAR = Decision(Kind.REFUSE, reason=Reason.UNCLEAR)
# What a best transcript reads as when the words said nothing at all (rule 5).
SAID_NOTHING = frozenset({Reason.NOT_UNDERSTOOD, Reason.NO_SPEECH})
# The refusals, of the recogniser or of the rules, after which the sound may still cancel: not
# ``UNCLEAR`` (there the words said another answer, or the token limit cut what they said).
HEARD_NOTHING = frozenset({Reason.NO_SPEECH, Reason.NOT_UNDERSTOOD})
# The answer model's threshold for a cancel, beside its "card" and "yes" (``heard_cancel``).
CANCEL_KEY = "cancel"


class Rule(StrEnum):
    """Which rule decided a ruling (the module docstring; ``rule`` in ``decide --json``)."""

    VETO = "veto"  # rule 1: the grammar refused the meaning
    GRAMMAR = "grammar"  # rule 2: the words say cancel or more time
    DECIDED = "decided"  # rules 2-3: the likeliest answer, sure and supported
    UNCLEAR = "unclear"  # rule 2: the likeliest answer under the threshold
    DISAGREE = "disagree"  # rule 2: the best transcript reads as another answer
    UNSUPPORTED = "unsupported"  # rule 3: no free transcript says the release
    NO_ANSWER = "no_answer"  # no hypothesis means an answer
    RECOGNISER = "recogniser"  # the recogniser refused the hearing
    ANSWER_MODEL = "answer_model"  # rule 4: the sound does not agree
    HEARD_CANCEL = "heard_cancel"  # rule 5: the words said nothing, the sound said cancel
    FUSED = "fused"  # the templates' ratio lifted or kept the answer over the threshold
    FUSED_UNCLEAR = "fused_unclear"  # the templates' ratio left it under the threshold
    TEMPLATE = "template"  # a hard user's clear template match decided alone
    GRANT = "grant"  # a spoken grant whose answer part could not be heard
    GRANT_DISAGREE = "grant_disagree"  # the answer part heard as another answer


@dataclass(frozen=True, slots=True)
class Hypothesis:
    """One scored text, what the grammar reads it as, and where it came from."""

    text: str
    decision: Decision
    score: float
    language: str = "en"
    # The beam search's rank of this text in its language (0 = best); None for a reading.
    rank: int | None = None


@dataclass(frozen=True, slots=True)
class Ruling:
    """The decision, the probability of the best answer, and which rule decided."""

    decision: Decision
    probability: float
    rule: Rule
    winner: Decision | None = None
    # The winner's fused probability, where the user's templates weighed in (``fuse``); the
    # ``probability`` above stays the recogniser's own.
    fused: float | None = None
    # The answer model's probability of the decision, where it weighed in (``agree``).
    heard: float | None = None


def merge(cards: int, stage: Stage) -> Callable[[Decision], Decision]:
    """What each decision is for a set of ``cards`` cards at ``stage``: with one card open at the
    choose stage, choosing card 1 and yes release the same action, so they are one decision
    (a confirm); anywhere else every decision is itself."""
    return _one_card if cards == 1 and stage is Stage.CHOOSE else _as_is


def _one_card(decision: Decision) -> Decision:
    return Decision(Kind.CONFIRM) if decision == Decision(Kind.CHOOSE, card=1) else decision


def posteriors(hypotheses: Sequence[Hypothesis], other: float = 0.0) -> dict[Decision, float]:
    """P(decision | audio): each decision's share of the probability of all hypotheses, a
    free transcript that reads as no answer ("anything else") at prior log-odds ``other``."""
    finite = [h for h in hypotheses if math.isfinite(h.score)]
    if not finite:
        return {}
    scores = _weighed(finite, other)
    top = max(scores)
    mass: dict[Decision, float] = defaultdict(float)
    for h, score in zip(finite, scores, strict=True):
        mass[h.decision] += math.exp(score - top)
    total = sum(mass.values())
    return {decision: m / total for decision, m in mass.items()}


def weigh(
    hypotheses: Sequence[Hypothesis],
    transcript: Decision,
    stage: Stage,
    calibration: Calibration,
    cards: int = 1,
) -> Ruling:
    """The decision for one answer; ``transcript`` is the grammar's reading of the best one."""
    if _meaning(transcript):
        return Ruling(transcript, 0.0, Rule.VETO)
    if transcript.kind in (Kind.CANCEL, Kind.MORE_TIME):
        return Ruling(transcript, 0.0, Rule.GRAMMAR)
    finite = [h for h in hypotheses if math.isfinite(h.score)]
    likeliest = _likeliest(finite, calibration.prior(stage, cards))
    fallback = transcript if transcript.kind is Kind.REFUSE else UNCLEAR
    post = posteriors(finite, calibration.prior(stage, cards))
    answers = {d: p for d, p in post.items() if d.kind in ANSWERS}
    if not answers:
        return Ruling(fallback, 0.0, Rule.NO_ANSWER)
    winner = max(answers, key=lambda d: answers[d])
    probability = answers[winner]
    if not probability >= calibration.need(stage, cards):
        return Ruling(fallback, probability, Rule.UNCLEAR, winner)
    if transcript.kind in ANSWERS and winner != transcript:
        return Ruling(UNCLEAR, probability, Rule.DISAGREE, winner)
    if winner.releases and _meaning(likeliest):
        return Ruling(likeliest, probability, Rule.VETO, winner)
    if winner.releases and not _supported(winner, finite, calibration.support):
        return Ruling(fallback, probability, Rule.UNSUPPORTED, winner)
    return Ruling(winner, probability, Rule.DECIDED, winner)


def agree(
    ruling: Ruling,
    answers: Mapping[Decision, float] | None,
    stage: Stage,
    calibration: Calibration,
    cards: int = 1,
) -> Ruling:
    """The ruling once the answer model has heard the clip (module docstring, rule 4): a
    release stands only where the answer model's likeliest answer is that release, with at
    least its calibrated probability; ``answers`` are its probabilities of the answers this
    question can take (``answer_model.meanings``). Refusals, cancels and waits stand as they are:
    the model only ever takes a release away."""
    need = calibration.answers.get(question(stage, cards)) if calibration.answers else None
    if answers is None or need is None or not ruling.decision.releases:
        return ruling
    said = max(answers, key=lambda d: answers[d])
    if said == ruling.decision and answers[said] >= need:
        return replace(ruling, heard=answers[said])
    return Ruling(UNCLEAR, ruling.probability, Rule.ANSWER_MODEL, ruling.winner, ruling.fused,
                   answers.get(ruling.decision, 0.0))  # fmt: skip


def heard_cancel(
    ruling: Ruling,
    answers: Mapping[Decision, float] | None,
    transcript: Decision,
    calibration: Calibration,
    likeliest: Decision | None = None,
) -> Ruling:
    """The ruling once the answer model may cancel (module docstring, rule 5): a refusal because
    nothing was understood (``HEARD_NOTHING``; never a refusal of meaning) becomes a cancel where
    the best transcript reads as no answer (``transcript``, ``SAID_NOTHING``), the likeliest
    hypothesis (``likeliest``: None where the recogniser refused the hearing and scored none) is
    no refusal of meaning, the recogniser's likeliest answer, if any, releases nothing, and the
    answer model's likeliest answer is cancel with at least its calibrated probability
    (``Calibration.answers["cancel"]``)."""
    need = calibration.answers.get(CANCEL_KEY) if calibration.answers else None
    if answers is None or need is None:
        return ruling
    if ruling.decision.kind is not Kind.REFUSE or ruling.decision.reason not in HEARD_NOTHING:
        return ruling
    if transcript.reason not in SAID_NOTHING or transcript.kind is not Kind.REFUSE:
        return ruling
    if likeliest is not None and _meaning(likeliest):
        return ruling
    if ruling.winner is not None and ruling.winner.releases:
        return ruling
    said = max(answers, key=lambda d: answers[d])
    if said.kind is not Kind.CANCEL or not answers[said] >= need:
        return ruling
    return Ruling(said, ruling.probability, Rule.HEARD_CANCEL, ruling.winner, ruling.fused,
                  answers[said])  # fmt: skip


def refused_by_recogniser(refusal: Reason, transcript: Decision) -> Ruling:
    """The ruling when the recogniser refused the hearing (``transcript``: the grammar's reading
    of its best transcript). Whisper's doubt that anything was said (``NO_SPEECH``) protects
    releases; a best transcript that says cancel or wait still decides so, as rule 2 does,
    since it releases nothing. On the 2,666 real clips a spoken "stop" heard "Stop." at a
    no-speech probability of 0.78 now cancels, and none of the other 52 no-speech decisions
    reads as a cancel or a wait (docs/voice.md, "Weak spots")."""
    if refusal is Reason.NO_SPEECH and transcript.kind in (Kind.CANCEL, Kind.MORE_TIME):
        return Ruling(transcript, 0.0, Rule.GRAMMAR)
    return Ruling(Decision(Kind.REFUSE, reason=refusal), 0.0, Rule.RECOGNISER)


def fuse(
    ruling: Ruling,
    hypotheses: Sequence[Hypothesis],
    transcript: Decision,
    taught: Taught | None,
    stage: Stage,
    calibration: Calibration,
    cards: int = 1,
) -> Ruling:
    """The ruling of ``weigh`` combined with the user's templates (module docstring)."""
    if taught is None or ruling.rule in (Rule.VETO, Rule.GRAMMAR, Rule.RECOGNISER):
        return ruling
    same = merge(cards, stage)
    finite = [h for h in hypotheses if math.isfinite(h.score)]
    likeliest = _likeliest(finite, calibration.prior(stage, cards))
    winner = ruling.winner
    evidence = _merged(taught, same)
    if winner is None or not winner.releases or evidence is None:
        return _alone(ruling, finite, transcript, taught, stage, calibration, cards, same)
    probability = posteriors(finite, calibration.prior(stage, cards)).get(winner, 0.0)
    combined = fused_probability(
        calibration.fusion, probability, evidence, winner, calibration.fusion_limits
    )
    if combined is None:  # the templates say nothing about this answer: the recogniser alone
        return _alone(ruling, finite, transcript, taught, stage, calibration, cards, same)
    if question(stage, cards) is Question.YES:
        # The fusion was fitted on choices among cards: at a yes-or-no question the templates'
        # ratio may lower the recogniser's probability, never raise it.
        combined = min(combined, probability)
    need = calibration.need(stage, cards)
    if ruling.decision.releases:
        if combined >= need:
            return Ruling(winner, probability, Rule.FUSED, winner, combined)
        return Ruling(UNCLEAR, probability, Rule.FUSED_UNCLEAR, winner, combined)
    if ruling.rule is not Rule.UNCLEAR:  # UNSUPPORTED, DISAGREE: still refused, ratio shown
        return Ruling(ruling.decision, ruling.probability, ruling.rule, winner, combined)
    # The recogniser alone found its winner too unsure. The templates lift it only on a choice
    # among cards, when a free transcript at the top of a language's beam says it (rule 3) and
    # reads as no other answer, the winner is the likeliest, and the templates point at it.
    said = _supported(winner, finite, calibration.support)
    other = transcript.kind in ANSWERS and transcript != winner
    if (
        said
        and not other
        and likeliest == winner
        and _points_at(evidence, winner)
        and question(stage, cards) is Question.CARD
        and _allowed(winner, stage, cards)
        and combined >= need
    ):
        return Ruling(winner, probability, Rule.FUSED, winner, combined)
    unsure = Ruling(ruling.decision, ruling.probability, Rule.FUSED_UNCLEAR, winner, combined)
    return _alone(unsure, finite, transcript, taught, stage, calibration, cards, same)


def _alone(
    ruling: Ruling,
    finite: Sequence[Hypothesis],
    transcript: Decision,
    taught: Taught,
    stage: Stage,
    calibration: Calibration,
    cards: int,
    same: Callable[[Decision], Decision],
) -> Ruling:
    """Where the fused probability says nothing: the recogniser's ruling, or, for a user who
    said their speech is hard for recognisers, a clear template match where the recogniser
    gives its meaning at least ``Calibration.alone`` (infinity, shut, on a model not fitted)."""
    if ruling.decision.releases or taught.nearest is None or not taught.clear:
        return ruling
    meaning = same(taught.nearest)
    if not taught.hard or meaning.kind not in ANSWERS or not _allowed(meaning, stage, cards):
        return ruling
    # Fitted on choices among cards, each match beating the user's other taught meanings: a
    # yes-or-no question, or a user with one meaning taught (nothing to beat, and no reach to
    # cap the radius), never gets a release from templates alone.
    if question(stage, cards) is not Question.CARD or not any(
        m != meaning for m in taught.distances
    ):
        return ruling
    likeliest = _likeliest(finite, calibration.prior(stage, cards))
    if _meaning(likeliest) or (transcript.kind in ANSWERS and transcript != meaning):
        return ruling
    probability = posteriors(finite, calibration.prior(stage, cards)).get(meaning, 0.0)
    if probability >= calibration.alone:
        return Ruling(meaning, probability, Rule.TEMPLATE, meaning)
    return ruling


def _points_at(taught: Taught, meaning: Decision) -> bool:
    """The templates point at ``meaning``: nearest of all taught meanings, inside its radius."""
    d = taught.distances.get(meaning, math.inf)
    others = min((v for m, v in taught.distances.items() if m != meaning), default=math.inf)
    return d < others and d <= taught.radii.get(meaning, 0.0)


def _merged(taught: Taught, same: Callable[[Decision], Decision]) -> Taught | None:
    """The templates with the meanings ``same`` makes one (card 1 and yes on a single card)
    merged: each meaning's nearest distance and widest radius. None without distances."""
    if not taught.distances:
        return None
    if same is _as_is:
        return taught
    distances: dict[Decision, float] = {}
    radii: dict[Decision, float] = {}
    for m, d in taught.distances.items():
        distances[same(m)] = min(d, distances.get(same(m), math.inf))
    for m, r in taught.radii.items():
        radii[same(m)] = max(r, radii.get(same(m), 0.0))
    return replace(taught, distances=distances, radii=radii)


def _as_is(decision: Decision) -> Decision:
    return decision


def _allowed(meaning: Decision, stage: Stage, cards: int) -> bool:
    """A taught card is an answer only at the choose stage and only if that card is open."""
    if meaning.kind is not Kind.CHOOSE:
        return True
    return stage is Stage.CHOOSE and meaning.card is not None and 1 <= meaning.card <= cards


def _meaning(decision: Decision) -> bool:
    return decision.kind is Kind.REFUSE and decision.reason in MEANING


def _weighed(hypotheses: Sequence[Hypothesis], other: float) -> list[float]:
    """The scores, "anything else" (a free transcript read as no answer) at prior ``other``."""
    return [h.score + other if _anything_else(h) else h.score for h in hypotheses]


def _anything_else(h: Hypothesis) -> bool:
    return h.rank is not None and h.decision.reason is Reason.NOT_UNDERSTOOD


def likeliest(
    hypotheses: Sequence[Hypothesis], calibration: Calibration, stage: Stage, cards: int
) -> Decision:
    """What the likeliest hypothesis means, weighed by the stage's prior as ``weigh`` weighs it."""
    finite = [h for h in hypotheses if math.isfinite(h.score)]
    return _likeliest(finite, calibration.prior(stage, cards))


def _likeliest(hypotheses: Sequence[Hypothesis], other: float) -> Decision:
    """What the likeliest hypothesis means, weighed by the prior as ``posteriors`` weighs it."""
    scores = _weighed(hypotheses, other)
    return hypotheses[scores.index(max(scores))].decision if hypotheses else UNCLEAR


def _supported(winner: Decision, hypotheses: Sequence[Hypothesis], depth: int) -> bool:
    """True when one of the first ``depth`` free transcripts of a language reads as ``winner``."""
    return any(h.decision == winner and h.rank is not None and h.rank < depth for h in hypotheses)
