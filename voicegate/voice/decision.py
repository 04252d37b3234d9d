"""The voice decision: one probability per decision, and the grammar as the veto for meaning.

Pure logic on numbers. Every hypothesis is a text the recogniser scored as a whole sequence
(end-of-text included), log P(text, language | audio): every reading the card allows, the
refusing readings beside them, and the free transcripts of the beam search, which stand for
"something else was said" when the grammar reads them as no answer. The probability of a
decision is the sum over the hypotheses that mean it, out of the sum over all of them. Then:

1. **Veto.** When the grammar reads the best transcript as a refusal of meaning (a question,
   hedge, negation, contradiction, a near miss of a number, a number on the final card, a
   number out of range, a "yes" among several cards), that refusal is the decision. When it
   reads the single likeliest hypothesis so, nothing is released (a cancel still stands:
   "Nope." beside a likelier "not"). Scores never turn a refusal of meaning into a release.
2. **Probability.** A best transcript that reads as cancel or more time is decided so: it
   releases nothing, and the user's words say it. Otherwise the likeliest of choose k, confirm,
   cancel and more time decides when its probability reaches the stage's calibrated threshold
   (``Calibration``) and, if the best transcript reads as an answer, it is that answer.
3. **Support.** A release also needs a free transcript that the grammar reads as exactly that
   release among the first ``Calibration.support`` of a language's beam: scores alone were
   measured confirming the Hindi contradiction "haan nahin", whose transcripts ("Hannain")
   the grammar cannot read (docs/voice.md).

Everything else refuses: with the grammar's own reason when it had one ("to" alone at the
final card, "not understood"), else ``Reason.UNCLEAR``.

**Personal answers** (``fuse``, docs/voice.md "Enrolment"). Where the user taught templates,
their nearest meaning (``voicegate.voice.templates``) is combined with the verdict above. A
refusal of meaning the recogniser heard, in the transcript or as the likeliest hypothesis, and a
cancel or wait in the words, still decide. A release the templates contradict refuses: their
nearest meaning by the margin is another, or the user taught the released answer and the
nearest template by any margin means another. So does a transcript that reads as another
answer. Otherwise, on a choice among cards, the taught meaning is released when a free
transcript says it (rule 3) and its fused probability reaches the same threshold as the
recogniser alone: Bayes' rule in log-odds, the recogniser's log-odds for it plus the likelihood
ratio of the template distances, fitted on real speech (``fused_probability``). For a user who
said their speech is hard for recognisers, a clear template match may also decide on its own
(inside the user's radius), where the model opens that path (``Calibration.alone``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from voicegate.gate.types import Decision, Stage
from voicegate.reasons import Kind, Reason

# Grammar refusals that say what the words mean, not that they could not be read.
MEANING = frozenset(
    {
        Reason.QUESTION,
        Reason.HEDGE,
        Reason.NEGATION,
        Reason.CONTRADICTION,
        Reason.NUMBER_ON_FINAL,
        Reason.OUT_OF_RANGE,
        Reason.AMBIGUOUS,
        # A word the lexicon names as sounding unlike the number ("tooth", "fife"): the user
        # said a word that is not the answer. Measured: with English and Hindi on, base heard a
        # corpus "tooth" as "Tooth" and still gave card two 0.55 from other readings.
        Reason.SOUND_ALIKE,
    }
)
ANSWERS = frozenset({Kind.CHOOSE, Kind.CONFIRM, Kind.CANCEL, Kind.MORE_TIME})
UNCLEAR = Decision(Kind.REFUSE, reason=Reason.UNCLEAR)


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
class Calibration:
    """The probability an answer needs, and where the numbers came from.

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
    # the recogniser's log-odds, log(runner-up / distance) and log(radius / distance). No
    # weights: templates never make a release.
    fusion: tuple[float, float, float, float] | None = None
    # The largest margin and radius features the fusion was fitted on (``fused_probability``).
    fusion_limits: tuple[float, float] | None = None
    # What the recogniser must still give a clear match of a user whose speech is hard for
    # recognisers before the match decides "alone" (``fuse``); infinity keeps that path shut.
    alone: float = math.inf
    # The encoder window the numbers were fitted at: "full" (Whisper's 30 s) or "short" (the
    # clip and a second, voice/whisper.py); the recogniser hears at this one.
    window: str = "full"

    def need(self, stage: Stage, cards: int) -> float:
        """The threshold for a set of ``cards`` cards at ``stage``."""
        return self.card if question(stage, cards) == "card" else self.yes


def question(stage: Stage, cards: int) -> str:
    """The kind of question a set asks: "card" (which of several) or "yes" (yes or no)."""
    return "card" if stage is Stage.CHOOSE and cards > 1 else "yes"


