"""Core: tokens minted and verified, argument hashes, and confirms per backend, per second.

The pure figures are the median over several repetitions of a plain loop, so one scheduler
hiccup does not move them. Confirms run one after another through ``Gate.answer`` (every
named check, the ledger spends, the receipt) on memory, SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from voicegate.canonical import args_hash
from voicegate.secrets import KeyRing
from voicegate.tokens import TokenCodec
from voicegate_lab.bench.confirms import StoreMissing, confirms_per_s, scratch_url
from voicegate_lab.bench.measure import Options

REPETITIONS = 5
BACKENDS = ("memory", "sqlite", "postgres")

# A realistic write: a few scalar arguments and one small nested list.
SAMPLE_ARGUMENTS: dict[str, Any] = {
    "to": "bob@example.com",
    "subject": "Quarterly report",
    "body": "Hi Bob,\nthe report is attached. Numbers are up 4.5% on last quarter.\n",
    "cc": ["alice@example.com", "carol@example.com"],
    "priority": 2,
    "draft": False,
}


def run(options: Options) -> dict[str, Any]:
    """The pure rates, then confirms per second on each backend (None where unreachable)."""
    figures = run_core(0.3 if options.quick else 3.0)
    count = options.pick(200, 20)
    repetitions = options.pick(3, 1)
    confirms: dict[str, float | None] = {}
    missing: dict[str, str] = {}
    for backend in BACKENDS:
        try:
            confirms[backend] = asyncio.run(_confirms(backend, options, count, repetitions))
        except StoreMissing as exc:
            confirms[backend] = None
            missing[backend] = str(exc)
    figures["confirms_per_s"] = confirms
    figures["confirms_per_round"] = count
    if missing:
        figures["unavailable"] = missing
    return figures


async def _confirms(backend: str, options: Options, count: int, repetitions: int) -> float:
    async with scratch_url(backend, options.pg_dsn) as url:
        return await confirms_per_s(url, count, repetitions)


def lines(figures: dict[str, Any]) -> list[str]:
    """The human summary."""
    out = [
        f"tokens minted    {figures['tokens_minted_per_s']:>12,.0f} /s",
        f"tokens verified  {figures['tokens_verified_per_s']:>12,.0f} /s",
        f"canonical hashes {figures['canonical_hashes_per_s']:>12,.0f} /s",
    ]
    for backend, rate in figures["confirms_per_s"].items():
        shown = f"{rate:>12,.0f} /s" if rate is not None else "   unavailable"
        out.append(f"confirms {backend:<8}{shown}  (Gate.answer, one after another)")
    return out


def run_core(
    seconds: float = 1.0, *, timer: Callable[[], float] = time.perf_counter
) -> dict[str, Any]:
    """Operations per second of mint, verify and args_hash, ``seconds`` spent in all."""
    codec = TokenCodec(KeyRing.generate())
    binding = {
        "subject": "user:alice",
        "tenant": "acme",
        "tool": "send_email",
        "target": "mail",
        "args_hash": args_hash(SAMPLE_ARGUMENTS),
    }
    token = codec.mint(**binding)
    slice_s = seconds / (3 * REPETITIONS)

    def mint() -> None:
        codec.mint(**binding)

    def verify() -> None:
        codec.verify(token, **binding)

    def hash_arguments() -> None:
        args_hash(SAMPLE_ARGUMENTS)

    return {
        "tokens_minted_per_s": _rate(mint, slice_s, timer),
        "tokens_verified_per_s": _rate(verify, slice_s, timer),
        "canonical_hashes_per_s": _rate(hash_arguments, slice_s, timer),
        "repetitions": REPETITIONS,
        "seconds": seconds,
        "python": platform.python_version(),
    }


def _rate(operation: Callable[[], None], slice_s: float, timer: Callable[[], float]) -> float:
    rates = []
    for _ in range(REPETITIONS):
        count = 0
        start = timer()
        elapsed = 0.0
        # At least one call per repetition, so a tiny budget still measures something.
        while count == 0 or elapsed < slice_s:
            operation()
            count += 1
            elapsed = timer() - start
        rates.append(count / elapsed if elapsed > 0 else float(count))
    return statistics.median(rates)
