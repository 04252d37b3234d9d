"""Enrolment lines of a manifest: taught through the device API, counted apart from cases.

A line with ``"enrol": true`` uploads its clip to ``POST /device/enrol/voice`` from the user's
paired device, signed like every answer, exactly as the approve page teaches an answer. It is
no case: it has no right or wrong, only taught or refused (a replay of an earlier take, say).
With ``"hard": true`` the user's device then sets "my speech is hard for recognisers", as the
page's switch does (``POST /device/enrol/hard``); a refusal of that counts as the take's.
What became of each take is a ``report.TakeReply``, which ``report.enrolment`` counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import httpx

from voicegate_lab.eval.manifest import Case
from voicegate_lab.eval.report import TakeReply

if TYPE_CHECKING:
    from voicegate_lab.eval.harness import BaseHarness


async def teach(harness: BaseHarness, case: Case, content_types: Mapping[str, str]) -> TakeReply:
    """Upload one enrolment take of ``case.user`` for ``case.expect``; with ``case.hard``, set
    the user's flag too, whatever became of the take (a refusal of the flag is reported as
    this line's, with ``hard_flag:`` before its reason)."""
    device = await harness.device(case.user)
    # The meaning rides in the query, which the signature covers; ":" needs no escaping there.
    path = f"/device/enrol/voice?meaning={case.expect_text}"
    kind = content_types.get(case.path.suffix.lower(), "application/octet-stream")
    answer = await harness.signed(
        device, "POST", path, body=case.path.read_bytes(), headers={"content-type": kind}
    )
    taught = TakeReply(case.id, case.user, case.expect_text, answer.status_code, _reason(answer))
    if not case.hard:
        return taught
    flag = await harness.signed(
        device,
        "POST",
        "/device/enrol/hard",
        body=json.dumps({"hard": True}).encode(),
        headers={"content-type": "application/json"},
    )
    if flag.status_code == 200:
        return taught
    return replace(taught, status=flag.status_code, reason=f"hard_flag:{_reason(flag)}")


def _reason(answer: httpx.Response) -> str | None:
    """The refusal's reason, None for a 200 (or a body with none)."""
    if answer.status_code == 200:
        return None
    try:
        body = answer.json()
    except ValueError:
        return None
    reason = body.get("reason") if isinstance(body, dict) else None
    return reason if isinstance(reason, str) else None
