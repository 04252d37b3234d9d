"""Audio intake: every format decodes, every refusal has its own reason, no bytes crash it."""

from __future__ import annotations

import contextlib
import io
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import require
from voicegate.errors import AudioRefused
from voicegate.reasons import Reason
from voicegate.voice.audio import Clip, Limits, decode, from_samples, sniff


def speechlike(rate: int, seconds: float = 1.0, freq: float = 440.0) -> np.ndarray:
    """A tone with a syllable-like loudness envelope, so the level checks see speech."""
    t = np.arange(int(rate * seconds)) / rate
    envelope = 0.05 + 0.95 * np.clip(np.sin(2 * np.pi * 3 * t), 0, None) ** 2
    return 0.3 * envelope * np.sin(2 * np.pi * freq * t)


def wav(x: np.ndarray, rate: int, subtype: str = "PCM_16") -> bytes:
    buf = io.BytesIO()
    soundfile.write(buf, x, rate, format="WAV", subtype=subtype)
    return buf.getvalue()


def encode(x: np.ndarray, rate: int, fmt: str) -> bytes:
    """Bytes of ``x`` in one upload format."""
    if fmt in ("wav", "flac"):
        buf = io.BytesIO()
        soundfile.write(buf, x, rate, format=fmt.upper())
        return buf.getvalue()
    if fmt == "ogg/vorbis":
        buf = io.BytesIO()
        soundfile.write(buf, x, rate, format="OGG", subtype="VORBIS")
        return buf.getvalue()
    require(shutil.which("ffmpeg") is not None, "ffmpeg")
    args = {
        "ogg/opus": ["-c:a", "libopus", "-f", "ogg"],
        "webm": ["-c:a", "libopus", "-f", "webm"],
        "mp4": ["-c:a", "aac", "-movflags", "frag_keyframe+empty_moov", "-f", "mp4"],
    }[fmt]
    cmd = ["ffmpeg", "-loglevel", "error", "-i", "pipe:0", *args, "pipe:1"]
    return subprocess.run(cmd, input=wav(x, rate), capture_output=True, check=True).stdout


FORMATS = ["wav", "flac", "ogg/vorbis", "ogg/opus", "webm", "mp4"]


def refused(data: bytes, content_type: str | None = None, **limits: float) -> Reason:
    with pytest.raises(AudioRefused) as caught:
        decode(data, content_type, limits=Limits(**limits))  # type: ignore[arg-type]
    return caught.value.reason


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_upload_format_decodes_to_16k_mono(fmt: str) -> None:
    clip = decode(encode(speechlike(48000), 48000, fmt))
    assert isinstance(clip, Clip)
    assert clip.sample_rate == 16000
    assert clip.samples.dtype == np.float32 and clip.samples.ndim == 1
    assert clip.source_format == sniff(encode(speechlike(48000), 48000, fmt))
    assert 0.9 < clip.duration < 1.2


@pytest.mark.parametrize("rate", [8000, 16000, 44100, 48000])
def test_every_sample_rate_is_resampled_to_16k_keeping_pitch_and_length(rate: int) -> None:
    clip = decode(wav(speechlike(rate, 2.0, freq=440.0), rate))
    assert clip.source_rate == rate
    assert abs(clip.duration - 2.0) < 0.01
    spectrum = np.abs(np.fft.rfft(clip.samples))
    peak_hz = np.argmax(spectrum) * 16000 / len(clip.samples)
    assert abs(peak_hz - 440.0) < 5.0


def test_stereo_is_mixed_down_to_mono() -> None:
    x = speechlike(16000)
    clip = decode(wav(np.stack([x, x], axis=1), 16000))
    assert clip.source_channels == 2 and clip.samples.ndim == 1


def test_content_type_is_only_a_hint() -> None:
    clip = decode(wav(speechlike(16000), 16000), "audio/webm")
    assert clip.source_format == "wav"


def test_samples_are_read_only() -> None:
    clip = decode(wav(speechlike(16000), 16000))
    with pytest.raises(ValueError):
        clip.samples[0] = 1.0


def test_oversized_upload_is_refused_before_decoding() -> None:
    assert refused(b"RIFF" + b"\0" * 100, max_bytes=50) == Reason.TOO_LARGE


def test_unknown_bytes_are_an_unsupported_format() -> None:
    assert refused(b"hello, this is not audio at all") == Reason.UNSUPPORTED_FORMAT
    assert refused(b"ID3\x04\0\0\0\0\0\0" + b"\xff\xfb" * 200) == Reason.UNSUPPORTED_FORMAT


def test_unknown_bytes_sent_as_audio_are_corrupt() -> None:
    assert refused(b"hello, this is not audio at all", "audio/wav") == Reason.CORRUPT