# Nothing is released by voice through a model that was never calibrated.
UNCALIBRATED = Calibration(math.inf, math.inf, 0, "no calibration: voice releases nothing")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decision, the probability of the best answer, and which rule decided."""

    decision: Decision
    probability: float
    # "veto", "grammar", "decided", "unclear", "disagree", "unsupported", "no_answer",
    # "recogniser"; with templates also "fused", "template", "template_disagree"
    rule: str
    winner: Decision | None = None


@dataclass(frozen=True, slots=True)
class Taught:
    """What the user's own templates say about one answer (``voicegate.voice.templates``)."""

    # The nearest meaning, when it beats every other taught meaning by the margin.
    nearest: Decision | None
    # True when it also lies inside the user's radius for it: a clear match on its own.
    clear: bool
    # The user said their speech is hard for recognisers: a clear match may decide alone.
    hard: bool = False
    # The nearest template's meaning, by any margin, and every meaning the user taught.
    closest: Decision | None = None
    meanings: frozenset[Decision] = frozenset()
    # The DTW distance of the nearest meaning, of the next other meaning, and the nearest
    # meaning's radius (``templates.Match``): the evidence ``fused_probability`` weighs.
    distance: float = math.inf
    runner_up: float = math.inf
    radius: float = 0.0


def one_card(decision: Decision) -> Decision:
    """With one card open, choosing card 1 and yes release the same action: one decision."""
    return Decision(Kind.CONFIRM) if decision == Decision(Kind.CHOOSE, card=1) else decision


def posteriors(hypotheses: Sequence[Hypothesis]) -> dict[Decision, float]:
    """P(decision | audio): each decision's share of the probability of all hypotheses."""
    finite = [h for h in hypotheses if math.isfinite(h.score)]
    if not finite:
        return {}
    top = max(h.score for h in finite)
    mass: dict[Decision, float] = defaultdict(float)
    for h in finite:
        mass[h.decision] += math.exp(h.score - top)
    total = sum(mass.values())
    return {decision: m / total for decision, m in mass.items()}


def decide(
    hypotheses: Sequence[Hypothesis],
    transcript: Decision,
    stage: Stage,
    calibration: Calibration,
    cards: int = 1,
) -> Verdict:
    """The decision for one answer; ``transcript`` is the grammar's reading of the best one."""
    if _meaning(transcript):
        return Verdict(transcript, 0.0, "veto")
    if transcript.kind in (Kind.CANCEL, Kind.MORE_TIME):
        return Verdict(transcript, 0.0, "grammar")
    finite = [h for h in hypotheses if math.isfinite(h.score)]
    likeliest = max(finite, key=lambda h: h.score).decision if finite else UNCLEAR
    fallback = transcript if transcript.kind is Kind.REFUSE else UNCLEAR
    post = posteriors(finite)
    answers = {d: p for d, p in post.items() if d.kind in ANSWERS}
    if not answers:
        return Verdict(fallback, 0.0, "no_answer")
    winner = max(answers, key=lambda d: answers[d])
    probability = answers[winner]
    if not probability >= calibration.need(stage, cards):
        return Verdict(fallback, probability, "unclear", winner)
    if transcript.kind in ANSWERS and winner != transcript:
        return Verdict(UNCLEAR, probability, "disagree", winner)
    if winner.releases and _meaning(likeliest):
        return Verdict(likeliest, probability, "veto", winner)
    if winner.releases and not _supported(winner, finite, calibration.support):
        return Verdict(fallback, probability, "unsupported", winner)
    return Verdict(winner, probability, "decided", winner)


def fuse(
    verdict: Verdict,
    hypotheses: Sequence[Hypothesis],
    transcript: Decision,
    taught: Taught | None,
    stage: Stage,
    calibration: Calibration,
    cards: int = 1,
) -> Verdict:
    """The verdict of ``decide`` combined with the user's templates (module docstring)."""
    if taught is None or verdict.rule in ("veto", "grammar", "recogniser"):
        return verdict
    same = one_card if cards == 1 and stage is Stage.CHOOSE else _as_is
    released = verdict.decision
    closest = same(taught.closest) if taught.closest is not None else None
    taught_it = released in {same(m) for m in taught.meanings}
    if released.releases and closest not in (None, released) and taught_it:
        # The user taught this answer, and the answer lies nearer another one they taught.
        return Verdict(UNCLEAR, verdict.probability, "template_disagree", closest)
    if taught.nearest is None:
        return verdict
    meaning = same(taught.nearest)
    if meaning.kind not in ANSWERS or not _allowed(meaning, stage, cards):
        return verdict
    finite = [h for h in hypotheses if math.isfinite(h.score)]
    if finite and _meaning(max(finite, key=lambda h: h.score).decision):
        likeliest = max(finite, key=lambda h: h.score).decision
        return Verdict(likeliest, verdict.probability, "veto", meaning)
    if verdict.decision.releases and verdict.decision != meaning:
        return Verdict(UNCLEAR, verdict.probability, "template_disagree", meaning)
    if verdict.decision.releases:
        return verdict
    if transcript.kind in ANSWERS and transcript != meaning:
        return Verdict(UNCLEAR, verdict.probability, "template_disagree", meaning)
    probability = posteriors(finite).get(meaning, 0.0)
    # The fusion was fitted on choices among cards; a yes-or-no question has no fitted weights
    # for it, so there a template can refuse a release but never make one.
    # The same threshold as the recogniser alone: the fused probability is the recogniser's,
    # moved by what the templates add, so it is read on the scale it was calibrated on.
    # Rule 3 holds here too: no fused release that no free transcript of a language's beam
    # says. And templates only strengthen the recogniser's own likeliest answer: they never
    # overrule one it prefers (a cancel, another card).
    combined = fused_probability(calibration.fusion, probability, taught, calibration.fusion_limits)
    said = _supported(meaning, finite, calibration.support) and verdict.winner == meaning
    if said and question(stage, cards) == "card" and combined >= calibration.need(stage, cards):
        return Verdict(meaning, combined, "fused", meaning)
    if taught.hard and taught.clear and probability >= calibration.alone:
        return Verdict(meaning, probability, "template", meaning)
    return verdict


