"""Recordings for the hostile-input tests, made here: a speech-like burst in every accepted format,
and the damaged, lying and oversized variants of them."""

from __future__ import annotations

import functools
import io
import struct
from fractions import Fraction

import av
import numpy as np
import numpy.typing as npt
import soundfile as sf

FORMATS = ("wav", "flac", "ogg/vorbis", "ogg/opus", "webm/opus", "mp4/aac")
CONTENT_TYPES = {
    "wav": "audio/wav",
    "flac": "audio/flac",
    "ogg/vorbis": "audio/ogg",
    "ogg/opus": "audio/ogg",
    "webm/opus": "audio/webm",
    "mp4/aac": "audio/mp4",
}


def burst(rate: int = 16_000, seconds: float = 1.0, seed: int = 0) -> npt.NDArray[np.float32]:
    """A tone burst in quiet noise: passes every level check the way a short answer does."""
    n = int(rate * seconds)
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    x = 0.002 * rng.standard_normal(n)
    middle = slice(n // 4, 3 * n // 4)
    x[middle] += 0.3 * np.sin(2 * np.pi * 300 * t[middle])
    return x.astype(np.float32)


def encode(fmt: str, samples: npt.NDArray[np.float32] | None = None, rate: int = 16_000) -> bytes:
    """``samples`` (default: a burst) as ``fmt`` bytes."""
    x = burst(rate) if samples is None else samples
    if fmt in ("wav", "flac", "ogg/vorbis"):
        out = io.BytesIO()
        container, subtype = ("OGG", "VORBIS") if fmt == "ogg/vorbis" else (fmt.upper(), "PCM_16")
        sf.write(out, x, rate, format=container, subtype=subtype)
        return out.getvalue()
    if fmt == "mp4/aac":
        return _aac(x, rate)
    return _opus("ogg" if fmt == "ogg/opus" else "webm", x, rate)


def _aac(
    x: npt.NDArray[np.float32], rate: int, frames: int = 1, bit_rate: int | None = None
) -> bytes:
    """AAC in a fragmented MP4, as Safari's recorder writes it; ``frames`` copies of ``x``."""
    out = io.BytesIO()
    with av.open(
        out, mode="w", format="mp4", options={"movflags": "frag_keyframe+empty_moov"}
    ) as c:
        stream = c.add_stream("aac", rate=rate)
        stream.layout = "mono"
        if bit_rate is not None:
            stream.bit_rate = bit_rate
        for i in range(frames):
            frame = av.AudioFrame.from_ndarray(x[None, :], format="fltp", layout="mono")
            frame.sample_rate = rate
            frame.pts = i * len(x)
            for packet in stream.encode(frame):
                c.mux(packet)
        for packet in stream.encode(None):
            c.mux(packet)
    return out.getvalue()


def _opus(container: str, x: npt.NDArray[np.float32], rate: int) -> bytes:
    opus_rate = 48_000
    y = np.interp(
        np.arange(int(len(x) * opus_rate / rate)) * rate / opus_rate, np.arange(len(x)), x
    )
    out = io.BytesIO()
    with av.open(out, mode="w", format=container) as c:
        stream = c.add_stream("libopus", rate=opus_rate)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(
            y.astype(np.float32)[None, :], format="flt", layout="mono"
        )
        frame.sample_rate = opus_rate
        for packet in stream.encode(frame):
            c.mux(packet)
        for packet in stream.encode(None):
            c.mux(packet)
    return out.getvalue()


def truncated(data: bytes) -> bytes:
    """The first third of a recording: headers intact, the stream cut off."""
    return data[: max(64, len(data) // 3)]


def corrupted(data: bytes, seed: int = 7) -> bytes:
    """Every byte after the first 64 scrambled: the container is recognised, its content junk."""
    rng = np.random.default_rng(seed)
    junk = rng.integers(0, 256, size=len(data) - 64, dtype=np.uint8).tobytes()
    return data[:64] + junk


def wav_header(
    *, rate: int, channels: int = 1, bits: int = 16, data_size: int, fmt: int = 1
) -> bytes:
    """A RIFF/WAVE header that declares ``data_size`` bytes of ``rate`` Hz audio."""
    block = channels * bits // 8
    fmt_chunk = struct.pack("<HHIIHH", fmt, channels, rate, rate * block, block, bits)
    riff_size = min(0xFFFFFFFF, 4 + 8 + len(fmt_chunk) + 8 + data_size)
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt_chunk))
        + fmt_chunk
        + b"data"
        + struct.pack("<I", min(0xFFFFFFFF, data_size))
    )


