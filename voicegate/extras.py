"""The optional extras of the package and the modules each brings.

A plain ``pip install voicegate-mcp`` runs the gate on SQLite or in memory. ``[postgres]`` brings
the PostgreSQL driver; ``[hindi]`` the multilingual model (``voicegate.voice.models`` names it
itself). Code that needs one imports its module through ``need``, so a missing extra is one
``MissingExtra`` naming the install command, never an ``ImportError`` from deep inside.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from voicegate.errors import MissingExtra

# module -> the extra that installs it
EXTRA_OF: dict[str, str] = {
    "asyncpg": "postgres",
}


def need(module: str, needs: str) -> ModuleType:
    """``module`` imported; ``MissingExtra`` naming its extra when it is not installed.

    ``needs`` names what wants it, for the message: "a PostgreSQL store".
    """
    top = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        # Only the extra's own module counts as missing; a broken install inside it is a bug
        # to see in full.
        if exc.name != top:
            raise
        raise MissingExtra(needs, EXTRA_OF[top]) from None
