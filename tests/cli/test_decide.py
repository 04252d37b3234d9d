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


@pytest.mark.whisper
def test_a_recording_refused_before_it_is_heard_names_no_language(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np
    import soundfile as sf

    silent = tmp_path / "silent.wav"
    sf.write(silent, np.zeros(16_000, dtype=np.float32), 16_000, subtype="PCM_16")
    assert main(["decide", str(silent), "--cards", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("refuse (silent)")
    assert "language" not in first
