"""``voicegate decide`` refuses what it cannot decide before loading any model."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicegate.cli import main


@pytest.mark.parametrize("cards", ["0", "6", "-1", "two"])
def test_a_card_count_outside_one_to_five_is_a_usage_error(cards: str) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["decide", "clip.flac", "--cards", cards])
    assert stop.value.code == 2


def test_a_missing_file_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["decide", str(tmp_path / "nope.flac"), "--cards", "1"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_folder_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["decide", str(tmp_path), "--cards", "1"]) == 2
    assert "Traceback" not in capsys.readouterr().err
