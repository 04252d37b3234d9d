"""The case protocol: one manifest case end to end, and a manifest's cases in order.

For each case the runner opens a pending set of ``cards`` distinct ``write_note`` actions for
the case's user (high risk and advanced to the final card by a signed tap when the case is at
``stage: final``), uploads the clip as a signed voice answer from that user's paired device,
and then asks the upstream itself which note, if any, was written. The server behind the
harness is the real app in this process (``voicegate_lab.eval.local``) or a running ``voicegate
serve`` (``voicegate_lab.eval.remote``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from tqdm import tqdm

from voicegate.domain import Stage
from voicegate.reasons import Kind, Reason
from voicegate_lab.eval import enrol, report
from voicegate_lab.eval.harness import CONTENT_TYPES, BaseHarness
from voicegate_lab.eval.manifest import Case


def parse_answer(status: int, body: Any) -> tuple[str, int | None, str | None, tuple[str, ...]]:
    """(decision, card, reason, heard) from a /device/voice answer, whatever its status."""
    if not isinstance(body, dict):
        return Kind.REFUSE.value, None, Reason.BAD_REQUEST.value, ()
    decision = str(body.get("decision") or Kind.REFUSE.value)
    if decision not in report.KINDS or (status >= 400 and "decision" not in body):
        decision = Kind.REFUSE.value
    card = body.get("card") if decision == Kind.CHOOSE.value else None
    heard = tuple(str(h) for h in body.get("heard", ()) or ())
    return decision, card, body.get("reason"), heard


async def run_case(
    harness: BaseHarness, case: Case, *, timer: Callable[[], float] = time.perf_counter
) -> report.Result:
    """One case end to end; the latency is the voice upload's round trip."""
    device = await harness.device(case.user)
    pending_id = await harness.open_set(case)
    if case.stage is Stage.FINAL:
        await harness.advance(device, case, pending_id)
    nonce = await harness.nonce(device, pending_id)
    audio = case.path.read_bytes()
    headers = {
        "content-type": CONTENT_TYPES.get(case.path.suffix.lower(), "application/octet-stream"),
        "X-Voicegate-Pending": pending_id,
        "X-Voicegate-Nonce": nonce,
    }
    start = timer()
    answer = await harness.signed(device, "POST", "/device/voice", body=audio, headers=headers)
    latency_ms = (timer() - start) * 1000.0
    try:
        body = answer.json()
    except ValueError:
        body = None
    decision, card, reason, heard = parse_answer(answer.status_code, body)
    write = await harness.written(case)
    await harness.settle(pending_id, case.user)
    return report.Result(
        id=case.id,
        label=case.label,
        lang=case.lang,
        expect=case.expect_text,
        decision=decision,
        card=card,
        reason=reason,
        write=write,
        expected_write=report.expected_write(case),
        latency_ms=latency_ms,
        heard=heard,
        single_card=case.cards == 1 and case.stage is Stage.CHOOSE,
    )


async def evaluate(
    cases: Sequence[Case], harness: BaseHarness, *, progress: bool = True
) -> list[report.Result]:
    """Run ``cases`` in order (a replay must follow its original) and collect the results."""
    results: list[report.Result] = []
    bar = tqdm(cases, desc="eval", unit="case", disable=not progress, file=sys.stderr)
    false_releases = 0
    for case in bar:
        if case.enrol:
            harness.taught.append(await enrol.teach(harness, case, CONTENT_TYPES))
            continue
        result = await run_case(harness, case)
        results.append(result)
        if result.false_release:
            false_releases += 1
            # Said at once, so a long run shows its worst news before it ends.
            bar.write(
                f"FALSE RELEASE {case.id}: expected {case.expect_text}, decided "
                f"{result.actual}, wrote card {result.write}, heard {list(result.heard)}",
                file=sys.stderr,
            )
        bar.set_postfix(false_releases=false_releases, refresh=False)
    return results
