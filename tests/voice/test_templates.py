"""Personal answers: features, DTW distance, the match rule and the stored form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voicegate.domain import Decision
from voicegate.reasons import Kind
from voicegate.voice import audio, templates
from voicegate.voice.templates import Template

ONE = Decision(Kind.CHOOSE, card=1)
TWO = Decision(Kind.CHOOSE, card=2)
THREE = Decision(Kind.CHOOSE, card=3)


def textbook(a: np.ndarray, b: np.ndarray) -> float:
    """DTW by the full table, the way it is written in the textbook."""
    n, m = len(a), len(b)
    table = np.full((n + 1, m + 1), np.inf)
    table[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = float(np.linalg.norm(a[i - 1] - b[j - 1]))
            table[i, j] = cost + min(table[i - 1, j - 1], table[i - 1, j], table[i, j - 1])
    return float(table[n, m] / (n + m))


def word(pitch: float, seed: int, seconds: float = 0.5) -> np.ndarray:
    """A synthetic "word": a vowel-like harmonic tone gliding from ``pitch``, a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(16_000 * seconds)) / 16_000
    glide = pitch * (1 + 0.3 * t / seconds) * (1 + 0.02 * rng.standard_normal())
    phase = 2 * np.pi * np.cumsum(glide) / 16_000
    tone = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = np.sin(np.pi * t / seconds)
    noise = 0.01 * rng.standard_normal(len(t))
    return (0.3 * tone * envelope + noise).astype(np.float32)


def taught(*pitches: float) -> list[Template]:
    """Three takes each of a word per pitch, meaning card 1, 2, 3, ..."""
    return [
        Template(Decision(Kind.CHOOSE, card=k), templates.features(word(p, seed)))
        for k, p in enumerate(pitches, 1)
        for seed in range(3)
    ]


def test_distance_equals_the_textbook_recursion() -> None:
    rng = np.random.default_rng(7)
    for n, m in ((1, 1), (3, 8), (12, 5), (20, 20)):
        a = rng.standard_normal((n, 13)).astype(np.float32)
        b = rng.standard_normal((m, 13)).astype(np.float32)
        assert templates.distance(a, b) == pytest.approx(textbook(a, b), rel=1e-6)


def test_a_take_is_at_distance_zero_from_itself() -> None:
    f = templates.features(word(200.0, 1))
    assert templates.distance(f, f) == pytest.approx(0.0, abs=1e-6)


def test_a_slower_take_of_the_same_word_lies_nearer_than_another_word() -> None:
    quick = templates.features(word(200.0, 1, 0.4))
    slow = templates.features(word(200.0, 2, 0.8))
    other = templates.features(word(330.0, 1, 0.4))
    assert templates.distance(quick, slow) < templates.distance(quick, other)


def test_silence_has_no_features_and_matches_nothing() -> None:
    silent = templates.features(np.zeros(200, dtype=np.float32))
    assert silent.shape == (0, templates.COEFFS)
    t = taught(200.0, 330.0)
    assert templates.match(silent, t, templates.radii(t)).rule == "too_short"


def test_a_louder_take_has_the_same_features() -> None:
    x = word(200.0, 1)
    np.testing.assert_allclose(
        templates.features(3 * x), templates.features(x), atol=1e-3, rtol=1e-3
    )


def test_no_templates_match_nothing() -> None:
    m = templates.match(templates.features(word(200.0, 1)), [], {})
    assert (m.meaning, m.rule) == (None, "no_templates")


def test_a_new_take_of_a_taught_word_matches_its_meaning() -> None:
    t = taught(200.0, 330.0, 500.0)
    m = templates.match(templates.features(word(330.0, 9)), t, templates.radii(t))
    assert (m.meaning, m.rule) == (TWO, "matched")


def test_a_word_that_was_never_taught_matches_nothing() -> None:
    t = taught(200.0, 330.0, 500.0)
    m = templates.match(templates.features(word(1200.0, 9)), t, templates.radii(t))
    assert m.meaning is None


def test_a_meaning_with_a_single_take_never_matches() -> None:
    t = [*taught(200.0, 500.0), Template(THREE, templates.features(word(900.0, 0)))]
    r = templates.radii(t)
    assert THREE not in r
    m = templates.match(templates.features(word(900.0, 0)), t, r)
    assert m.meaning is None


def test_each_radius_says_where_it_came_from() -> None:
    t = taught(200.0, 330.0)
    r = templates.radii(t)[ONE]
    assert r.radius == pytest.approx(
        min(r.spread * templates.SLACK, r.nearest_other * templates.REACH)
    )


