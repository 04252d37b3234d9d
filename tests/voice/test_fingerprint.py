"""Replay fingerprint: replays are refused after every transformation, new takes are not."""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile
from scipy.signal import resample_poly

from tests.conftest import require
from voicegate.clock import ManualClock
from voicegate.domain import StoredFingerprint
from voicegate.errors import AudioRefused
from voicegate.reasons import Reason
from voicegate.voice import rescaled
from voicegate.voice.audio import Clip, decode, from_samples
from voicegate.voice.fingerprint import (
    SHORTLIST,
    THRESHOLD,
    WHITE_THRESHOLD,
    Library,
    ReplayGuard,
    features,
    load,
    similarity,
    whitened_similarity,
)

DAY = 24 * 3600.0


class DictFingerprints:
    """The smallest FingerprintStore: a list, as every backend must behave."""

    def __init__(self) -> None:
        self.rows: list[StoredFingerprint] = []

    async def add(self, fingerprint: StoredFingerprint) -> None:
        self.rows.append(fingerprint)

    async def since(self, user: str, since: float) -> list[StoredFingerprint]:
        found = [r for r in self.rows if r.user == user and r.created_at >= since]
        return sorted(found, key=lambda r: r.created_at)

    async def prune(self, before: float) -> int:
        old = [r for r in self.rows if r.created_at < before]
        self.rows = [r for r in self.rows if r.created_at >= before]
        return len(old)


def wav(x: np.ndarray, rate: int = 16000, subtype: str = "PCM_16") -> bytes:
    buf = io.BytesIO()
    soundfile.write(buf, x, rate, format="WAV", subtype=subtype)
    return buf.getvalue()


def ffmpeg(data: bytes, *args: str) -> bytes:
    require(shutil.which("ffmpeg") is not None, "ffmpeg")
    cmd = ["ffmpeg", "-loglevel", "error", "-i", "pipe:0", *args, "pipe:1"]
    return subprocess.run(cmd, input=data, capture_output=True, check=True).stdout


def noisy(x: np.ndarray, snr_db: float) -> np.ndarray:
    n = np.random.default_rng(11).standard_normal(len(x))
    mixed: np.ndarray = x + n * np.sqrt(np.mean(x**2) / np.mean(n**2)) / 10 ** (snr_db / 20)
    return mixed


