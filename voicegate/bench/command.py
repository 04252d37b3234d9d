"""``voicegate bench [NAME...] [--json OUT] [--quick]``: run benchmarks, print and save figures."""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from voicegate.bench.measure import DEFAULT_MODEL, DEFAULT_PG_DSN, PG_DSN_ENV, Options, machine

# name -> what it measures; the module ``voicegate.bench.<name>`` has run() and lines().
BENCHMARKS: dict[str, str] = {
    "core": "tokens, hashes and confirms per second, per backend",
    "p1": "one voice decision through the device API vs a bare faster-whisper transcribe",
    "p2": "16 devices uploading at once vs one at a time",
    "p3": "reads through the gate vs straight to the upstream, and vs confirm-gate-mcp",
    "p4": "replay check time against 100, 1,000 and 10,000 stored clips",
    "p5": "racing confirms from 2 processes on PostgreSQL, 1 on SQLite",
    "p6": "time 30 enrolled templates add to one voice decision",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate bench``."""
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="benchmarks to run: " + ", ".join(BENCHMARKS) + " (default: all)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the figures here")
    parser.add_argument("--quick", action="store_true", help="few repetitions, small sizes (CI)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="for p1 and p2")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="recogniser model for p1 and p2")
    parser.add_argument(
        "--window",
        default=None,
        choices=["full", "short"],
        help="encoder window for p1 and p2 (default: the model's calibrated one)",
    )
    parser.add_argument(
        "--pg", default=None, help=f"PostgreSQL DSN (default: ${PG_DSN_ENV} or {DEFAULT_PG_DSN})"
    )
    parser.add_argument(
        "--work", type=Path, default=Path("bench-out"), help="scratch folder (default bench-out)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the named benchmarks in order; exit 2 on an unknown name, 1 if one failed."""
    import os

    names = list(dict.fromkeys(args.names)) or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(
            f"voicegate bench: unknown {unknown}; choose from {list(BENCHMARKS)}", file=sys.stderr
        )
        return 2
    options = Options(
        quick=args.quick,
        device=args.device,
        model=args.model,
        window=args.window,
        pg_dsn=args.pg or os.environ.get(PG_DSN_ENV, DEFAULT_PG_DSN),
        work=args.work,
    )
    options.work.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "machine": machine(),
        "command": _command(args),
        "quick": options.quick,
    }
    failed = False
    for name in names:
        module = importlib.import_module(f"voicegate.bench.{name}")
        print(f"== {name}: {BENCHMARKS[name]}", flush=True)
        start = time.perf_counter()
        figures: dict[str, Any] = module.run(options)
        figures["wall_s"] = round(time.perf_counter() - start, 1)
        doc[name] = figures
        failed |= bool(figures.get("error"))
        for line in module.lines(figures):
            print("   " + line, flush=True)
        if args.json:
            _write(args.json, doc)
    return 1 if failed else 0


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run."""
    words = ["voicegate", "bench", *args.names]
    words += ["--quick"] if args.quick else []
    words += ["--device", args.device] if args.device != "cpu" else []
    words += ["--model", args.model] if args.model != DEFAULT_MODEL else []
    words += ["--json", str(args.json)] if args.json else []
    return shlex.join(words)


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
