"""The rate stage on real spoken digits: replays it used to miss, and why it missed them.

Each case below was a miss of benchmarks/replay_rate.py (nicolas and yweweler, every fifth
clip, docs/voice-measurements.md) before the correlations were taken at half lags and before every
shortlisted recording was ranked on its waveform.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.signal import resample_poly

from tests.voice.test_fingerprint import sox, take
from voicegate.voice import fingerprint, rescaled
from voicegate.voice.audio import Clip, decode
from voicegate.voice.fingerprint import Library, features, load


def sox_take(fsdd: Path, name: str, effect: str, amount: str) -> Clip:
    """One take after one sox effect, through the real intake."""
    return decode(sox(fsdd / f"{name}.wav", effect, amount))


@pytest.mark.corpus
def test_a_copy_half_a_sample_off_keeps_its_near_exact_windows(fsdd: Path) -> None:
    wave = load(features(take(fsdd, "9_nicolas_5"))).wave
    # Read at twice the rate and every other sample from the second: the same recording,
    # half a 4 kHz sample later, as a replay lands by chance.
    between = resample_poly(wave.astype(np.float64), 2, 1)[1::2].astype(np.float32)
    found = rescaled.score(between, rescaled.prepare(wave))
    # Whole lags alone read its share at 0.690 (0.988 on the sample); the mean, which keeps
    # whole lags, reads 0.969.
    assert found.close >= 0.9
    assert found.reaches(rescaled.THRESHOLD, rescaled.CLOSE_THRESHOLD)


# Replays whose original was ranked first but scored under both thresholds: the scale search
# and the path read every window up to half a sample off (scores before: mean / share).
SCORED_LOW = [
    ("9_nicolas_5", "speed", "1.04"),  # 0.943 / 0.521
    ("9_nicolas_0", "speed", "0.96"),  # 0.946 / 0.521
    ("9_yweweler_18", "pitch", "68"),  # 0.944 / 0.617
    ("9_yweweler_22", "pitch", "-68"),  # 0.939 / 0.583
]


# Replays 15 % slower that scored under both thresholds against their original once the scale
# search reached them (issue 35; mean / share with the search widened, before the two fixes
# below): the upload's band-pass phase, read at scaled frequencies, kept every window off
# (``rescaled._unphase``); the scale search's band, unmoved, was 18 % off (``CENTRES``).
SCALED_FAR = [
    ("2_nicolas_5", "speed", "0.85"),  # 0.939 / 0.445; 0.943 / 0.432 at its exact scale
    ("3_yweweler_40", "speed", "0.85"),  # 0.367 / 0.000: the scale search lost its scale
]


@pytest.mark.corpus
@pytest.mark.parametrize(("name", "effect", "amount"), SCORED_LOW + SCALED_FAR)
def test_a_replay_scores_as_a_reuse_against_its_original(
    fsdd: Path, name: str, effect: str, amount: str
) -> None:
    original = rescaled.prepare(load(features(take(fsdd, name))).wave)
    replay = load(features(sox_take(fsdd, name, effect, amount))).wave
    found = rescaled.score(replay, original)
    assert found.reaches(rescaled.THRESHOLD, rescaled.CLOSE_THRESHOLD)


@pytest.fixture(scope="module")
def yweweler(fsdd: Path) -> Library:
    """All 500 takes of one speaker, as the benchmark checks a replay against."""
    library = Library()
    for path in sorted(fsdd.glob("*_yweweler_*.wav")):
        library.add(path.stem, load(features(take(fsdd, path.stem))))
    return library


# Replays whose original the envelope ranking put past its best 16 of the 100 shortlisted
# (its place there before), although the full score finds them.
RANKED_LOW = [
    ("4_yweweler_5", "speed", "0.96"),  # 47th
    ("2_yweweler_40", "speed", "1.08"),  # 51st
    ("5_yweweler_18", "pitch", "-68"),  # 38th
]


@pytest.mark.corpus
@pytest.mark.parametrize(("name", "effect", "amount"), RANKED_LOW)
def test_a_replay_is_found_among_500_takes_of_its_speaker(
    fsdd: Path, yweweler: Library, name: str, effect: str, amount: str
) -> None:
    replay = load(features(sox_take(fsdd, name, effect, amount)))
    assert yweweler.match(replay, rate_threshold=None) is None  # the exact stage misses it
    found = yweweler.match(replay)
    assert found is not None and found[0] == name and found[2] == "rate"


def test_the_rate_stage_undoes_the_band_pass_the_fingerprint_applied() -> None:
    assert np.array_equal(rescaled.STORED_BAND, fingerprint._BAND)
