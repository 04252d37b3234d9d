"""Audio intake: uploaded bytes → a checked 16 kHz mono clip, or ``AudioRefused(reason)``.

The format is sniffed from the magic bytes. The declared content type is checked only for what
it is: a type that is not audio (``text/plain``, ``application/json``) is refused unheard, and one
of ``AUDIO_TYPES`` decides between "corrupt" and "unsupported" when the bytes match nothing.

Every limit that can be checked before decoding is: the byte size first, then the duration a
header declares, then the decoded sample count as it grows, so a small file that expands to hours
never reaches memory. A recording that ends before the length its own header declares (a WAV data
chunk, a WebM duration) is refused as corrupt: a cut-off answer may have lost its last words, and
"yes, no wait" cut short is "yes".

WAV, FLAC and OGG/Vorbis go through libsndfile (``soundfile``); OGG/Opus, WebM/Opus and MP4/AAC
(what Safari records) go through FFmpeg (``av``). Resampling to 16 kHz uses
``scipy.signal.resample_poly``.
"""

from __future__ import annotations

import io
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import soundfile
from scipy.signal import resample_poly

from voicegate.errors import AudioRefused
from voicegate.reasons import Reason

SAMPLE_RATE = 16_000

# Rates with a small up/down ratio to 16 kHz; an odd rate from a damaged header would otherwise
# make resample_poly build a filter with hundreds of thousands of taps.
SOURCE_RATES = frozenset(
    {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 88200, 96000}
)
MAX_CHANNELS = 8
# The content types the device API declares for a raw recording, one per container.
CONTENT_TYPES = ("audio/wav", "audio/flac", "audio/ogg", "audio/webm", "audio/mp4")
# Every name a recorder or browser gives those containers.
AUDIO_TYPES = frozenset(
    {
        *CONTENT_TYPES,
        "audio/wave",
        "audio/x-wav",
        "audio/vnd.wave",
        "audio/x-flac",
        "audio/opus",
        "video/webm",
        "audio/aac",
    }
)
# Labels that say nothing about the bytes; the magic bytes decide.
UNLABELLED = frozenset({"", "application/octet-stream"})
# A WebM may end this much before its declared duration (codec delay, the last frame's padding).
DURATION_SLACK = 0.1  # seconds
FRAME = 320  # 20 ms at 16 kHz, for the level statistics

Samples = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Limits:
    """What an uploaded answer may be."""

    max_bytes: int = 2_000_000
    max_seconds: float = 15.0
    # The shortest real take in the spoken-digit corpus lasts 0.14 s.
    min_seconds: float = 0.1
    # −60 dBFS; the quietest real take peaks at −40 dBFS.
    silent_peak: float = 0.001
    # Share of samples at full scale; a loud real take has at most 0.04 %.
    clipped_share: float = 0.01
    # Loud frames (95th percentile) less than this far above the quiet ones (10th): nothing
    # stands out of the noise. White noise measures about 1 dB, the flattest real take 4 dB.
    noisy_range_db: float = 2.0


@dataclass(frozen=True, slots=True, eq=False)
class Clip:
    """A decoded, checked recording: 16 kHz mono float32 samples and what they came from."""

    samples: Samples = field(repr=False)
    source_format: str
    source_rate: int
    source_channels: int
    duration: float
    peak: float
    rms: float
    sample_rate: int = SAMPLE_RATE


def decode(data: bytes, content_type: str | None = None, *, limits: Limits = Limits()) -> Clip:
    """Decode uploaded audio to a checked 16 kHz mono clip; raise ``AudioRefused`` otherwise."""
    if len(data) > limits.max_bytes:
        raise AudioRefused(Reason.TOO_LARGE, f"{len(data)} bytes")
    declared = _base_type(content_type)
    if not (declared in UNLABELLED or declared in AUDIO_TYPES or declared.startswith("audio/")):
        raise AudioRefused(Reason.UNSUPPORTED_FORMAT, f"{declared} is not audio")
    if not data:
        raise AudioRefused(Reason.TOO_SHORT, "the recording is empty")
    kind = sniff(data)
    if kind is None:
        if declared in AUDIO_TYPES:
            raise AudioRefused(Reason.CORRUPT, "the bytes match no known audio format")
        raise AudioRefused(Reason.UNSUPPORTED_FORMAT, content_type or "unknown")
    samples, rate = _guarded(kind, data, limits)
    return from_samples(samples, rate, source_format=kind, limits=limits)


def sniff(data: bytes) -> str | None:
    """The container (and codec, where the first bytes say it) named by the magic bytes."""
    head = data[:64]
    if head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE":
        return "wav"
    if head[:4] == b"fLaC":
        return "flac"
    if head[:4] == b"OggS":
        if b"OpusHead" in head:
            return "ogg/opus"
        if b"\x01vorbis" in head:
            return "ogg/vorbis"
        return "ogg"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "webm"
    if head[4:8] == b"ftyp":
        return "mp4"
    return None


