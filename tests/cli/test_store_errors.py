"""A store that cannot be used (a bad path, PostgreSQL down) is one line with the reason and exit
2 from every command that opens one, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from voicegate.cli import main
from voicegate.errors import ConfigError
from voicegate.secrets import KEYS_ENV
from voicegate.settings import keys_for

# Nothing listens on port 1: the connection is refused at once.
DOWN = "postgresql://127.0.0.1:1/test"


def bad_stores(tmp_path: Path) -> dict[str, str]:
    """Stores no command can open: PostgreSQL down, a path under a file, a folder."""
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-folder").mkdir()
    return {
        "postgres_down": DOWN,
        "under_a_file": str(tmp_path / "a-file" / "gate.db"),
        "a_folder": str(tmp_path / "a-folder"),
    }


def one_line(text: str) -> str:
    """The one line ``text`` holds; fails on none, several or a traceback."""
    assert "Traceback" not in text
    (line,) = text.splitlines()
    return line


@pytest.mark.slow
@pytest.mark.parametrize("which", ["postgres_down", "under_a_file", "a_folder"])
def test_serve_on_a_store_it_cannot_open_says_why_in_one_line_and_exits_2(
    which: str, tmp_path: Path
) -> None:
    db = bad_stores(tmp_path)[which]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(KEYS_ENV, None)
    serve = ["serve", "--upstream-cmd", "true", "--no-voice", "--port", "0", "--db", db]
    done = subprocess.run(
        [sys.executable, "-m", "voicegate.cli", *serve],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    line = one_line(done.stderr)
    assert line.startswith("voicegate")


# The commands that only read or delete what a store holds, and every command that opens one.
READERS = [
    ["devices", "list"],
    ["devices", "revoke", "dev_x"],
    ["answers", "list", "--user", "u"],
    ["answers", "delete", "--user", "u"],
    ["receipts", "list"],
]
STORE_COMMANDS = [*READERS, ["pair", "--user", "u"], ["receipts", "verify"]]


def test_a_key_file_under_a_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError):
        keys_for(str(tmp_path / "a-file" / "gate.db"), env={})


@pytest.mark.parametrize("argv", STORE_COMMANDS)
@pytest.mark.parametrize("which", ["postgres_down", "under_a_file", "a_folder"])
def test_a_store_command_on_a_store_it_cannot_open_says_why_in_one_line_and_exits_2(
    argv: list[str],
    which: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # keys from the environment, so each command reaches its store
    monkeypatch.setenv(KEYS_ENV, "k1:" + "s" * 43)
    assert main([*argv, "--db", bad_stores(tmp_path)[which]]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert one_line(err).startswith(f"voicegate {argv[0]}: ")


@pytest.mark.parametrize("argv", READERS)
def test_a_command_in_a_folder_with_no_database_says_so_and_creates_nothing(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VOICEGATE_DB", raising=False)
    monkeypatch.delenv(KEYS_ENV, raising=False)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert one_line(err) == f"voicegate {argv[0]}: no database at voicegate.db"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [*READERS, ["decide", "clip.flac", "--cards", "2", "--user", "u"]])
def test_a_command_on_an_empty_database_file_says_so_and_writes_nothing(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A file that holds no store (made by ``touch``, say) is not made into one by a command
    that only reads or changes what a store already holds."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VOICEGATE_DB", raising=False)
    monkeypatch.delenv(KEYS_ENV, raising=False)
    (tmp_path / "voicegate.db").write_bytes(b"")
    (tmp_path / "clip.flac").write_bytes(b"not audio: the store is opened first")
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert one_line(err) == (
        f"voicegate {argv[0]}: no voicegate store in voicegate.db: it holds no voicegate tables"
    )
    assert (tmp_path / "voicegate.db").read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.flac", "voicegate.db"]
