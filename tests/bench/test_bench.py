"""``voicegate bench --quick`` runs every benchmark and writes figures in the documented shape.

Only the shape is checked: speed lives in the benchmarks and docs/benchmarks.md, never here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FSDD, require
from tests.hearing.conftest import nats_url
from voicegate.cli import main

NUMBER = (int, float)
__all__ = ["nats_url"]


def bench(name: str, tmp_path: Path) -> dict[str, Any]:
    """Run one quick benchmark in its own process; its figures from the JSON file."""
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "voicegate.cli", "bench", name, "--quick"]
    command += ["--json", str(out), "--work", str(tmp_path / "work")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["quick"] is True and doc["command"].startswith("voicegate bench")
    assert {"nproc", "cpu", "memory_gib", "date_utc"} <= set(doc["machine"])
    figures: dict[str, Any] = doc[name]
    assert isinstance(figures["wall_s"], NUMBER)
    return figures


def numbers(figures: dict[str, Any], *names: str) -> None:
    for name in names:
        assert isinstance(figures[name], NUMBER), (name, figures.get(name))


def reachable(backend: dict[str, Any] | float | None) -> bool:
    return not (backend is None or (isinstance(backend, dict) and "unavailable" in backend))


def test_an_unknown_benchmark_name_is_refused() -> None:
    assert main(["bench", "p9"]) == 2


@pytest.mark.slow
@pytest.mark.postgres
def test_core_reports_pure_rates_and_confirms_per_backend(tmp_path: Path) -> None:
    figures = bench("core", tmp_path)
    numbers(figures, "tokens_minted_per_s", "tokens_verified_per_s", "canonical_hashes_per_s")
    confirms = figures["confirms_per_s"]
    assert set(confirms) == {"memory", "sqlite", "postgres"}
    numbers(confirms, "memory", "sqlite")
    require(reachable(confirms["postgres"]), "PostgreSQL for the core benchmark")
    numbers(confirms, "postgres")


@pytest.mark.slow
@pytest.mark.whisper
def test_p1_reports_the_ratio_and_every_step(tmp_path: Path) -> None:
    figures = bench("p1", tmp_path)
    numbers(figures, "ratio", "ratio_vs_greedy", "decision_ms", "bare_ms", "bare_greedy_ms")
    steps = {"decode", "fingerprint", "encoder", "decoding", "closed_vocabulary", "grammar"}
    assert steps | {"store"} <= set(figures["steps_ms"])
    numbers(figures["steps_ms"], *steps, "store")


@pytest.mark.slow
@pytest.mark.whisper
def test_p2_reports_the_speedup_batches_and_memory(tmp_path: Path) -> None:
    figures = bench("p2", tmp_path)
    numbers(figures, "speedup", "concurrent_per_s", "sequential_per_s", "peak_rss_mib")
    numbers(figures, "concurrent_cpu_ms_per_decision", "sequential_cpu_ms_per_decision")
    numbers(figures, "concurrent_cores_busy", "sequential_cores_busy")
    assert all(isinstance(v, int) for v in figures["batch_sizes"].values())


@pytest.mark.slow
def test_p3_reports_the_added_time_and_the_confirm_gate_comparison(tmp_path: Path) -> None:
    figures = bench("p3", tmp_path)
    numbers(figures, "gate_ms", "direct_ms", "added_ms", "vs_direct", "transport_ms")
    numbers(figures, "gate_stdio_ms", "stdio_added_ms")
    if Path("/proc/self/stat").exists():  # the gates' CPU time is read from /proc
        numbers(figures, "gate_cpu_ms", "stdio_cpu_ms")
    with_argument = figures["with_argument"]
    numbers(with_argument, "gate_ms", "direct_ms", "added_ms", "gate_stdio_ms", "stdio_added_ms")
    other = figures["confirm_gate"]
    if "read_ms" in other:
        numbers(other, "read_ms")
        numbers(figures, "vs_confirm_gate", "stdio_vs_confirm_gate")
    else:
        assert isinstance(other["unavailable"], str) and figures["vs_confirm_gate"] is None
        assert figures["stdio_vs_confirm_gate"] is None


@pytest.mark.slow
@pytest.mark.corpus
def test_p4_reports_check_times_by_library_size(tmp_path: Path) -> None:
    require(FSDD.is_dir(), f"the FSDD corpus at {FSDD}")
    figures = bench("p4", tmp_path)
    numbers(figures, "ms_at_100", "ms_at_1000")
    assert set(figures["growth"]) == {"100->1000"}


@pytest.mark.slow
@pytest.mark.corpus
def test_p6_reports_the_time_templates_add_per_decision(tmp_path: Path) -> None:
    require(FSDD.is_dir(), f"the FSDD corpus at {FSDD}")
    figures = bench("p6", tmp_path)
    numbers(figures, "ms", "cold_ms", "templates")


@pytest.mark.slow
@pytest.mark.postgres
def test_p5_reports_confirms_per_second_and_executions(tmp_path: Path) -> None:
    figures = bench("p5", tmp_path)
    numbers(figures["sqlite"], "confirms_per_s", "executions")
    require(reachable(figures["postgres"]), "PostgreSQL for the ledger benchmark")
    numbers(figures, "confirms_per_s", "executions")
    assert isinstance(figures["postgres"]["exactly_once"], bool)


@pytest.mark.slow
@pytest.mark.whisper
@pytest.mark.nats
def test_hearing_reports_the_hop_and_the_rates_with_one_and_two_workers(
    tmp_path: Path, nats_url: str
) -> None:
    figures = bench("hearing", tmp_path)
    numbers(figures, "in_process_ms", "on_worker_ms", "hop_ms")
    numbers(figures["decisions_per_s"], "in_process", "one_worker", "two_workers")
    assert figures["decided"] == ["choose"]  # "the second one", heard on a worker
