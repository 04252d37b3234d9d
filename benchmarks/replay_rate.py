"""Replays through sox speed, pitch and tempo changes, and false flags on new takes, by speaker.

    .venv/bin/python benchmarks/replay_rate.py negatives --speakers jackson,theo   # fit
    .venv/bin/python benchmarks/replay_rate.py negatives --speakers nicolas,yweweler   # report
    .venv/bin/python benchmarks/replay_rate.py negatives --every 4 --offset 1   # a quarter
    .venv/bin/python benchmarks/replay_rate.py negatives --speakers jackson,theo --exact-only
    .venv/bin/python benchmarks/replay_rate.py replays --speakers nicolas,yweweler [--step 5]
    .venv/bin/python benchmarks/replay_rate.py timing

``negatives`` scores every pair of distinct takes of the same digit by the same speaker (all
1,225 pairs of each speaker's 50 takes of each digit), the later take as the upload and the
earlier as the stored one, with both stages of the guard: a pair is a false flag when either
stage reaches its threshold (the exact stage: its plain or its whitened score; the rate stage:
its mean correlation or its near-exact share).
The second stage scores every pair here (around the scale ``rescaled.rank`` finds for it, as in
the guard), although the guard gives it only the
``rescaled.CANDIDATES`` best of a shortlist: the count is an upper bound. ``--every N --offset K``
scores only the pairs whose index is K modulo N (a pair costs about 60 ms).

``replays`` runs each sox change on a clip's file, sends the result through the real intake
(``decode``) and checks it against its speaker's library of 500 takes, the original among them.

The thresholds were fitted on jackson and theo; report the figures of nicolas and yweweler.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay import ROOT, features_of, machine

from voicegate.errors import AudioRefused
from voicegate.voice import rescaled
from voicegate.voice.audio import decode
from voicegate.voice.fingerprint import (
    THRESHOLD,
    WHITE_THRESHOLD,
    Library,
    load,
    similarity,
    whitened_similarity,
)
from voicegate.voice.rescaled import CLOSE_THRESHOLD

# sox's pitch takes cents: a 4 % change is 1200 * log2(1.04) = 67.9 cents.
CHANGES: dict[str, list[str]] = {
    "speed 1.04": ["speed", "1.04"],
    "speed 0.96": ["speed", "0.96"],
    "speed 1.08": ["speed", "1.08"],
    "speed 0.92": ["speed", "0.92"],
    "speed 1.10": ["speed", "1.10"],
    "speed 0.90": ["speed", "0.90"],
    "speed 1.12": ["speed", "1.12"],
    "speed 0.88": ["speed", "0.88"],
    "speed 1.15": ["speed", "1.15"],
    "speed 0.85": ["speed", "0.85"],
    "pitch +4 % (68 cents)": ["pitch", "68"],
    "pitch -4 % (-68 cents)": ["pitch", "-68"],
    "tempo 1.04": ["tempo", "1.04"],
    "tempo 0.96": ["tempo", "0.96"],
    "tempo 1.08": ["tempo", "1.08"],
    "tempo 0.92": ["tempo", "0.92"],
}
RATE_THRESHOLDS = (0.93, 0.94, 0.95, 0.96, 0.97)
CLOSE_THRESHOLDS = (0.65, 0.68, 0.70, 0.72, 0.75)  # the mean's threshold at its default


def sox(path: Path, effect: list[str]) -> bytes:
    """The file after one sox effect, as WAV bytes (through a file: sox writes a full header)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out.wav"
        subprocess.run(["sox", str(path), str(out), *effect], check=True, capture_output=True)
        return out.read_bytes()