def wav_claiming_ten_hours() -> bytes:
    """A WAV whose header declares ten hours at 16 kHz, followed by one real second."""
    pcm = (burst() * 32767).astype("<i2").tobytes()
    return wav_header(rate=16_000, data_size=10 * 3600 * 16_000 * 2) + pcm


def wav_with_giant_data_size() -> bytes:
    """A tiny WAV declaring a 4 GiB data chunk: a decoder trusting it would allocate that."""
    return wav_header(rate=48_000, channels=2, data_size=0xFFFFFFFE) + b"\0" * 4096


def wav_float_with_nan() -> bytes:
    """A 32-bit float WAV whose samples include NaN and infinities."""
    x = burst().astype("<f4")
    x[100:200] = np.nan
    x[300:310] = np.inf
    return wav_header(rate=16_000, bits=32, fmt=3, data_size=x.nbytes) + x.tobytes()


def wav_at_rate(rate: int) -> bytes:
    """A valid-looking WAV at an odd sample rate."""
    pcm = (burst(16_000) * 32767).astype("<i2").tobytes()
    return wav_header(rate=rate, data_size=len(pcm)) + pcm


@functools.cache
def flac_bomb(seconds: int = 600) -> bytes:
    """Ten minutes of silence-plus-tone as FLAC: a few KiB that decode to 10 million samples."""
    n = seconds * 16_000
    x = np.zeros(n, dtype=np.float32)
    x[:16_000] = burst()
    out = io.BytesIO()
    sf.write(out, x, 16_000, format="FLAC", subtype="PCM_16")
    return out.getvalue()


@functools.cache
def vorbis_bomb(seconds: int = 600) -> bytes:
    """Ten minutes of mostly silence as OGG/Vorbis: a few dozen KiB for 10 million samples."""
    out = io.BytesIO()
    with sf.SoundFile(out, "w", 16_000, 1, format="OGG", subtype="VORBIS") as f:
        f.write(burst())
        # A second at a time: libsndfile's Vorbis encoder crashes on one very large write.
        quiet = np.zeros(16_000, dtype=np.float32)
        for _ in range(seconds - 1):
            f.write(quiet)
    return out.getvalue()


@functools.cache
def aac_bomb(seconds: int = 600) -> bytes:
    """Ten minutes of AAC in a fragmented MP4 (no duration in its header) under the upload
    limit: a second of burst, then silence at a low bit rate."""
    quiet = np.zeros(16_000, dtype=np.float32)
    return _aac(np.concatenate([burst(), quiet]), 16_000, frames=seconds // 2, bit_rate=12_000)


@functools.cache
def opus_bomb(container: str = "ogg", seconds: int = 600) -> bytes:
    """Ten minutes of Opus in a few hundred KiB: one second of burst, then the same silent
    20 ms packet repeated (muxed, not encoded, so making it is quick)."""
    out = io.BytesIO()
    rate = 48_000
    with av.open(out, mode="w", format=container) as c:
        stream = c.add_stream("libopus", rate=rate)
        stream.layout = "mono"
        x = np.zeros(2 * rate, dtype=np.float32)
        x[:rate] = np.interp(np.arange(rate) / 3, np.arange(16_000), burst())
        frame = av.AudioFrame.from_ndarray(x[None, :], format="flt", layout="mono")
        frame.sample_rate = rate
        packets = [*stream.encode(frame), *stream.encode(None)][:-1]
        silent = bytes(packets[-1])
        for pts in range(0, seconds * rate, 960):
            packet = packets[pts // 960] if pts // 960 < len(packets) else av.Packet(silent)
            packet.stream = stream
            packet.time_base = Fraction(1, rate)
            packet.pts = packet.dts = pts
            packet.duration = 960
            c.mux(packet)
    return out.getvalue()


def without_declared_duration(webm: bytes) -> bytes:
    """A WebM whose Segment Info no longer says how long it is (as a live recorder writes it):
    the Duration element becomes a Void element of the same size."""
    at = webm.find(b"\x44\x89\x88")
    assert at > 0, "no 8-byte Duration element"
    return webm[:at] + b"\xec\x89" + b"\0" * 9 + webm[at + 11 :]
