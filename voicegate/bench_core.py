"""Micro-benchmark of the pure core: tokens minted and verified, and argument hashes, per second.

Each figure is the median over several repetitions of a plain loop, so one scheduler hiccup
does not move it. ``voicegate bench core`` prints what ``run_core`` returns.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from voicegate.canonical import args_hash
from voicegate.secrets import KeyRing
from voicegate.tokens import TokenCodec

REPETITIONS = 5

# A realistic write: a few scalar arguments and one small nested list.
SAMPLE_ARGUMENTS: dict[str, Any] = {
    "to": "bob@example.com",
    "subject": "Quarterly report",
    "body": "Hi Bob,\nthe report is attached. Numbers are up 4.5% on last quarter.\n",
    "cc": ["alice@example.com", "carol@example.com"],
    "priority": 2,
    "draft": False,
}


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
