"""The voice specification stays a specification: its experiments go to the measurement log."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
# The bound the specification is held to; docs/voice-measurements.md has no bound.
MOST_LINES = 400


def test_the_voice_specification_is_at_most_400_lines() -> None:
    lines = (DOCS / "voice.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MOST_LINES, (
        f"docs/voice.md has {len(lines)} lines; move the experiment's detail to "
        "docs/voice-measurements.md and keep what it decided and its current figure"
    )
