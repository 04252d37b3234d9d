"""What every benchmark shares: options, repeated timing with a warm-up, the machine, memory."""

from __future__ import annotations

import datetime
import os
import platform
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PG_DSN_ENV = "VOICEGATE_TEST_PG_DSN"
DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_NATS = "nats://127.0.0.1:4222"
# The model ``voicegate decide`` and the English-only server use.
DEFAULT_MODEL = "tiny.en"


@dataclass(frozen=True, slots=True)
class Options:
    """How one ``voicegate bench`` run measures: sizes, model, device, where scratch files go."""

    quick: bool = False
    device: str = "cpu"
    model: str = DEFAULT_MODEL
    pg_dsn: str = DEFAULT_PG_DSN
    # The NATS with JetStream the hearing benchmark's workers take utterances from.
    nats: str = DEFAULT_NATS
    work: Path = Path("bench-out")
    cache: Path = Path.home() / ".cache" / "voicegate" / "bench"

    def pick(self, full: int, quick: int) -> int:
        """``full`` normally, ``quick`` under ``--quick``."""
        return quick if self.quick else full


def ms(seconds: float) -> float:
    """Seconds as milliseconds, rounded for printing and JSON."""
    return round(seconds * 1000.0, 3)


def median(values: list[float]) -> float:
    """The median, rounded to three decimals."""
    return round(statistics.median(values), 3)


def timed(operation: Callable[[], Any], *, repetitions: int, warmup: int = 1) -> list[float]:
    """Seconds each of ``repetitions`` calls took, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        operation()
    out = []
    for _ in range(repetitions):
        start = time.perf_counter()
        operation()
        out.append(time.perf_counter() - start)
    return out


async def timed_async(
    operation: Callable[[], Awaitable[Any]], *, repetitions: int, warmup: int = 1
) -> list[float]:
    """Seconds each of ``repetitions`` awaited calls took, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        await operation()
    out = []
    for _ in range(repetitions):
        start = time.perf_counter()
        await operation()
        out.append(time.perf_counter() - start)
    return out


def peak_rss_mib() -> float:
    """The highest resident memory this process has used so far, in MiB."""
    # ru_maxrss is in KiB on Linux.
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def rss_mib() -> float:
    """Resident memory of this process now, in MiB (Linux; 0 where /proc is missing)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def machine() -> dict[str, Any]:
    """Cores, CPU model, memory, Python and the UTC date, for the record beside every figure."""
    model = "unknown CPU"
    memory_gib = 0.0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / 2**20, 1)
                break
    except OSError:
        pass
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": model,
        "memory_gib": memory_gib,
        "load_1min": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
