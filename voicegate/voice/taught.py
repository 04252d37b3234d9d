"""What a user's own templates say about one answer, and the likelihood ratio they give. Pure.

``Taught`` is the evidence of the templates (``voicegate.voice.templates``) about an answer;
``fused_probability`` weighs it with the recogniser's probability by Bayes' rule in log-odds,
for the voice decision's ``fuse`` (``voicegate.voice.decision``; docs/voice.md, "Fusion with
the recogniser").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from voicegate.domain import Decision

__all__ = ["Taught", "fused_probability", "fusion_evidence"]


@dataclass(frozen=True, slots=True)
class Taught:
    """What the user's own templates say about one answer (``voicegate.voice.templates``)."""

    # The nearest meaning, when it beats every other taught meaning by the margin, and whether
    # it also lies inside the user's radius for it (a clear match on its own).
    nearest: Decision | None
    clear: bool
    # The user said their speech is hard for recognisers: a clear match may decide alone.
    hard: bool = False
    # Every taught meaning's DTW distance (to its nearest template), and the radius of each
    # meaning with two takes or more (``templates.radii``), which ``fused_probability`` weighs.
    distances: Mapping[Decision, float] = field(default_factory=dict)
    radii: Mapping[Decision, float] = field(default_factory=dict)


# The recogniser's probability is bounded to [1e-6, 1 - 1e-6] before its log-odds are taken,
# so a probability of 0 or 1 gives a finite feature (1e-6 is below any posterior the decision
# distinguishes: thresholds are fitted on a 0.01 grid).
_BOUND = 1e-6


def fusion_evidence(
    probability: float, taught: Taught, meaning: Decision, anywhere: bool = False
) -> tuple[float, float, float] | None:
    """What the fused probability weighs for ``meaning``: the recogniser's log-odds for it,
    log(other / distance), ``distance`` that of the nearest template of ``meaning`` and
    ``other`` that of any other taught meaning (below 0 when another is nearer), and
    log(radius / distance), how far inside the user's spread of takes of it (below 0: outside).

    None when the templates say nothing about it: the answer lies outside every taught
    meaning's radius (far from all of them), ``meaning`` was not taught or has no radius (one
    take), or no other meaning was taught (beating nothing is no evidence). ``anywhere`` drops
    the first of those (the fit's set, ``benchmarks/fusion.py``, spans every distance).
    """
    distances, radii = taught.distances, taught.radii
    d1 = distances.get(meaning, math.inf)
    d2 = min((d for m, d in distances.items() if m != meaning), default=math.inf)
    radius = radii.get(meaning, 0.0)
    if not (0.0 < d1 < math.inf and 0.0 < d2 < math.inf and 0.0 < radius < math.inf):
        return None
    if not anywhere and not any(d <= radii.get(m, 0.0) for m, d in distances.items()):
        return None
    p = min(max(probability, _BOUND), 1.0 - _BOUND)
    return math.log(p / (1.0 - p)), math.log(d2 / d1), math.log(radius / d1)


def fused_probability(
    weights: tuple[float, float, float, float] | None,
    probability: float,
    taught: Taught,
    meaning: Decision,
    limits: tuple[float, float] | None = None,
) -> float | None:
    """P(``meaning`` was said | the recogniser's probability of it and the templates), in
    log-odds ``weights[1] * recogniser + templates``, where ``templates`` (the log of their
    likelihood ratio) is ``weights[0] + weights[2] * margin + weights[3] * radius``
    (``fusion_evidence``); ``benchmarks/fusion.py`` fits the weights. A template of
    another meaning nearer than every one of ``meaning`` gives a margin below 0, and so lowers
    the probability by its ratio; it never refuses on its own.

    ``limits`` are the largest margin and radius features the fit saw: larger ones count as
    those, so the ratio never reaches past its data (a near copy of a take, at a distance near
    0, would otherwise count as certainty). A match outside the user's radius of ``meaning``
    (farther than their own takes of it lie from each other) may lower the probability, never
    raise it above the recogniser's own: measured, a breath-noised "nine" heard "One." at 0.86
    lay outside the radius of "one" and a fitted ratio still lifted it to 0.96
    (docs/voice-measurements.md, "Fusion with the recogniser"). None where the templates say
    nothing (``fusion_evidence``) or the model has no fitted weights: then the recogniser
    decides alone.
    """
    evidence = fusion_evidence(probability, taught, meaning)
    if weights is None or evidence is None:
        return None
    bias, w_recogniser, w_margin, w_radius = weights
    recogniser, margin, inside = evidence
    if limits is not None:
        margin, inside = min(margin, limits[0]), min(inside, limits[1])
    z = w_recogniser * recogniser + bias + w_margin * margin + w_radius * inside
    if inside < 0.0:  # log(radius / distance) < 0: outside the radius
        z = min(z, recogniser)
    return 0.5 * (1.0 + math.tanh(z / 2.0))  # the logistic function, with no overflow
