"""P5 ledger: racing confirms from two gate processes on PostgreSQL, one process on SQLite.

Each round opens ``sets`` one-card sets, then every process answers every set ``times`` times
at once (2,000 confirms over 200 sets in all). Exactly one confirm per set may run its write:
``executions`` counts the lines the upstream wrote, across processes. Confirms per second is
all confirms over the span from the first process's start to the last one's end.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from voicegate.store import open_store
from voicegate_lab.bench.confirms import (
    Counter,
    StoreMissing,
    gate_over,
    new_keys,
    open_sets,
    scratch_url,
)
from voicegate_lab.bench.measure import Options, median
from voicegate_lab.bench.race import race

SETS = 200
# Confirms each process keeps in flight at once.
IN_FLIGHT = 50
CONFIRMS = 2000


def run(options: Options) -> dict[str, Any]:
    """PostgreSQL with two processes, SQLite with one."""
    sets = options.pick(SETS, 20)
    confirms = options.pick(CONFIRMS, 200)
    rounds = options.pick(3, 1)
    figures: dict[str, Any] = {
        "sets": sets,
        "confirms": confirms,
        "rounds": rounds,
        "in_flight_per_process": IN_FLIGHT,
    }
    try:
        figures["postgres"] = asyncio.run(_backend("postgres", 2, sets, confirms, rounds, options))
    except StoreMissing as exc:
        figures["postgres"] = {"unavailable": str(exc)}
    figures["sqlite"] = asyncio.run(_backend("sqlite", 1, sets, confirms, rounds, options))
    pg = figures["postgres"]
    figures["confirms_per_s"] = pg.get("confirms_per_s")
    figures["executions"] = pg.get("executions")
    return figures


async def _backend(
    backend: str, processes: int, sets: int, confirms: int, rounds: int, options: Options
) -> dict[str, Any]:
    rates: list[float] = []
    executions: list[int] = []
    released: list[int] = []
    async with scratch_url(backend, options.pg_dsn) as url:
        for _ in range(rounds):
            rate, ran, won = await _round(url, processes, sets, confirms)
            rates.append(rate)
            executions.append(ran)
            released.append(won)
    return {
        "processes": processes,
        "confirms_per_s": median(rates),
        "executions": executions[-1],
        "executions_every_round": executions,
        "released_every_round": released,
        "exactly_once": all(n == sets for n in executions + released),
    }


async def _round(url: str, processes: int, sets: int, confirms: int) -> tuple[float, int, int]:
    """One race; (confirms per second, executions logged, answers that said released)."""
    keys = new_keys()
    store = await open_store(url)
    try:
        opened = await open_sets(gate_over(store, keys, Counter()), sets)
    finally:
        await store.close()
    with tempfile.TemporaryDirectory(prefix="voicegate-p5-") as folder:
        log = Path(folder) / "executions.log"
        times = confirms // (sets * processes)
        payload = {
            "url": url,
            "keys": keys,
            "sets": [p.id for p in opened],
            "times": times,
            "in_flight": IN_FLIGHT,
            "log": str(log),
        }
        results = await asyncio.to_thread(
            race, "voicegate_lab.bench.confirms:race_worker", [payload] * processes
        )
        ran = len(log.read_text().splitlines()) if log.exists() else 0
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    done = times * sets * processes
    unavailable = sum(r["unavailable"] for r in results)
    if unavailable:
        raise RuntimeError(f"{unavailable} confirms found the store unavailable")
    return done / span, ran, sum(r["released"] for r in results)


def lines(figures: dict[str, Any]) -> list[str]:
    """The human summary."""
    out = [
        f"{figures['confirms']} confirms over {figures['sets']} sets, {figures['rounds']} rounds"
    ]
    for backend in ("postgres", "sqlite"):
        f = figures[backend]
        if "unavailable" in f:
            out.append(f"{backend:<8}: {f['unavailable']}")
            continue
        out.append(
            f"{backend:<8}: {f['confirms_per_s']:,.0f} confirms/s with {f['processes']} "
            f"process(es); executions {f['executions']} (must be {figures['sets']}); "
            f"exactly once every round: {f['exactly_once']}"
        )
    return out
