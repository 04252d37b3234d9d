"""``voicegate decide`` refuses what it cannot decide before loading any model, and with
``--user`` decides as that user, fused with the answers they taught."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, require
from voicegate.cli import main
from voicegate.store import open_store
from voicegate.voice import audio, calibration, models
from voicegate.voice.enrolment import stored
from voicegate.voice.whisper import FasterWhisperTranscriber


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


def test_deciding_as_a_user_needs_the_store_they_taught_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store is opened before the model loads, and never created by deciding."""
    clip = tmp_path / "clip.flac"
    clip.write_bytes(b"not audio: the store is opened first")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VOICEGATE_DB", raising=False)
    assert main(["decide", str(clip), "--cards", "2", "--user", "alice"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == ["voicegate decide: no database at voicegate.db"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.flac"]


def test_an_empty_user_name_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as stop:
        main(["decide", "clip.flac", "--cards", "2", "--user", " "])
    assert stop.value.code == 2


@pytest.mark.whisper
@pytest.mark.corpus
@pytest.mark.slow
def test_deciding_as_a_user_prints_the_fused_rule_and_probability(
    fsdd: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixtures/audio/clips/fsdd_2_theo_0.flac on five cards: the recogniser alone decides card
    two; as theo, who taught takes 1-3 of "one".."five" (the corpus), his templates weigh in and
    the release is the fused probability's. A user who taught nothing gets the recogniser alone.
    """
    require(models.describe("tiny.en").status in ("present", "not_assembled"), "tiny.en")
    db = tmp_path / "gate.db"
    asyncio.run(teach(str(db), fsdd))
    clip = str(FIXTURES / "clips" / "fsdd_2_theo_0.flac")
    assert main(["decide", clip, "--cards", "5", "--user", "theo", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("choose 2  heard ['Two.']")
    (rule,) = [line.split() for line in lines if line.lstrip().startswith("rule ")]
    assert rule[:3] == ["rule", "fused", "probability"] and rule[4:6] == ["fused", "probability"]
    assert float(rule[6]) >= calibration.of("tiny.en").card
    # What the templates said: the nearest taught answer first, against theo's radius for it.
    (taught,) = [line.strip() for line in lines if line.lstrip().startswith("taught ")]
    assert taught.startswith("taught  choose:2 ") and "radius" in taught, taught
    assert taught.split("; ")[-1] in ("a clear match", "nearest by the margin, outside the radius")
    assert main(["decide", clip, "--cards", "5", "--user", "theo", "--db", str(db), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)["taught"]
    assert said["nearest"] == "choose:2" and said["hard"] is False
    assert set(said["distances"]) == {f"choose:{k}" for k in range(1, 6)}
    assert min(said["distances"], key=said["distances"].get) == "choose:2"
    assert main(["decide", clip, "--cards", "5", "--user", "alice", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == ["voicegate decide: alice taught no answers"]
    assert "  rule decided  probability " in out and "fused" not in out
    assert "taught" not in out


async def teach(url: str, fsdd: Path) -> None:
    """Theo's takes 1-3 of "one".."five", taught as cards one to five, in the store at ``url``."""
    recogniser = FasterWhisperTranscriber("tiny.en", device="cpu")
    store = await open_store(url, create=True)
    try:
        for digit in range(1, 6):
            for take in range(1, 4):
                clip = audio.decode((fsdd / f"{digit}_theo_{take}.wav").read_bytes())
                row = stored("theo", f"choose:{digit}", "", recogniser.frames(clip.samples),
                             kind="tiny.en", now=float(take), device="d1")  # fmt: skip
                await store.templates.add(row)
    finally:
        await store.close()


@pytest.mark.parametrize(
    "data",
    [
        b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(range(256)) * 8,  # an MP3's tag, then frames
        bytes((i * 37 + 11) % 256 for i in range(4096)),  # bytes that are no format at all
        b"RIFF\x24\x00\x00\x00WAVEnot a chunk",  # a WAV header over nothing that decodes
    ],
    ids=["mp3", "noise_bytes", "broken_wav"],
)
def test_a_file_that_is_not_audio_it_reads_names_the_formats_and_exits_2(
    data: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a decision but a usage error, said before any model loads."""
    clip = tmp_path / "clip.bin"
    clip.write_bytes(data)
    assert main(["decide", str(clip), "--cards", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith(f"voicegate decide: {clip}: ")
    assert "WAV, FLAC, OGG (Vorbis or Opus), WebM/Opus or MP4/AAC" in line