def negatives(
    corpus: Path,
    speakers: list[str],
    every: int = 1,
    offset: int = 0,
    save: Path | None = None,
    exact_only: bool = False,
) -> None:
    """False flags of both stages over every same-speaker, same-digit pair of distinct takes
    (``exact_only``: of the exact stage alone, about 1 ms a pair)."""
    groups: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for f in sorted(corpus.glob("*.wav"), key=lambda p: p.stem):
        digit, speaker, _take = f.stem.split("_")
        if speaker in speakers:
            groups[(digit, speaker)].append(f.stem)
    prints = {
        k: load(features_of(decode((corpus / f"{k}.wav").read_bytes()).samples))
        for keys in groups.values()
        for k in keys
    }
    prepared = {k: rescaled.prepare(p.wave) for k, p in prints.items()}
    pairs = [
        (upload, stored)
        for keys in groups.values()
        for i, stored in enumerate(sorted(keys, key=lambda k: int(k.split("_")[2])))
        for upload in sorted(keys, key=lambda k: int(k.split("_")[2]))[i + 1 :]
    ][offset::every]
    exact: list[float] = []
    flat: list[float] = []
    mean: list[float] = []
    close: list[float] = []
    started = time.perf_counter()
    for upload, stored in pairs:
        exact.append(similarity(prints[upload], prints[stored]))
        flat.append(whitened_similarity(prints[upload], prints[stored]))
        found = rescaled.NOTHING
        if not exact_only:
            # Ranked alone first, as the guard ranks its shortlist, for the scale to search around.
            for _, scale in rescaled.rank(prints[upload].wave, [prepared[stored]], 1):
                found = rescaled.score(prints[upload].wave, prepared[stored], scale)
        mean.append(found.mean)
        close.append(found.close)
    seconds = time.perf_counter() - started
    if save is not None:
        lines = [
            f"{u}\t{s}\t{x:.4f}\t{w:.4f}\t{m:.4f}\t{k:.4f}"
            for (u, s), x, w, m, k in zip(pairs, exact, flat, mean, close, strict=True)
        ]
        header = "upload\tstored\texact\twhitened\tmean\tshare\n"
        save.write_text(header + "\n".join(lines) + "\n")
    e, r, c = np.array(exact), np.array(mean), np.array(close)
    first = (e >= THRESHOLD) | (np.array(flat) >= WHITE_THRESHOLD)
    n = len(e)
    print(
        f"# speakers {', '.join(speakers)}: {n} pairs of distinct takes, same speaker and digit"
        + (f" (every {every}th from {offset})" if every > 1 else "")
    )
    print(f"exact stage at {THRESHOLD}: {int(np.sum(e >= THRESHOLD))} flagged")
    print(f"exact stage at {THRESHOLD} or whitened {WHITE_THRESHOLD}: {int(np.sum(first))} flagged")
    unflagged = [
        (w, u, s) for w, x, (u, s) in zip(flat, exact, pairs, strict=True) if x < THRESHOLD
    ]
    w, u, s = max(unflagged, default=(0.0, "-", "-"))
    print(f"highest whitened score of a pair under {THRESHOLD}: {w:.3f} ({u}/{s})")
    for name, v in (
        ("whitened", np.array(flat)),
        ("rate stage mean", r),
        ("rate stage near-exact share", c),
    ):
        print(
            f"{name} percentiles 50/99/99.9/max: "
            + " / ".join(f"{x:.3f}" for x in np.percentile(v, [50, 99, 99.9, 100]))
        )
    if exact_only:
        print(f"\n{1000 * seconds / n:.1f} ms a pair; {datetime.date.today()}, {machine()}")
        return
    print("\n| mean threshold | share threshold | rate stage flags | either stage (false flags) |")
    print("| --- | --- | --- | --- |")
    mean_only: list[tuple[float, float | None]] = [(t, None) for t in RATE_THRESHOLDS]
    shares = sorted({*CLOSE_THRESHOLDS, CLOSE_THRESHOLD})
    rows = mean_only + [(rescaled.THRESHOLD, t) for t in shares]
    for t, k in rows:
        rate = (r >= t) | (c >= k) if k is not None else r >= t
        both = int(np.sum(first | rate))
        print(f"| {t} | {k or '-'} | {int(np.sum(rate))} | {both} ({100 * both / n:.3f} %) |")
    worst = sorted(zip(c, r, pairs, strict=True), reverse=True)[:5]
    print(
        "\nhighest near-exact shares: "
        + ", ".join(f"{u}/{s} {k:.3f} (mean {m:.3f})" for k, m, (u, s) in worst)
    )
    print(f"\n{1000 * seconds / n:.1f} ms a pair; {datetime.date.today()}, {machine()}")


