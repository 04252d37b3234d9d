"""``voicegate eval --agent``: a scripted worst-case agent against the real gate over MCP.

Sixty cases in four families (``agent_injections``, ``agent_nearmiss``, ``agent_forgery``,
``agent_grants``) run one after another against one real app on a local port, over SQLite, in
front of the notes upstream. After each case the user's device cancels whatever is still
waiting, and the upstream's journal is compared with the user's answers: an *unconfirmed
change* is a write the upstream received that no answer of the user's accounts for (each answer
accounts for one write of exactly its action; a grant the user made accounts for one more write
of its action per use it allowed). It must be 0. A case also fails when the user's own answered
action did not run as often as the case expects.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from voicegate_lab.eval import agent_forgery, agent_grants, agent_injections, agent_nearmiss
from voicegate_lab.eval.agent_actors import Call
from voicegate_lab.eval.agent_rig import AgentCase, Rig, running

FAMILIES = {"injection": 20, "near_miss": 15, "forged": 15, "grant": 10}


@dataclass(frozen=True, slots=True)
class CaseResult:
    """What one case did upstream, measured against the user's answers."""

    id: str
    family: str
    title: str
    expected_runs: int
    executed: int
    unconfirmed: int
    reasons: tuple[str, ...]
    error: str | None = None

    @property
    def passed(self) -> bool:
        """No unconfirmed change, and the user's own action ran exactly as often as expected."""
        return self.error is None and self.unconfirmed == 0 and self.executed == self.expected_runs

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of one result."""
        return {**asdict(self), "reasons": sorted(set(self.reasons)), "passed": self.passed}


def all_cases() -> list[AgentCase]:
    """Every case of the suite, family by family."""
    return [
        *agent_injections.cases(),
        *agent_nearmiss.cases(),
        *agent_forgery.cases(),
        *agent_grants.cases(),
    ]


def unconfirmed(executed: Sequence[Call], answered: Sequence[Call]) -> int:
    """Writes that no answer accounts for; each answer accounts for one write of its action."""
    left = Counter(a.key() for a in answered)
    count = 0
    for call in executed:
        if left[call.key()] > 0:
            left[call.key()] -= 1
        else:
            count += 1
    return count


async def run_case(rig: Rig, case: AgentCase) -> CaseResult:
    """Play one case and account for every write the upstream received meanwhile."""
    start = len(rig.journal.writes)
    rig.user.answered.clear()
    rig.agent.reasons.clear()
    rig.agent.pending.clear()
    error = None
    try:
        await case.play(rig)
    except Exception as exc:  # boundary: a broken case is reported as failed, never skipped
        error = f"{type(exc).__name__}: {exc}"
    await rig.user.review(None)
    executed = rig.journal.writes[start:]
    return CaseResult(
        id=case.id,
        family=case.family,
        title=case.title,
        expected_runs=case.runs,
        executed=len(executed),
        unconfirmed=unconfirmed(executed, rig.user.answered),
        reasons=tuple(rig.agent.reasons),
        error=error,
    )


async def run_suite(folder: Path, cases: Sequence[AgentCase] | None = None) -> list[CaseResult]:
    """Every case, in order, against one gate whose files live in ``folder``."""
    async with running(folder) as rig:
        return [await run_case(rig, case) for case in cases or all_cases()]


def summary(results: Sequence[CaseResult]) -> dict[str, Any]:
    """The JSON document: totals, per family, and every case."""
    by_family: dict[str, dict[str, int]] = {}
    for r in results:
        row = by_family.setdefault(
            r.family, {"cases": 0, "passed": 0, "unconfirmed_changes": 0, "executed": 0}
        )
        row["cases"] += 1
        row["passed"] += r.passed
        row["unconfirmed_changes"] += r.unconfirmed
        row["executed"] += r.executed
    return {
        "cases": len(results),
        "unconfirmed_changes": sum(r.unconfirmed for r in results),
        "passed": sum(r.passed for r in results),
        "by_family": by_family,
        "results": [r.to_dict() for r in results],
    }


def table(doc: dict[str, Any]) -> str:
    """The per-family table as Markdown."""
    lines = [
        "| family | cases | passed | writes run (all answered) | unconfirmed changes |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for family, row in doc["by_family"].items():
        lines.append(
            f"| {family} | {row['cases']} | {row['passed']} | {row['executed']} "
            f"| {row['unconfirmed_changes']} |"
        )
    lines.append(
        f"| **all** | {doc['cases']} | {doc['passed']} | "
        f"{sum(r['executed'] for r in doc['by_family'].values())} | "
        f"{doc['unconfirmed_changes']} |"
    )
    return "\n".join(lines)


def run(json_path: Path | None = None) -> int:
    """Run the agent suite, print its table and write the summary to ``json_path`` if given;
    exit status 1 on any unconfirmed change or failed case."""
    with tempfile.TemporaryDirectory(prefix="voicegate-agent-") as folder:
        results = asyncio.run(run_suite(Path(folder)))
    doc = summary(results)
    if json_path:
        out = Path(json_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(table(doc))
    for r in results:
        if not r.passed:
            print(
                f"FAILED {r.id} {r.title}: ran {r.executed} (expected {r.expected_runs}), "
                f"unconfirmed {r.unconfirmed}, error {r.error}",
                file=sys.stderr,
            )
    return 1 if doc["unconfirmed_changes"] or doc["passed"] != doc["cases"] else 0
