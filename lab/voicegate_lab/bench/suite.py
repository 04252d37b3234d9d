"""The benchmarks by name, and running several in order into one figures document."""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voicegate_lab.bench.measure import Options, machine

# name -> what it measures; the module ``voicegate_lab.bench.<name>`` has run() and lines().
BENCHMARKS: dict[str, str] = {
    "core": "tokens, hashes and confirms per second, per backend",
    "p1": "one voice decision through the device API vs a bare faster-whisper transcribe",
    "p2": "16 devices uploading at once vs one at a time",
    "p3": "reads through the gate vs straight to the upstream, and vs confirm-gate-mcp",
    "p4": "replay check time against 100, 1,000 and 10,000 stored clips",
    "p5": "racing confirms from 2 processes on PostgreSQL, 1 on SQLite",
    "p6": "time 30 enrolled templates add to one voice decision",
    "hearing": "a voice decision heard on NATS workers vs in process, and decisions per second",
}


def run(
    names: Sequence[str], options: Options, *, command: str, json_path: Path | None = None
) -> bool:
    """Run the named benchmarks in order, printing each one's summary as it ends; True when
    every one succeeded. The figures so far are rewritten to ``json_path`` after each."""
    options.work.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"machine": machine(), "command": command, "quick": options.quick}
    failed = False
    for name in names:
        module = importlib.import_module(f"voicegate_lab.bench.{name}")
        print(f"== {name}: {BENCHMARKS[name]}", flush=True)
        start = time.perf_counter()
        figures: dict[str, Any] = module.run(options)
        figures["wall_s"] = round(time.perf_counter() - start, 1)
        doc[name] = figures
        failed |= bool(figures.get("error"))
        for line in module.lines(figures):
            print("   " + line, flush=True)
        if json_path:
            _write(json_path, doc)
    return not failed


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
