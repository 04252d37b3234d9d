"""The named steps of a release, of a granted call and of a hearing, as their hooks hear them.

The gate tells its ``on_step`` hook each step of a release as it passes it, and when a granted
call's use is spent (``Gate(on_step=...)``); a recogniser worker tells its own when it has heard
an utterance (``hearing.worker.work(on_step=...)``). Both hooks are ``ignore`` unless a caller
passes another: nothing in the package stops a process at a step. The crash tests' own entry
point, ``tests/reliability/crashing.py``, arms them to SIGKILL the process at one of these steps
and checks what a restart makes of what was left half done.
"""

from __future__ import annotations

# In release order: set claimed, nonce spent, upstream answered, receipt written, result recorded.
POINTS = ("after_claim", "after_nonce", "after_call", "after_receipt", "after_record")
# A granted call whose use the store has spent, before its write is claimed and run.
GRANT_SPENT = "after_grant_spend"
# A recogniser worker that has heard an utterance and not yet sent the hearing back.
WHILE_HEARING = "while_hearing"

__all__ = ["GRANT_SPENT", "POINTS", "WHILE_HEARING", "ignore"]


def ignore(point: str) -> None:
    """The step hook by default: ``point`` was passed, and nothing more happens."""
