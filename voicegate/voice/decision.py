"""The voice decision: one probability per decision, and the grammar as the veto for meaning.

Pure logic on numbers. Every hypothesis is a text the recogniser scored as a whole sequence
(end-of-text included), log P(text, language | audio): every reading the card allows, the
refusing readings beside them, and the free transcripts of the beam search, which stand for
"something else was said" when the grammar reads them as no answer. The probability of a
decision is the sum over the hypotheses that mean it, out of the sum over all of them. Then:

1. **Veto.** When the grammar reads the best transcript as a refusal of meaning (a question,
   hedge, negation, contradiction, a number on the final card, a number out of range, a "yes"
   among several cards), that refusal is the decision. When it reads the single likeliest
   hypothesis so, nothing is released (a cancel still stands: "Nope." beside a likelier
   "not"). Scores never turn a refusal of meaning into a release.
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
answer. Otherwise the taught meaning is released when the recogniser gives it at least
``Calibration.fused`` (lower than the threshold for the recogniser alone, because two
independent kinds of evidence agree), or, for a user who said their speech is hard for
recognisers, when the template match is clear on its own (inside the user's radius).
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
    # The probability a taught meaning needs when the user's templates agree (``fuse``).
    fused: float = math.inf
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
    # ``fused`` was fitted on choices among cards; a yes-or-no question has no fitted threshold
    # for it, so there a template can refuse a release but never make one.
    if question(stage, cards) == "card" and probability >= calibration.fused:
        return Verdict(meaning, probability, "fused", meaning)
    if taught.hard and taught.clear and probability >= calibration.alone:
        return Verdict(meaning, probability, "template", meaning)
    return verdict


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