def replays(corpus: Path, speakers: list[str], step: int, only: str = "") -> None:
    """Refusal rates of each sox change, each replay checked against its speaker's 500 takes."""
    files = sorted(corpus.glob("*.wav"), key=lambda p: p.stem)
    libraries: dict[str, Library] = collections.defaultdict(Library)
    for f in files:
        libraries[f.stem.split("_")[1]].add(
            f.stem, load(features_of(decode(f.read_bytes()).samples))
        )
    chosen = [f for f in files if f.stem.split("_")[1] in speakers][::step]
    print(f"# {len(chosen)} clips of {', '.join(speakers)}, each against its speaker's library")
    print(f"exact threshold {THRESHOLD}; refused as reused at each rate threshold:\n")
    rules: list[tuple[float, float | None]] = [(t, None) for t in RATE_THRESHOLDS]
    rules.extend((rescaled.THRESHOLD, k) for k in sorted({0.70, 0.72, CLOSE_THRESHOLD}))
    names = [f"mean {t}" if k is None else f"mean {t} or share {k}" for t, k in rules]
    print("| change | exact stage | " + " | ".join(names) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in rules) + " |")
    for name, effect in CHANGES.items():
        if only not in name:
            continue
        exact = 0
        found: list[list[rescaled.Score]] = []
        for f in chosen:
            try:
                query = load(features_of(decode(sox(f, effect)).samples))
            except AudioRefused:
                found.append([])  # never happens on this corpus; counted against the guard
                continue
            library = libraries[f.stem.split("_")[1]]
            if library.match(query, rate_threshold=None) is not None:  # plain or whitened
                exact += 1
                found.append([rescaled.Score(1.0, 1.0)])
                continue
            found.append([s for _, s in library.rate_scores(query, library.shortlist(query))])
        n = len(chosen)
        rates = " | ".join(
            f"{100 * sum(any(s.reaches(t, k) for s in f) for f in found) / n:.1f} %"
            for t, k in rules
        )
        print(f"| {name} | {exact} of {n} | {rates} |", flush=True)
    print(f"\n{datetime.date.today()}, {machine()}")


def timing(corpus: Path) -> None:
    """Median time of one check against a library, for a new take (the common, slowest case)."""
    files = sorted(corpus.glob("*.wav"), key=lambda p: p.stem)
    library = Library()
    for f in files:
        if f.stem.split("_")[1] == "theo":
            library.add(f.stem, load(features_of(decode(f.read_bytes()).samples)))
    queries = [f for f in files if f.stem.split("_")[1] == "jackson"][::20]
    for stage, kwargs in (("exact stage only", {"rate_threshold": None}), ("both stages", {})):
        times = []
        for f in queries:
            item = load(features_of(decode(f.read_bytes()).samples))
            t0 = time.perf_counter()
            library.match(item, **kwargs)  # type: ignore[arg-type]
            times.append(1000 * (time.perf_counter() - t0))
        print(
            f"{stage}: median {statistics.median(times):.1f} ms, max {max(times):.1f} ms "
            f"({len(queries)} new takes against {len(library)} stored)"
        )
    print(f"{datetime.date.today()}, {machine()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["negatives", "replays", "timing"])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus" / "fsdd")
    parser.add_argument("--speakers", default="nicolas,yweweler")
    parser.add_argument("--step", type=int, default=5, help="every n-th clip for replays")
    parser.add_argument("--only", default="", help="replays: only the changes naming this")
    parser.add_argument("--every", type=int, default=1, help="negatives: every n-th pair")
    parser.add_argument("--offset", type=int, default=0, help="negatives: the first pair")
    parser.add_argument("--scores", type=Path, help="negatives: write every pair's scores here")
    parser.add_argument("--exact-only", action="store_true", help="negatives: skip the rate stage")
    args = parser.parse_args()
    speakers = args.speakers.split(",")
    if args.part == "negatives":
        negatives(args.corpus, speakers, args.every, args.offset, args.scores, args.exact_only)
    elif args.part == "replays":
        replays(args.corpus, speakers, args.step, args.only)
    else:
        timing(args.corpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
