"""P4 replay check: one user with 100, 1,000 and 10,000 stored clips, on a real SQLite store.

The stored clips are spoken digits from the FSDD corpus, each copy shifted in time and given
faint noise (40 dB SNR), so no two stored prints are identical. Each size gets its own user;
the first check loads the user's prints from the store (``cold_ms``), then the median of the
following checks is the figure: ``ReplayGuard.check_and_remember`` on a new recording (a
reversed clip), features included. A few replays of stored clips (louder, with noise) must
still be refused at every size.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voicegate.domain import StoredFingerprint
from voicegate.errors import AudioRefused
from voicegate.store import open_store
from voicegate.voice.audio import SAMPLE_RATE, Clip, decode, from_samples
from voicegate.voice.fingerprint import ReplayGuard, features
from voicegate_lab.bench.measure import Options, median, ms

# The corpus folder the tests use too: $VOICEGATE_CORPUS, else ../shared/corpus beside the repo.
CORPUS = (
    Path(
        os.environ.get(
            "VOICEGATE_CORPUS", Path(__file__).resolve().parents[4] / "shared" / "corpus"
        )
    )
    / "fsdd"
)
SIZES = (100, 1000, 10000)
REPLAYS = 5

Floats = npt.NDArray[np.float64]


def run(options: Options) -> dict[str, Any]:
    """Check times at each size; ``quick`` stops at 1,000 clips."""
    files = sorted(CORPUS.glob("*.wav"))
    if not files:
        return {"error": f"no FSDD clips in {CORPUS}"}
    sizes = SIZES[:2] if options.quick else SIZES
    checks = options.pick(30, 5)
    return asyncio.run(_run(files, sizes, checks))


async def _run(files: list[Path], sizes: tuple[int, ...], checks: int) -> dict[str, Any]:
    rng = np.random.default_rng(20240601)
    pool = [
        decode(f.read_bytes()).samples.astype(np.float64)
        for f in files[:: max(1, len(files) // 500)]
    ]
    figures: dict[str, Any] = {"sizes": list(sizes), "checks": checks, "store": "sqlite"}
    with tempfile.TemporaryDirectory(prefix="voicegate-p4-") as folder:
        store = await open_store(str(Path(folder) / "gate.db"))
        try:
            guard = ReplayGuard(store.fingerprints)
            for size in sizes:
                user = f"user{size}"
                stored = await _fill(store.fingerprints, user, size, pool, rng)
                queries = [
                    pool[int(rng.integers(0, len(pool)))][::-1].copy() for _ in range(checks + 1)
                ]
                cold = await _check(guard, user, queries[0])
                warm = [await _check(guard, user, q) for q in queries[1:]]
                refused = 0
                for x in stored[:REPLAYS]:
                    try:
                        await guard.check_and_remember(user, _clip(_noisy(1.5 * x, 30, rng)))
                    except AudioRefused:
                        refused += 1
                figures[f"ms_at_{size}"] = median(warm)
                figures[f"cold_ms_at_{size}"] = cold
                figures[f"replays_refused_at_{size}"] = f"{refused}/{min(REPLAYS, len(stored))}"
        finally:
            await store.close()
    figures["growth"] = {
        f"{a}->{b}": round(figures[f"ms_at_{b}"] / max(figures[f"ms_at_{a}"], 1e-6), 2)
        for a, b in itertools.pairwise(sizes)
    }
    return figures


async def _fill(
    prints: Any, user: str, size: int, pool: list[Floats], rng: np.random.Generator
) -> list[Floats]:
    """Store ``size`` perturbed copies of corpus clips for ``user``; the samples of a few."""
    kept: list[Floats] = []
    # Spread over the last four weeks, as a user's answers accumulate: the guard then loads them
    # once and afterwards reads only what is new.
    oldest = time.time() - 28 * 24 * 3600.0
    for i in range(size):
        x = pool[i % len(pool)]
        shifted = np.roll(_noisy(x, 40, rng), int(rng.integers(0, len(x))))
        if len(kept) < REPLAYS:
            kept.append(shifted)
        data = features(_clip(shifted))
        await prints.add(StoredFingerprint(uuid.uuid4().hex, user, oldest + i * 60.0, data))
    return kept


async def _check(guard: ReplayGuard, user: str, x: Floats) -> float:
    clip = _clip(x)
    start = time.perf_counter()
    # A chance match still costs a full check; the time is what counts here.
    with contextlib.suppress(AudioRefused):
        await guard.check_and_remember(user, clip)
    return ms(time.perf_counter() - start)


def _clip(x: Floats) -> Clip:
    return from_samples(x, SAMPLE_RATE)


def _noisy(x: Floats, snr_db: float, rng: np.random.Generator) -> Floats:
    noise = rng.standard_normal(len(x))
    noise *= np.sqrt(np.mean(x**2) / np.mean(noise**2)) / 10 ** (snr_db / 20)
    return x + noise


def lines(figures: dict[str, Any]) -> list[str]:
    """The human summary."""
    if "error" in figures:
        return [figures["error"]]
    out = []
    for size in figures["sizes"]:
        out.append(
            f"{size:>6,} stored clips: check {figures[f'ms_at_{size}']:.1f} ms median "
            f"(first, loading the store: {figures[f'cold_ms_at_{size}']:.0f} ms); replays refused "
            f"{figures[f'replays_refused_at_{size}']}"
        )
    out.append("growth " + ", ".join(f"{k}: x{v}" for k, v in figures["growth"].items()))
    return out