REPLAYS: dict[str, Callable[[np.ndarray], bytes]] = {
    "same bytes": lambda x: wav(x),
    "resampled to 44.1 kHz": lambda x: wav(resample_poly(x, 441, 160), 44100),
    "resampled to 8 kHz": lambda x: wav(resample_poly(x, 1, 2), 8000),
    "6 dB louder": lambda x: wav(x * 2.0, subtype="FLOAT"),
    "6 dB quieter": lambda x: wav(x * 0.5),
    "20 dB SNR noise": lambda x: wav(noisy(x, 20), subtype="FLOAT"),
    "padded with silence": lambda x: wav(np.r_[np.zeros(8000), x, np.zeros(12000)]),
    "trimmed 10 %": lambda x: wav(x[len(x) // 20 : len(x) - len(x) // 20]),
    "mp3 round trip": lambda x: ffmpeg(
        ffmpeg(wav(x), "-c:a", "libmp3lame", "-b:a", "64k", "-f", "mp3"), "-f", "wav"
    ),
    "opus upload": lambda x: ffmpeg(wav(x), "-c:a", "libopus", "-b:a", "24k", "-f", "webm"),
    "trimmed 20 %": lambda x: wav(x[len(x) // 10 : len(x) - len(x) // 10]),
    # Sounds the same, and correlates at -1 (issue 35: `sox in.wav out.wav vol -1`).
    "sign flipped": lambda x: wav(-x),
}


def take(fsdd: Path, name: str) -> Clip:
    return decode((fsdd / f"{name}.wav").read_bytes())


def tone_clip(freq: float, seed: int) -> Clip:
    rng = np.random.default_rng(seed)
    t = np.arange(16000) / 16000
    x = np.sin(2 * np.pi * freq * t) * (0.2 + np.clip(np.sin(2 * np.pi * 3 * t), 0, None))
    return from_samples(0.2 * x + 0.01 * rng.standard_normal(len(t)), 16000)


def test_features_round_trip_and_a_clip_matches_itself() -> None:
    clip = tone_clip(300, 1)
    data = features(clip)
    assert isinstance(data, bytes)
    assert load(data).digest == load(features(clip)).digest
    assert similarity(data, data) == 1.0


def test_features_of_another_version_are_rejected_on_load() -> None:
    with pytest.raises(ValueError):
        load(b"VGF0" + b"\0" * 60)
    with pytest.raises(ValueError):
        load(b"")


async def test_the_same_clip_twice_is_refused_and_not_remembered_again() -> None:
    store = DictFingerprints()
    guard = ReplayGuard(store, clock=ManualClock(1_000_000.0))
    clip = tone_clip(300, 1)
    first = await guard.check_and_remember("ada", clip)
    with pytest.raises(AudioRefused) as caught:
        await guard.check_and_remember("ada", clip)
    assert caught.value.reason == Reason.AUDIO_REUSED
    assert [r.id for r in store.rows] == [first]


async def test_a_clip_is_only_a_replay_for_the_same_user() -> None:
    guard = ReplayGuard(DictFingerprints(), clock=ManualClock(1_000_000.0))
    clip = tone_clip(300, 1)
    await guard.check_and_remember("ada", clip)
    assert await guard.check_and_remember("bob", clip)


async def test_a_second_replica_sees_uploads_made_through_the_first() -> None:
    store = DictFingerprints()
    clock = ManualClock(1_000_000.0)
    one, two = ReplayGuard(store, clock=clock), ReplayGuard(store, clock=clock)
    await two.check_and_remember("ada", tone_clip(500, 2))  # two builds its cache now
    clock.now += 5
    await one.check_and_remember("ada", tone_clip(300, 1))
    clock.now += 5
    with pytest.raises(AudioRefused) as caught:
        await two.check_and_remember("ada", tone_clip(300, 1))
    assert caught.value.reason == Reason.AUDIO_REUSED


async def test_a_recording_older_than_the_retention_is_forgotten() -> None:
    store = DictFingerprints()
    clock = ManualClock(1_000_000.0)
    await ReplayGuard(store, retention=30 * DAY, clock=clock).check_and_remember(
        "ada", tone_clip(300, 1)
    )
    clock.now += 31 * DAY
    fresh = ReplayGuard(store, retention=30 * DAY, clock=clock)
    assert await fresh.check_and_remember("ada", tone_clip(300, 1))


async def test_a_long_running_guard_rebuilds_its_cache_after_the_retention() -> None:
    store = DictFingerprints()
    clock = ManualClock(1_000_000.0)
    guard = ReplayGuard(store, retention=30 * DAY, clock=clock)
    await guard.check_and_remember("ada", tone_clip(300, 1))
    clock.now += 31 * DAY
    assert await guard.check_and_remember("ada", tone_clip(300, 1))


def test_the_original_is_found_among_more_clips_than_the_shortlist() -> None:
    library = Library()
    for i in range(SHORTLIST * 3):
        library.add(f"other{i}", load(features(tone_clip(200 + 7 * i, 100 + i))))
    library.add("original", load(features(tone_clip(300, 1))))
    found = library.match(load(features(tone_clip(300, 1))))
    assert found is not None and found[0] == "original"


@pytest.mark.corpus
@pytest.mark.parametrize("transform", sorted(REPLAYS))
async def test_a_replayed_real_take_is_refused_after_each_transformation(
    fsdd: Path, transform: str
) -> None:
    guard = ReplayGuard(DictFingerprints(), clock=ManualClock(1_000_000.0))
    names = ["2_theo_17", "7_jackson_3", "5_nicolas_21", "9_yweweler_40"]
    for name in names:
        await guard.check_and_remember("ada", take(fsdd, name))
    for name in names:
        original = take(fsdd, name).samples.astype(np.float64)
        replay = decode(REPLAYS[transform](original))
        with pytest.raises(AudioRefused) as caught:
            await guard.check_and_remember("ada", replay)
        assert caught.value.reason == Reason.AUDIO_REUSED


@pytest.mark.corpus
async def test_new_takes_of_the_same_digit_by_the_same_speaker_are_not_flagged(
    fsdd: Path,
) -> None:
    store = DictFingerprints()
    guard = ReplayGuard(store, clock=ManualClock(1_000_000.0))
    for speaker in ("jackson", "nicolas", "theo", "yweweler"):
        for n in range(15):
            await guard.check_and_remember(speaker, take(fsdd, f"3_{speaker}_{n}"))
    assert len(store.rows) == 60


@pytest.mark.corpus
def test_similarity_of_distinct_takes_stays_below_the_threshold(fsdd: Path) -> None:
    prints = [load(features(take(fsdd, f"6_theo_{n}"))) for n in range(10)]
    scores = [similarity(a, b) for i, a in enumerate(prints) for b in prints[i + 1 :]]
    assert max(scores) < THRESHOLD


def sox(path: Path, *effect: str) -> bytes:
    """The file after one sox effect (through a file, so the WAV header has its length)."""
    require(shutil.which("sox") is not None, "sox")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out.wav"
        subprocess.run(["sox", str(path), str(out), *effect], check=True, capture_output=True)
        return out.read_bytes()


# Takes of every speaker; jackson and theo are the speakers the rate threshold was fitted on.
RATE_TAKES = ["2_theo_17", "7_jackson_3", "5_nicolas_21", "9_yweweler_40"]


async def refused_after(fsdd: Path, *effect: str) -> list[Reason | None]:
    """For each take: remember it, then send it again after ``effect``; the refusal reasons."""
    guard = ReplayGuard(DictFingerprints(), clock=ManualClock(1_000_000.0))
    for name in RATE_TAKES:
        await guard.check_and_remember("ada", take(fsdd, name))
    reasons: list[Reason | None] = []
    for name in RATE_TAKES:
        try:
            await guard.check_and_remember("ada", decode(sox(fsdd / f"{name}.wav", *effect)))
        except AudioRefused as refused:
            reasons.append(refused.reason)
        else:
            reasons.append(None)
    return reasons


@pytest.mark.corpus
@pytest.mark.parametrize(
    "factor", ["1.04", "0.96", "1.08", "0.92", "1.10", "0.90", "1.12", "0.88", "1.15", "0.85"]
)
async def test_speed_changed_replay_is_refused(fsdd: Path, factor: str) -> None:
    assert await refused_after(fsdd, "speed", factor) == [Reason.AUDIO_REUSED] * 4


@pytest.mark.corpus
@pytest.mark.parametrize("cents", ["68", "-68"])
async def test_pitch_changed_replay_is_refused(fsdd: Path, cents: str) -> None:
    # 68 cents is a 4 % change of pitch at the same duration.
    assert await refused_after(fsdd, "pitch", cents) == [Reason.AUDIO_REUSED] * 4


@pytest.mark.corpus
def test_the_rate_stage_finds_the_original_among_other_takes(fsdd: Path) -> None:
    library = Library()
    for n in range(20):
        library.add(f"take{n}", load(features(take(fsdd, f"4_nicolas_{n}"))))
    replay = load(features(decode(sox(fsdd / "4_nicolas_7.wav", "speed", "1.08"))))
    found = library.match(replay)
    assert found is not None and found[0] == "take7" and found[2] == "rate"
    assert library.match(replay, rate_threshold=None) is None


@pytest.mark.corpus
def test_new_takes_of_the_same_digit_pass_the_rate_stage(fsdd: Path) -> None:
    library = Library()
    for n in range(10):
        library.add(f"take{n}", load(features(take(fsdd, f"3_theo_{n}"))))
    for n in range(10, 20):
        assert library.match(load(features(take(fsdd, f"3_theo_{n}")))) is None


def test_a_rate_score_is_a_reuse_when_either_part_reaches_its_threshold() -> None:
    assert rescaled.Score(mean=0.96, close=0.1).reaches(0.95, 0.70)
    assert rescaled.Score(mean=0.90, close=0.75).reaches(0.95, 0.70)
    assert not rescaled.Score(mean=0.94, close=0.69).reaches(0.95, 0.70)
    assert not rescaled.Score(mean=0.90, close=0.75).reaches(0.95, None)


# Replays whose mean correlation stays under 0.95 while most windows line up almost exactly
# (measured with benchmarks/replay_rate.py's scores; jackson and theo, the fit speakers).
CLOSE_REPLAYS = [
    ("5_theo_36", "pitch", "68"),
    ("0_jackson_18", "pitch", "-68"),
    ("9_jackson_45", "pitch", "-68"),
]


@pytest.mark.corpus
@pytest.mark.parametrize(("name", "effect", "amount"), CLOSE_REPLAYS)
def test_a_wsola_replay_is_found_by_its_near_exact_windows(
    fsdd: Path, name: str, effect: str, amount: str
) -> None:
    digit, speaker, _ = name.split("_")
    library = Library()
    for n in range(0, 50, 5):
        library.add(f"take{n}", load(features(take(fsdd, f"{digit}_{speaker}_{n}"))))
    original = int(name.split("_")[2])
    library.add(f"take{original}", load(features(take(fsdd, name))))
    replay = load(features(decode(sox(fsdd / f"{name}.wav", effect, amount))))
    found = library.match(replay)
    assert found is not None and found[0] == f"take{original}" and found[2] == "rate"
    # The mean correlation alone misses it: the near-exact share is what finds it.
    assert library.match(replay, close_threshold=None) is None


@pytest.mark.corpus
def test_new_takes_stay_under_the_near_exact_threshold(fsdd: Path) -> None:
    # theo's "six" and "eight" hold the fit speakers' highest near-exact shares of new takes.
    for digit in ("6", "8"):
        stored = [
            rescaled.prepare(load(features(take(fsdd, f"{digit}_theo_{n}"))).wave)
            for n in range(12, 16)
        ]
        for n in range(12, 16):
            upload = load(features(take(fsdd, f"{digit}_theo_{n}"))).wave
            for i, wave in enumerate(stored):
                if i + 12 < n:  # the later take as the upload, as the benchmark does
                    assert rescaled.score(upload, wave).close < rescaled.CLOSE_THRESHOLD


def aac(x: np.ndarray, bitrate: str) -> bytes:
    """A 48 kHz recording through AAC in MP4 and back to WAV, as issue 35's probe made it
    (`ffmpeg -i in.wav -c:a aac -b:a 32k out.m4a`, then `ffmpeg -i out.m4a out.wav`)."""
    require(shutil.which("ffmpeg") is not None, "ffmpeg")
    with tempfile.TemporaryDirectory() as folder:
        source, coded, back = (Path(folder) / name for name in ("in.wav", "out.m4a", "out.wav"))
        source.write_bytes(wav(resample_poly(x, 3, 1), 48000))
        encode = ["-i", str(source), "-c:a", "aac", "-b:a", bitrate, str(coded)]
        for args in (encode, ["-i", str(coded), str(back)]):
            subprocess.run(["ffmpeg", "-loglevel", "error", *args], check=True, capture_output=True)
        return back.read_bytes()


# Takes whose AAC replays at 24 and 32 kbit/s from 48 kHz both stages passed before the whitened
# score (exact 0.916-0.920, rate stage mean under 0.93; benchmarks/replay.py's AAC rows).
AAC_TAKES = ["5_yweweler_0", "5_nicolas_0", "9_yweweler_0", "1_yweweler_0"]


@pytest.mark.corpus
@pytest.mark.parametrize("bitrate", ["24k", "32k", "48k"])
async def test_an_aac_replay_from_a_48_khz_recording_is_refused(fsdd: Path, bitrate: str) -> None:
    guard = ReplayGuard(DictFingerprints(), clock=ManualClock(1_000_000.0))
    for name in AAC_TAKES:
        await guard.check_and_remember("ada", take(fsdd, name))
    for name in AAC_TAKES:
        replay = decode(aac(take(fsdd, name).samples.astype(np.float64), bitrate))
        with pytest.raises(AudioRefused) as caught:
            await guard.check_and_remember("ada", replay)
        assert caught.value.reason == Reason.AUDIO_REUSED


@pytest.mark.corpus
def test_an_aac_replay_under_the_exact_threshold_is_found_by_its_whitened_score(
    fsdd: Path,
) -> None:
    library = Library()
    for n in range(0, 50, 7):
        library.add(f"take{n}", load(features(take(fsdd, f"5_nicolas_{n}"))))
    replay = load(
        features(decode(aac(take(fsdd, "5_nicolas_0").samples.astype(np.float64), "32k")))
    )
    assert library.match(replay, rate_threshold=None, white_threshold=None) is None
    found = library.match(replay, rate_threshold=None)
    assert found is not None and found[0] == "take0" and found[2] == "whitened"


@pytest.mark.corpus
def test_new_takes_stay_under_the_whitened_threshold(fsdd: Path) -> None:
    # 8_theo_5 and 8_theo_4 are the fit speakers' closest pair under the exact threshold (0.852).
    prints = [load(features(take(fsdd, f"8_theo_{n}"))) for n in range(6)]
    scores = [whitened_similarity(a, b) for i, a in enumerate(prints) for b in prints[i + 1 :]]
    assert max(scores) < WHITE_THRESHOLD


CORPUS_CLIPS = Path(__file__).resolve().parents[2] / "fixtures" / "audio" / "corpus" / "clips"


@pytest.mark.corpus
async def test_an_opus_8k_replay_with_pink_noise_is_refused(fsdd: Path) -> None:
    # Corpus case 0712 replays case 0439 (5_nicolas_20) through Opus at 8 kbit/s and pink noise
    # at 20 dB SNR: the exact stage scores it 0.888, the rate stage 0.838 (share 0.119); the
    # whitened score, 0.876, finds it (a known miss before that score).
    guard = ReplayGuard(DictFingerprints(), clock=ManualClock(1_000_000.0))
    await guard.check_and_remember("u1", take(fsdd, "5_nicolas_20"))
    replay = (CORPUS_CLIPS / "0712-replay-en-of0439-codecopus-snr20pink.flac").read_bytes()
    with pytest.raises(AudioRefused) as caught:
        await guard.check_and_remember("u1", decode(replay))
    assert caught.value.reason == Reason.AUDIO_REUSED
