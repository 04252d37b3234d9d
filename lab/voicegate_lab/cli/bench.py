"""``voicegate bench [NAME...] [--json OUT] [--quick]``: run benchmarks, print and save figures.

The benchmarks are ``voicegate_lab.bench``, one module each, run in order by
``voicegate_lab.bench.suite``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from voicegate_lab.bench import suite
from voicegate_lab.bench.measure import (
    DEFAULT_MODEL,
    DEFAULT_NATS,
    DEFAULT_PG_DSN,
    PG_DSN_ENV,
    Options,
)
from voicegate_lab.bench.suite import BENCHMARKS


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
        "--pg", default=None, help=f"PostgreSQL DSN (default: ${PG_DSN_ENV} or {DEFAULT_PG_DSN})"
    )
    parser.add_argument(
        "--nats",
        default=DEFAULT_NATS,
        help=f"NATS for the hearing benchmark (default {DEFAULT_NATS})",
    )
    parser.add_argument(
        "--work", type=Path, default=Path("bench-out"), help="scratch folder (default bench-out)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the named benchmarks in order; exit 2 on an unknown name, 1 if one failed."""
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
        pg_dsn=args.pg or os.environ.get(PG_DSN_ENV, DEFAULT_PG_DSN),
        nats=args.nats,
        work=args.work,
    )
    passed = suite.run(names, options, command=_command(args), json_path=args.json)
    return 0 if passed else 1


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run."""
    words = ["voicegate", "bench", *args.names]
    words += ["--quick"] if args.quick else []
    words += ["--device", args.device] if args.device != "cpu" else []
    words += ["--model", args.model] if args.model != DEFAULT_MODEL else []
    words += ["--nats", args.nats] if args.nats != DEFAULT_NATS else []
    words += ["--json", str(args.json)] if args.json else []
    return shlex.join(words)
