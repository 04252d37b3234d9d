"""Scoring an evaluation run: pure functions from result records to figures, tables and plots.

A case is *correct* when the decision equals what the manifest expects (on a single open card,
``choose:1`` and ``confirm`` mean the same and both count). A *false release* is any upstream
write the case did not expect: the wrong card, or any write when it expected refuse, cancel or
more time. The server's reply to an enrolment take (``TakeReply``) is no case: it is counted
apart, kept or refused.
Only ``write_plots`` touches the disk.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicegate.domain import Stage
from voicegate.reasons import Kind, Reason
from voicegate_lab.eval.manifest import Case

KINDS = tuple(k.value for k in Kind)


@dataclass(frozen=True, slots=True)
class Result:
    """What one case did: the decision, its reason, which write ran (card number) and how fast."""

    id: str
    label: str
    lang: str
    expect: str
    decision: str
    card: int | None
    reason: str | None
    write: int | None
    expected_write: int | None
    latency_ms: float
    heard: tuple[str, ...] = field(default=())
    single_card: bool = False

    @property
    def released(self) -> bool:
        """An upstream write ran."""
        return self.write is not None

    @property
    def false_release(self) -> bool:
        """A write ran that the case did not expect."""
        return self.write is not None and self.write != self.expected_write

    @property
    def throttled(self) -> bool:
        """The server refused to hear the answer at all (``rate_limited``): no decision."""
        return self.reason == Reason.RATE_LIMITED.value

    @property
    def actual(self) -> str:
        """The decision in manifest words: ``choose:2``, ``confirm``, ``refuse``."""
        return f"choose:{self.card}" if self.decision == Kind.CHOOSE.value else self.decision

    @property
    def correct(self) -> bool:
        """The decision is the expected one."""
        if self.actual == self.expect:
            return True
        release_one = {"choose:1", "confirm"}
        return self.single_card and {self.actual, self.expect} <= release_one


@dataclass(frozen=True, slots=True)
class TakeReply:
    """What the server answered to one enrolment take."""

    id: str
    user: str
    expect: str
    status: int
    reason: str | None

    @property
    def ok(self) -> bool:
        """True when the server kept the take."""
        return self.status == 200


def final_card(cards: int) -> int:
    """The card the runner taps before a final-stage case: the last one, so a fall-back to
    card 1 shows up as a wrong release."""
    return cards


def expected_write(case: Case) -> int | None:
    """The card whose write the case expects to run, or None."""
    kind, card = case.expect.kind, case.expect.card
    if kind is Kind.CHOOSE:
        return card
    if kind is Kind.CONFIRM:
        return final_card(case.cards) if case.stage is Stage.FINAL else 1
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _groups(results: Iterable[Result], key: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in results:
        g = out.setdefault(str(getattr(r, key)), {"n": 0, "correct": 0, "released": 0})
        g["n"] += 1
        g["correct"] += r.correct
        g["released"] += r.released
    return dict(sorted(out.items()))


def summary(results: Sequence[Result]) -> dict[str, Any]:
    """The ``--json`` document: totals, per class and language, latency, one result a case."""
    latencies = [r.latency_ms for r in results]
    return {
        "cases": len(results),
        "false_releases": sum(r.false_release for r in results),
        "correct": sum(r.correct for r in results),
        # Answers the server never heard; they are neither right nor refused.
        "throttled": sum(r.throttled for r in results),
        "by_class": _groups(results, "label"),
        "by_lang": _groups(results, "lang"),
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 1),
            "p95": round(percentile(latencies, 95), 1),
        },
        "results": [
            {
                "id": r.id,
                "decision": r.decision,
                "card": r.card,
                "reason": r.reason,
                "released": r.released,
                "latency_ms": round(r.latency_ms, 1),
                "write": r.write,
                "expect": r.expect,
                "class": r.label,
                "lang": r.lang,
                "correct": r.correct,
                "false_release": r.false_release,
                "heard": list(r.heard),
            }
            for r in results
        ],
    }


def enrolment(taught: Sequence[TakeReply]) -> dict[str, Any]:
    """Enrolment takes for the summary: how many were kept, refused, and why."""
    refused = Counter(t.reason or f"http_{t.status}" for t in taught if not t.ok)
    return {
        "takes": len(taught),
        "taught": sum(t.ok for t in taught),
        "refused": sum(refused.values()),
        "reasons": dict(sorted(refused.items())),
        "users": len({t.user for t in taught}),
    }


def _kind(text: str) -> str:
    return text.partition(":")[0]


def confusion(results: Iterable[Result]) -> dict[str, dict[str, int]]:
    """Counts of expected kind (rows) by decided kind (columns); a wrong card is its own column."""
    table = {k: dict.fromkeys((*KINDS, "wrong_card"), 0) for k in KINDS}
    for r in results:
        row, col = _kind(r.expect), _kind(r.actual)
        if row == col == Kind.CHOOSE.value and not r.correct:
            col = "wrong_card"
        table[row][col] += 1
    return table


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "-"


def _group_table(
    title: str, groups: Mapping[str, Mapping[str, int]], false: Mapping[str, int]
) -> list[str]:
    lines = [
        f"| {title} | cases | correct | released | false releases |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, g in groups.items():
        lines.append(
            f"| {name} | {g['n']} | {g['correct']} ({_pct(g['correct'], g['n'])}) "
            f"| {g['released']} | {false.get(name, 0)} |"
        )
    return lines


def markdown(
    results: Sequence[Result],
    *,
    title: str = "voicegate eval",
    command: str = "",
    plots: Sequence[str] = (),
) -> str:
    """The Markdown report: totals, per class and language, the confusion table, plots, misses."""
    s = summary(results)
    n = s["cases"]
    lines = [f"# {title}", ""]
    if command:
        lines += ["```", command, "```", ""]
    lines += [
        f"- cases: **{n}**",
        f"- false releases: **{s['false_releases']}**",
        f"- correct: **{s['correct']}** ({_pct(s['correct'], n)})",
        f"- latency: p50 {s['latency_ms']['p50']} ms, p95 {s['latency_ms']['p95']} ms",
        "",
        "## By class",
        "",
    ]
    false_by: dict[str, dict[str, int]] = {"label": {}, "lang": {}}
    for r in results:
        if r.false_release:
            for key in false_by:
                name = getattr(r, key)
                false_by[key][name] = false_by[key].get(name, 0) + 1
    lines += _group_table("class", s["by_class"], false_by["label"])
    lines += ["", "## By language", ""]
    lines += _group_table("lang", s["by_lang"], false_by["lang"])
    lines += ["", "## Decisions (rows: expected, columns: decided)", ""]
    table = confusion(results)
    cols = list(next(iter(table.values())))
    lines += ["| expected | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    lines += [
        f"| {row} | " + " | ".join(str(v) for v in counts.values()) + " |"
        for row, counts in table.items()
    ]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in plots]
    misses = [r for r in results if r.false_release or not r.correct]
    lines += ["", f"## Cases not decided as expected ({len(misses)})", ""]
    if misses:
        lines += ["| id | expected | decided | reason | write | heard |", "|---" * 6 + "|"]
        for r in misses:
            heard = " / ".join(h.replace("|", "\\|") for h in r.heard)
            flag = " **FALSE RELEASE**" if r.false_release else ""
            lines.append(
                f"| {r.id} | {r.expect} | {r.actual}{flag} | {r.reason or ''} "
                f"| {r.write or ''} | {heard} |"
            )
    return "\n".join(lines) + "\n"


def write_plots(results: Sequence[Result], directory: Path) -> list[str]:
    """Decision confusion and latency histogram as PNGs in ``directory``; their file names."""
    # Imported only here: a run without --report never loads the plotting stack.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    table = confusion(results)
    rows, cols = list(table), list(next(iter(table.values())))
    grid = [[table[r][c] for c in cols] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.imshow(grid, cmap="Blues")
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("decided")
    ax.set_ylabel("expected")
    top = max((v for row in grid for v in row), default=0)
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(
                j, i, str(v), ha="center", va="center", color="white" if v > top / 2 else "black"
            )
    ax.set_title("Decision confusion")
    fig.tight_layout()
    fig.savefig(directory / "confusion.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.hist([r.latency_ms for r in results], bins=40, color="#3465a4")
    ax.set_xlabel("latency per case (ms)")
    ax.set_ylabel("cases")
    ax.set_title("End-to-end latency (upload to decision)")
    fig.tight_layout()
    fig.savefig(directory / "latency.png", dpi=110)
    plt.close(fig)
    return ["confusion.png", "latency.png"]