# The recogniser's probability is bounded to [1e-6, 1 - 1e-6] before its log-odds are taken,
# so a probability of 0 or 1 gives a finite feature (1e-6 is below any posterior the decision
# distinguishes: thresholds are fitted on a 0.01 grid).
_BOUND = 1e-6


def fusion_evidence(probability: float, taught: Taught) -> tuple[float, float, float] | None:
    """What the fused probability weighs for the templates' nearest meaning: the recogniser's
    log-odds for it, log(runner-up / distance) (how clearly it beats every other taught
    meaning) and log(radius / distance) (how far inside the user's own spread of takes it lies).

    None when the templates give no such evidence: no distance, no other taught meaning to beat
    (a runner-up at infinity would count as certainty), or no radius (a meaning with one take).
    """
    d1, d2, radius = taught.distance, taught.runner_up, taught.radius
    if not (0.0 < d1 <= d2 < math.inf and 0.0 < radius < math.inf):
        return None
    p = min(max(probability, _BOUND), 1.0 - _BOUND)
    return math.log(p / (1.0 - p)), math.log(d2 / d1), math.log(radius / d1)


def fused_probability(
    weights: tuple[float, float, float, float] | None,
    probability: float,
    taught: Taught,
    limits: tuple[float, float] | None = None,
) -> float:
    """P(the taught meaning was said | the recogniser's probability and the templates), in
    log-odds ``weights[1] * recogniser + templates``, where ``templates`` (the log of their
    likelihood ratio) is ``weights[0] + weights[2] * margin + weights[3] * radius``
    (``fusion_evidence``); ``benchmarks/enrol.py fused`` fits the weights.

    ``limits`` are the largest margin and radius features the fit saw: larger ones count as
    those, so the ratio never reaches past its data (a near copy of a take, at a distance near
    0, would otherwise count as certainty). A match outside the user's radius (farther than
    their own takes of that meaning lie from each other) may lower the probability, never raise
    it above the recogniser's own: measured, a breath-noised "nine" heard "One." at 0.86 lay
    outside the radius of "one" and the fitted ratio still lifted it to 0.96 (docs/voice.md,
    "Fusion with the recogniser"). 0.0 without weights or evidence, so nothing is released on
    templates the model was never fitted for.
    """
    evidence = fusion_evidence(probability, taught)
    if weights is None or evidence is None:
        return 0.0
    bias, w_recogniser, w_margin, w_radius = weights
    recogniser, margin, inside = evidence
    if limits is not None:
        margin, inside = min(margin, limits[0]), min(inside, limits[1])
    z = w_recogniser * recogniser + bias + w_margin * margin + w_radius * inside
    if inside < 0.0:  # log(radius / distance) < 0: outside the radius
        z = min(z, recogniser)
    return 0.5 * (1.0 + math.tanh(z / 2.0))  # the logistic function, with no overflow


def _as_is(decision: Decision) -> Decision:
    return decision


def _allowed(meaning: Decision, stage: Stage, cards: int) -> bool:
    """A taught card is an answer only at the choose stage and only if that card is open."""
    if meaning.kind is not Kind.CHOOSE:
        return True
    return stage is Stage.CHOOSE and meaning.card is not None and 1 <= meaning.card <= cards


def _meaning(decision: Decision) -> bool:
    return decision.kind is Kind.REFUSE and decision.reason in MEANING


def _supported(winner: Decision, hypotheses: Sequence[Hypothesis], depth: int) -> bool:
    """True when one of the first ``depth`` free transcripts of a language reads as ``winner``."""
    return any(h.decision == winner and h.rank is not None and h.rank < depth for h in hypotheses)
