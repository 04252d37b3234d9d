"""The core micro-benchmark returns its figures in the documented shape."""

from __future__ import annotations

from voicegate_lab.bench.core import REPETITIONS, run_core


def test_run_core_reports_three_rates() -> None:
    figures = run_core(0.003)
    for name in ("tokens_minted_per_s", "tokens_verified_per_s", "canonical_hashes_per_s"):
        assert isinstance(figures[name], float)
        assert figures[name] > 0
    assert figures["repetitions"] == REPETITIONS
    assert figures["seconds"] == 0.003
    assert isinstance(figures["python"], str)