def test_two_nearly_equal_meanings_are_ambiguous() -> None:
    f = templates.features(word(200.0, 1))
    t = [Template(ONE, f), Template(ONE, f), Template(TWO, f), Template(TWO, f)]
    assert templates.match(f, t, templates.radii(t)).rule == "ambiguous"


def test_stored_features_come_back_to_within_float16() -> None:
    f = templates.features(word(200.0, 1))
    back = templates.decode(templates.encode(f, "tiny.en"), "tiny.en")
    np.testing.assert_allclose(back, f, atol=1e-2, rtol=1e-3)


def test_features_of_another_model_are_refused() -> None:
    """A template is compared only with frames of the model that made it."""
    data = templates.encode(templates.features(word(200.0, 1)), "tiny.en")
    with pytest.raises(ValueError, match="another model"):
        templates.decode(data, "base")
    with pytest.raises(ValueError, match="model name"):
        templates.encode(templates.features(word(200.0, 1)), "m" * 256)


def _header(magic: bytes, tag: bytes, frames: int, coeffs: int) -> bytes:
    return magic + bytes([len(tag)]) + frames.to_bytes(2, "little") + coeffs.to_bytes(2, "little")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"VGT2",
        _header(b"XXXX", b"m", 1, 13) + b"m" + bytes(26),
        _header(b"VGT2", b"m", 2, 13) + b"m" + bytes(26),
        _header(b"VGT2", b"m", 0, 13) + b"m",
        _header(b"VGT2", b"m", 4, 0) + b"m",
        # The untagged MFCC form of earlier releases: features of another version.
        b"VGT1\x01\x00\x0d\x00" + bytes(26),
    ],
    ids=[
        "empty",
        "header only",
        "wrong magic",
        "short body",
        "no frames",
        "no coefficients",
        "earlier version",
    ],
)
def test_damaged_stored_features_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        templates.decode(data, "m")


def test_stored_features_that_are_not_finite_are_refused() -> None:
    f = templates.features(word(200.0, 1))
    f[0, 0] = np.inf
    with pytest.raises(ValueError):
        templates.decode(templates.encode(f, "m"), "m")


def test_encoder_frames_cover_the_speech_after_the_lead_in() -> None:
    """A word from 0.5 s to 1.0 s of the clip, heard after a 0.1 s lead-in: encoder frames
    of 20 ms from about 0.6 s to 1.1 s of the encoded window, frames 30 to 55."""
    quiet = np.zeros(8_000, dtype=np.float32)
    clip = np.concatenate([quiet, word(200.0, 1, 0.5), quiet])
    encoded = np.arange(1500, dtype=np.float32)[:, None] * np.ones((1, 4), dtype=np.float32)
    frames = templates.encoder_frames(encoded, clip, 1_600)
    assert abs(frames[0, 0] - 30) <= 2 and abs(frames[-1, 0] - 55) <= 2
    assert templates.encoder_frames(encoded, np.zeros(16_000, np.float32), 0).shape == (0, 4)


def test_templates_of_another_width_than_the_answer_are_never_compared() -> None:
    two = Template(Decision(Kind.CHOOSE, card=2), templates.features(word(200.0, 1)))
    wide = Template(Decision(Kind.CHOOSE, card=3), np.ones((40, 384), dtype=np.float32))
    query = templates.features(word(200.0, 2))
    got = templates.match(query, [two, wide], {})
    assert set(got.distances) == {two.meaning}


@pytest.mark.corpus
def test_real_takes_of_one_speaker_match_their_digit(fsdd: Path) -> None:
    """jackson: three takes each of "one".."three" enrolled; takes 10-14 decided."""

    def feats(digit: int, take: int) -> templates.Matrix:
        clip = audio.decode((fsdd / f"{digit}_jackson_{take}.wav").read_bytes())
        return templates.features(clip.samples)

    t = [Template(Decision(Kind.CHOOSE, card=d), feats(d, k)) for d in (1, 2, 3) for k in (0, 1, 2)]
    r = templates.radii(t)
    nearest = [
        templates.match(feats(d, k), t, r, margin=1.0) for d in (1, 2, 3) for k in range(10, 15)
    ]
    wrong = [
        m.meaning
        for m, d in zip(nearest, [d for d in (1, 2, 3) for _ in range(5)], strict=True)
        if m.meaning is not None and m.meaning.card != d
    ]
    assert wrong == []
    assert sum(m.meaning is not None for m in nearest) >= 5