def from_samples(
    samples: npt.ArrayLike,
    rate: int,
    *,
    source_format: str = "pcm",
    limits: Limits = Limits(),
) -> Clip:
    """Check raw samples (frames × channels, or mono) at ``rate`` and make a 16 kHz clip."""
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] < 1 or x.shape[1] > MAX_CHANNELS:
        raise AudioRefused(Reason.CORRUPT, f"samples of shape {x.shape}")
    if rate not in SOURCE_RATES:
        raise AudioRefused(Reason.UNSUPPORTED_FORMAT, f"sample rate {rate}")
    if not np.isfinite(x).all():
        raise AudioRefused(Reason.CORRUPT, "samples that are not numbers")
    channels = x.shape[1]
    mono = x.mean(axis=1)
    duration = len(mono) / rate
    if duration > limits.max_seconds:
        raise AudioRefused(Reason.TOO_LONG, f"{duration:.1f} s")
    if duration < limits.min_seconds:
        raise AudioRefused(Reason.TOO_SHORT, f"{duration:.3f} s")
    peak = float(np.abs(mono).max())
    if peak < limits.silent_peak:
        raise AudioRefused(Reason.SILENT, f"peak {peak:.2g}")
    # Judged on the source samples: resampling smears a flat clipped run into ringing.
    if float(np.mean(np.abs(x) >= 0.999)) >= limits.clipped_share:
        raise AudioRefused(Reason.CLIPPED)
    out = _resample(mono, rate)
    if _level_range_db(out) < limits.noisy_range_db:
        raise AudioRefused(Reason.TOO_NOISY)
    out.setflags(write=False)
    return Clip(
        samples=out,
        source_format=source_format,
        source_rate=rate,
        source_channels=channels,
        duration=len(out) / SAMPLE_RATE,
        peak=float(np.abs(out).max()),
        rms=float(np.sqrt(np.mean(np.square(out, dtype=np.float64)))),
    )


