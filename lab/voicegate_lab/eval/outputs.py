"""What an evaluation run leaves behind: the JSON summary and the Markdown report with its plots.

Enrolment takes are counted apart: they teach a user's answers and are not cases.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voicegate_lab.eval import report


def write(
    results: Sequence[report.Result],
    taught: Sequence[report.TakeReply] = (),
    *,
    json_path: Path | None = None,
    report_dir: Path | None = None,
    command: str = "",
) -> dict[str, Any]:
    """The summary of ``results``, written as JSON to ``json_path`` and as ``report.md`` with
    PNG plots into ``report_dir``, where given; ``command`` is the line the report shows."""
    doc = report.summary(results)
    doc["enrolment"] = report.enrolment(taught)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", "utf-8")
    if report_dir:
        plots = report.write_plots(results, report_dir)
        text = report.markdown(results, command=command, plots=plots)
        if taught:
            e = doc["enrolment"]
            text += (
                f"\nEnrolment takes (not cases): {e['takes']} from {e['users']} users, "
                f"{e['taught']} taught, {e['refused']} refused {e['reasons']}.\n"
            )
        (report_dir / "report.md").write_text(text, encoding="utf-8")
    return doc
