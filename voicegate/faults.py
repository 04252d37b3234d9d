"""Crash testing only: end the process with SIGKILL at a named step of a release, of a granted
call or of a hearing.

Off unless the environment variable ``VOICEGATE_FAULT_POINT`` names one of ``POINTS``; an
operator never sets it. The crash tests start a real ``voicegate serve`` with it set, confirm a
write, and check what a restart makes of the half-done release. SIGKILL, not an exception, so
that no ``finally`` block or shutdown hook gets to tidy up: the process simply stops, as it
would on a power cut or an out-of-memory kill.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "VOICEGATE_FAULT_POINT"
# In release order: set claimed, nonce spent, upstream answered, receipt written, result recorded.
POINTS = ("after_claim", "after_nonce", "after_call", "after_receipt", "after_record")
# A granted call whose use the store has spent, before its write is claimed and run.
GRANT_SPENT = "after_grant_spend"
# A recogniser worker that has heard an utterance and not yet sent the hearing back.
WHILE_HEARING = "while_hearing"

__all__ = ["FAULT_ENV", "GRANT_SPENT", "POINTS", "WHILE_HEARING", "reach"]


def reach(point: str) -> None:
    """Kill this process now when ``VOICEGATE_FAULT_POINT`` names ``point``; else do nothing."""
    if os.environ.get(FAULT_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