def test_an_empty_upload_is_too_short_whatever_it_is_labelled() -> None:
    assert refused(b"") == Reason.TOO_SHORT
    assert refused(b"", "audio/wav") == Reason.TOO_SHORT
    assert refused(b"", "text/plain") == Reason.UNSUPPORTED_FORMAT  # not audio at all


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_cut_after_its_header_is_corrupt(fmt: str) -> None:
    data = encode(speechlike(16000), 16000, fmt)
    assert refused(data[:24]) in {Reason.CORRUPT, Reason.TOO_SHORT}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_truncated_file_decodes_what_is_there_or_is_refused(fmt: str) -> None:
    data = encode(speechlike(16000, 2.0), 16000, fmt)
    for keep in (0.3, 0.6, 0.9):
        try:
            clip = decode(data[: int(len(data) * keep)])
        except AudioRefused as exc:
            assert exc.reason in {Reason.CORRUPT, Reason.TOO_SHORT}
        else:
            assert clip.duration <= 2.1


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_with_damaged_bytes_never_crashes(fmt: str) -> None:
    data = bytearray(encode(speechlike(16000), 16000, fmt))
    rng = np.random.default_rng(7)
    for _ in range(20):
        damaged = bytearray(data)
        for i in rng.integers(0, len(damaged), 8):
            damaged[int(i)] = int(rng.integers(0, 256))
        with contextlib.suppress(AudioRefused):
            decode(bytes(damaged))


def test_wav_header_claiming_ten_hours_is_too_long() -> None:
    data = bytearray(wav(speechlike(8000), 8000))
    at = data.find(b"data")
    data[at + 4 : at + 8] = struct.pack("<I", 10 * 3600 * 8000 * 2)
    assert refused(bytes(data)) == Reason.TOO_LONG


def test_flac_longer_than_the_limit_is_refused_by_its_header() -> None:
    buf = io.BytesIO()
    soundfile.write(buf, np.zeros(8000 * 20), 8000, format="FLAC")
    assert refused(buf.getvalue()) == Reason.TOO_LONG


def test_opus_that_decodes_past_the_limit_is_stopped() -> None:
    data = encode(speechlike(16000, 3.0), 16000, "webm")
    assert refused(data, max_seconds=1.0) == Reason.TOO_LONG


def test_nan_samples_are_corrupt() -> None:
    x = speechlike(16000)
    x[100] = np.nan
    assert refused(wav(x, 16000, subtype="FLOAT")) == Reason.CORRUPT


def test_infinite_samples_are_corrupt() -> None:
    x = speechlike(16000)
    x[100] = np.inf
    assert refused(wav(x, 16000, subtype="FLOAT")) == Reason.CORRUPT


def test_an_odd_sample_rate_is_unsupported() -> None:
    assert refused(wav(speechlike(12345), 12345)) == Reason.UNSUPPORTED_FORMAT


def test_a_too_short_recording_is_refused() -> None:
    assert refused(wav(speechlike(16000, 0.05), 16000)) == Reason.TOO_SHORT


def test_a_too_long_recording_is_refused() -> None:
    assert refused(wav(speechlike(8000, 16.0), 8000)) == Reason.TOO_LONG


def test_a_silent_recording_is_refused() -> None:
    assert refused(wav(np.zeros(16000), 16000)) == Reason.SILENT
    assert refused(wav(speechlike(16000) * 0.001, 16000)) == Reason.SILENT


def test_a_clipped_recording_is_refused() -> None:
    assert refused(wav(np.clip(speechlike(16000) * 20, -1, 1), 16000)) == Reason.CLIPPED


def test_steady_noise_without_anything_standing_out_is_too_noisy() -> None:
    noise = np.random.default_rng(3).standard_normal(32000) * 0.1
    assert refused(wav(noise, 16000)) == Reason.TOO_NOISY


def test_speech_in_noise_is_not_refused() -> None:
    x = speechlike(16000, 2.0)
    noise = np.random.default_rng(4).standard_normal(len(x))
    noise *= np.sqrt(np.mean(x**2) / np.mean(noise**2)) / 10 ** (10 / 20)
    assert isinstance(decode(wav(x + noise, 16000)), Clip)


def test_from_samples_applies_the_same_checks() -> None:
    with pytest.raises(AudioRefused) as caught:
        from_samples(np.zeros(16000), 16000)
    assert caught.value.reason == Reason.SILENT


@pytest.mark.corpus
def test_every_real_spoken_digit_is_accepted(fsdd: Path) -> None:
    for path in sorted(fsdd.glob("*.wav")):
        clip = decode(path.read_bytes(), "audio/wav")
        assert clip.source_rate == 8000


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096), st.sampled_from([None, "audio/wav", "audio/webm", "x/y"]))
def test_arbitrary_bytes_only_ever_raise_audio_refused(
    data: bytes, content_type: str | None
) -> None:
    with contextlib.suppress(AudioRefused):
        decode(data, content_type)


_VALID = {fmt: encode(speechlike(16000, 0.5), 16000, fmt) for fmt in ("wav", "flac", "ogg/vorbis")}


def _valid(fmt: str) -> bytes:
    if fmt not in _VALID:
        _VALID[fmt] = encode(speechlike(16000, 0.5), 16000, fmt)
    return _VALID[fmt]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(FORMATS),
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), max_size=12),
    st.floats(0.02, 1.0),
)
def test_mutated_valid_files_only_ever_raise_audio_refused(
    fmt: str, edits: list[tuple[float, int]], keep: float
) -> None:
    data = bytearray(_valid(fmt))
    for where, value in edits:
        data[min(int(where * len(data)), len(data) - 1)] = value
    with contextlib.suppress(AudioRefused):
        decode(bytes(data[: max(1, int(len(data) * keep))]))
