"""Nearest-template accuracy on FSDD for four template features: the recogniser's encoder frames
(shipped, from the cache of ``benchmarks/enrol.py frames``), MFCC (the unit tests' fake),
log-mel and MFCC + deltas (``benchmarks/enrol.py``'s split and table).

    PYTHONPATH=. .venv/bin/python benchmarks/enrol_features.py \
        [--frames bench-out/frames-tiny.en.npz] [--takes 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from enrol import CORPUS, Take, nearest_table, template_table

from voicegate.voice import audio, templates


def _logmel(samples: np.ndarray) -> templates.Matrix:
    """The same front end as ``templates.features``, stopping at the log-mel bands."""
    x = np.asarray(samples, dtype=np.float64)
    x = np.append(x[0], x[1:] - 0.97 * x[:-1])
    count = 1 + (len(x) - templates.FRAME) // templates.HOP
    index = np.arange(templates.FRAME)[None, :] + templates.HOP * np.arange(count)[:, None]
    power = np.abs(np.fft.rfft(x[index] * np.hamming(templates.FRAME), templates.NFFT)) ** 2
    energy = 10 * np.log10(power.sum(axis=1) + 1e-12)
    loud = np.flatnonzero(energy > energy.max() - templates.TRIM_DB)
    logmel = np.log(power[loud[0] : loud[-1] + 1] @ templates._FILTERS.T + 1e-10)
    centred: templates.Matrix = (logmel - logmel.mean(axis=0)).astype(np.float32)
    return centred


def _with_deltas(samples: np.ndarray) -> templates.Matrix:
    """MFCCs and their first differences."""
    c = templates.features(samples)
    if len(c) < 3:
        return np.zeros((0, 2 * templates.COEFFS), dtype=np.float32)
    return np.hstack([c, np.gradient(c, axis=0)]).astype(np.float32)


def run_features(args: argparse.Namespace) -> int:
    """Nearest-template accuracy per speaker for each feature (the encoder frames when cached)."""
    raw = []
    for path in sorted((CORPUS / "fsdd").glob("*.wav")):
        digit, speaker, take = path.stem.split("_")
        raw.append((path.stem, speaker, int(digit), int(take), audio.decode(path.read_bytes())))
    print("| features | " + " | ".join(sorted({r[1] for r in raw})) + " | all |")
    print("| --- |" + " ---: |" * 5)
    cached = np.load(args.frames) if args.frames else None
    rows: list[tuple[str, list[Take]]] = []
    if cached is not None:
        frames = [Take(i, s, d, k, cached[i].astype(np.float32)) for i, s, d, k, _ in raw]
        rows.append(("encoder frames (shipped)", frames))
    for name, make in (
        ("MFCC", templates.features),
        ("log-mel", _logmel),
        ("MFCC + deltas", _with_deltas),
    ):
        rows.append((name, [Take(i, s, d, k, make(c.samples)) for i, s, d, k, c in raw]))
    for name, takes in rows:
        table = template_table(nearest_table(takes, args.takes), 1.0, float("inf"), float("inf"))
        cells = [f"{table[s]['right']}" for s in sorted(table)]
        print(
            f"| {name} | " + " | ".join(cells) + f" | {sum(c['right'] for c in table.values())} |"
        )
    return 0


def main() -> int:
    """Command line: the table, one row per feature."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--takes", type=int, default=3, help="enrolment takes per answer")
    parser.add_argument("--frames", help="encoder frames (enrol.py frames)")
    np.seterr(all="ignore")
    return run_features(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
