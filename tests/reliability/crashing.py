"""The ``voicegate`` command line, killed with SIGKILL at one named step: the crash tests' entry.

``python -m tests.reliability.crashing POINT serve ...`` (or ``... POINT worker ...``) runs
``voicegate serve ...`` with the step hook of every gate and recogniser worker it builds armed
to kill the process when it passes ``POINT`` (``voicegate.faults``). The package's own hooks do
nothing: only this module, which no installed command reaches, arms one.

SIGKILL, not an exception, so that no ``finally`` block or shutdown hook gets to tidy up: the
process simply stops, as it would on a power cut or an out-of-memory kill.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from voicegate import cli, faults
from voicegate.gate.core import Gate
from voicegate.hearing import worker

STEPS = (*faults.POINTS, faults.GRANT_SPENT, faults.WHILE_HEARING)


def kill_at(point: str) -> Callable[[str], None]:
    """A step hook that kills this process when it hears ``point``, and ignores every other."""
    if point not in STEPS:
        raise ValueError(f"{point!r} is not a step: {', '.join(STEPS)}")

    def step(passed: str) -> None:
        if passed == point:
            os.kill(os.getpid(), signal.SIGKILL)

    return step


def arm(point: str) -> None:
    """Make ``kill_at(point)`` the ``on_step`` of every gate and worker made from now on.

    The defaults are changed where they live, so a gate built anywhere in the server gets it;
    a hook that moved or was renamed fails here, not by a crash test's process staying alive.
    """
    hook = kill_at(point)
    constructors: tuple[Any, ...] = (Gate.__init__, worker.work)
    for made in constructors:
        defaults: dict[str, Any] | None = made.__kwdefaults__
        if defaults is None or defaults.get("on_step") is not faults.ignore:
            raise RuntimeError(f"{made.__qualname__} has no on_step hook to arm")
        defaults["on_step"] = hook


def main(argv: Sequence[str]) -> int:
    """``crashing POINT COMMAND ...``: arm ``POINT``, then run ``voicegate COMMAND ...``."""
    point, *words = argv
    arm(point)
    return cli.main(words)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