def _base_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def _resample(mono: npt.NDArray[np.float64], rate: int) -> Samples:
    if rate == SAMPLE_RATE:
        return mono.astype(np.float32)
    g = math.gcd(rate, SAMPLE_RATE)
    return np.asarray(resample_poly(mono, SAMPLE_RATE // g, rate // g), dtype=np.float32)


def _level_range_db(x: Samples) -> float:
    """How far the loud 20 ms frames stand above the quiet ones, in dB."""
    n = len(x) // FRAME
    if n < 4:
        return math.inf
    frames = x[: n * FRAME].astype(np.float64).reshape(n, FRAME)
    rms = np.sqrt(np.mean(frames * frames, axis=1))
    low, high = np.percentile(rms, [10, 95])
    if low <= 0.0:
        return math.inf
    return float(20.0 * np.log10(high / low))


def _guarded(kind: str, data: bytes, limits: Limits) -> tuple[npt.NDArray[np.float64], int]:
    """Run a third-party decoder; anything it raises on these bytes means they are corrupt.

    This is the one place where a broad ``except`` is right: libsndfile and FFmpeg raise a wide,
    version-dependent set of errors on damaged input, and an upload must never turn into a 500.
    """
    try:
        if kind in ("wav", "flac", "ogg/vorbis", "ogg"):
            return _read_soundfile(kind, data, limits)
        return _read_av(kind, data, limits)
    except AudioRefused:
        raise
    except MemoryError as exc:
        raise AudioRefused(Reason.TOO_LARGE, "out of memory while decoding") from exc
    except Exception as exc:
        raise AudioRefused(Reason.CORRUPT, type(exc).__name__) from exc


def _wav_declared_seconds(data: bytes) -> float | None:
    """Duration the RIFF header declares, or None when it does not say (streamed WAV)."""
    pos, rate, block = 12, 0, 0
    while pos + 8 <= len(data):
        tag = data[pos : pos + 4]
        (size,) = struct.unpack("<I", data[pos + 4 : pos + 8])
        if tag == b"fmt " and size >= 16 and pos + 24 <= len(data):
            rate, _, block = struct.unpack("<IIH", data[pos + 12 : pos + 22])
        elif tag == b"data":
            if size in (0, 0xFFFFFFFF) or rate == 0 or block == 0:
                return None
            return float(size) / float(block) / float(rate)
        pos += 8 + size + (size & 1)
    return None


def _wav_data_missing(data: bytes) -> bool:
    """Whether the RIFF data chunk declares more bytes than the upload holds."""
    pos = 12
    while pos + 8 <= len(data):
        tag = data[pos : pos + 4]
        (size,) = struct.unpack("<I", data[pos + 4 : pos + 8])
        if tag == b"data":
            return size not in (0, 0xFFFFFFFF) and pos + 8 + size > len(data)
        pos += 8 + size + (size & 1)
    return False


def _read_soundfile(kind: str, data: bytes, limits: Limits) -> tuple[npt.NDArray[np.float64], int]:
    if kind == "wav" and data[:4] == b"RIFF":
        declared = _wav_declared_seconds(data)
        if declared is not None and declared > limits.max_seconds:
            raise AudioRefused(Reason.TOO_LONG, f"header declares {declared:.0f} s")
        if _wav_data_missing(data):
            raise AudioRefused(Reason.CORRUPT, "the recording ends before its header says")
    with soundfile.SoundFile(io.BytesIO(data)) as f:
        rate, channels, frames = int(f.samplerate), int(f.channels), int(f.frames)
        if rate not in SOURCE_RATES or not 1 <= channels <= MAX_CHANNELS:
            raise AudioRefused(Reason.UNSUPPORTED_FORMAT, f"{rate} Hz, {channels} channels")
        cap = int(limits.max_seconds * rate) + 1
        if 0 < frames < 2**62 and frames > cap:
            raise AudioRefused(Reason.TOO_LONG, f"header declares {frames / rate:.0f} s")
        x: npt.NDArray[np.float64] = f.read(frames=cap + 1, dtype="float64", always_2d=True)
    if len(x) > cap:
        raise AudioRefused(Reason.TOO_LONG)
    if len(x) == 0:
        raise AudioRefused(Reason.CORRUPT, "no samples")
    return x, rate


_AV_FORMATS = {"ogg/opus": "ogg", "webm": "matroska", "mp4": "mp4"}


def _read_av(kind: str, data: bytes, limits: Limits) -> tuple[npt.NDArray[np.float64], int]:
    container: Any = av.open(io.BytesIO(data), mode="r", format=_AV_FORMATS[kind])
    with container:
        if not container.streams.audio:
            raise AudioRefused(Reason.CORRUPT, "no audio stream")
        stream = container.streams.audio[0]
        declared = _declared_seconds(kind, container, stream)
        if declared is not None and declared > limits.max_seconds:
            raise AudioRefused(Reason.TOO_LONG, f"header declares {declared:.0f} s")
        rate = 0
        total = 0
        chunks: list[npt.NDArray[np.float64]] = []
        for frame in container.decode(stream):
            if rate == 0:
                rate = int(frame.sample_rate)
                if rate not in SOURCE_RATES:
                    raise AudioRefused(Reason.UNSUPPORTED_FORMAT, f"{rate} Hz")
            elif int(frame.sample_rate) != rate:
                raise AudioRefused(Reason.CORRUPT, "the sample rate changes mid-stream")
            chunk = _frame_samples(frame)
            total += len(chunk)
            if total > limits.max_seconds * rate + 1:
                raise AudioRefused(Reason.TOO_LONG, "decoded past the limit")
            chunks.append(chunk)
    if not chunks:
        raise AudioRefused(Reason.CORRUPT, "no audio frames")
    if kind == "webm" and declared is not None and total / rate < declared - DURATION_SLACK:
        raise AudioRefused(Reason.CORRUPT, "the recording ends before its header says")
    return np.concatenate(chunks)[:, None], rate


def _declared_seconds(kind: str, container: Any, stream: Any) -> float | None:
    """The length the header states: the stream's, or a WebM's Segment duration.

    Only a WebM's container duration is read from its header; for Ogg and MP4 FFmpeg works it
    out from the packets that are there, which says nothing about what is missing.
    """
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if kind == "webm" and container.duration is not None:
        return float(container.duration) / av.time_base
    return None


_INT_SCALE = {"u8": 128.0, "s16": 32768.0, "s32": 2147483648.0, "s64": 2.0**63}


def _frame_samples(frame: Any) -> npt.NDArray[np.float64]:
    """One decoded frame as mono float samples.

    Converted here rather than by FFmpeg's resampler, which pads and drops samples to follow the
    frame timestamps (the first Opus frame in WebM is short), and so damages the waveform.
    """
    channels = len(frame.layout.channels)
    raw = np.asarray(frame.to_ndarray())
    x = raw.reshape(channels, -1).T if frame.format.is_planar else raw.reshape(-1, channels)
    name = frame.format.name.rstrip("p")
    if name == "u8":
        y = (x.astype(np.float64) - 128.0) / 128.0
    elif name in _INT_SCALE:
        y = x.astype(np.float64) / _INT_SCALE[name]
    else:
        y = x.astype(np.float64)
    return np.asarray(y.mean(axis=1), dtype=np.float64)
