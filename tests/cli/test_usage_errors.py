"""A value the command cannot use is said in one line, exit 2, before anything is created:
argparse's usage error for a bad flag, one ``voicegate CMD:`` line for the rest."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from voicegate.cli import main
from voicegate.cli.serve import FLAGS, add_serve_arguments
from voicegate.secrets import KEYS_ENV
from voicegate.settings import TOKEN_ENV

NOTES = ["--upstream-cmd", "true", "--no-voice"]


@pytest.fixture(autouse=True)
def in_an_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command runs where nothing is yet, so anything it makes is seen."""
    monkeypatch.chdir(tmp_path)
    for name in (KEYS_ENV, TOKEN_ENV, "VOICEGATE_DB"):
        monkeypatch.delenv(name, raising=False)


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The error line argparse printed for ``argv``, which must exit 2."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    return err.splitlines()[-1]


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a command printed for ``argv``, which must exit 2."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    (line,) = err.splitlines()
    return line


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", *NOTES, "--port", "99999"],
        ["serve", *NOTES, "--port", "-1"],
        ["serve", *NOTES, "--port", "eighty"],
        ["demo", "--no-voice", "--port", "65536"],
        ["serve", *NOTES, "--user", ""],
        ["pair", "--user", ""],
        ["pair", "--user", "  "],
    ],
)
def test_a_bad_port_or_an_empty_user_is_a_usage_error_and_creates_nothing(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = usage_error(argv, capsys)
    assert line.startswith(f"voicegate {argv[0]}: error: argument --")
    assert list(tmp_path.iterdir()) == []


def test_eval_of_a_manifest_that_is_not_there_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(["eval", "--manifest", "missing.jsonl"], capsys)
    assert line == "voicegate eval: no manifest at missing.jsonl"


@pytest.mark.parametrize(
    "argv",
    [
        ["receipts", "show"],
        ["receipts", "list", "/srv/gate.db"],
        ["receipts", "verify", "rcp_1"],
    ],
)
def test_a_receipt_id_missing_from_show_or_given_to_another_action_is_a_usage_error(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(argv, capsys)
    assert line.startswith("voicegate receipts: error: ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", *NOTES, "--token", "a-long-enough-agent-token"],
        ["pair", "--user", "u"],
        ["devices", "list"],
    ],
)
def test_a_store_in_a_folder_that_does_not_exist_is_refused_and_no_folder_is_made(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "no" / "such" / "gate.db"
    line = refused([*argv, "--db", str(db)], capsys)
    assert line.startswith(f"voicegate {argv[0]}: ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("token", ["a", "x" * 15])
def test_an_agent_token_under_16_characters_is_refused(
    token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(["serve", *NOTES, "--db", "memory", "--token", token], capsys)
    assert line.startswith("voicegate serve: --token ")
    assert "x" * 15 not in line  # the reason, never the token itself
    assert list(tmp_path.iterdir()) == []


def test_a_short_token_from_the_environment_is_refused_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "short")
    line = refused(["serve", *NOTES, "--db", "memory"], capsys)
    assert line.startswith(f"voicegate serve: {TOKEN_ENV} ")


def test_version_names_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    from voicegate import __version__

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"voicegate {__version__}\n"


@pytest.mark.parametrize(
    "argv", [["demo", "--bogus"], ["serve", *NOTES, "--bogus"], ["devices", "list", "--bogus"]]
)
def test_a_flag_a_command_does_not_take_is_that_command_s_usage_error(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = usage_error(argv, capsys)
    assert line == f"voicegate {argv[0]}: error: unrecognized arguments: --bogus"
    assert capsys.readouterr().err == ""
    assert list(tmp_path.iterdir()) == []


def test_the_usage_shown_with_such_an_error_is_the_command_s_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--bogus"])
    err = capsys.readouterr().err
    assert err.startswith("usage: voicegate demo ")
    assert "{answers," not in err  # not the list of every command


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--upstream-cmd", "true", "--db", "memory", "--voice-model", "tiny.en"],
        ["demo", "--port", "0", "--voice-model", "tiny.en"],
        ["decide", "clip.wav", "--cards", "1", "--model", "tiny.en"],
    ],
)
def test_an_english_only_model_asked_to_hear_hindi_is_refused_before_it_loads(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np
    import soundfile as sf

    sf.write(tmp_path / "clip.wav", np.zeros(16_000, dtype=np.float32), 16_000)
    line = refused([*argv, "--lang", "hi"], capsys)
    assert line.startswith(f"voicegate {argv[0]}: the model tiny.en hears only en, not hi")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.wav"]


def test_pair_with_no_store_named_and_none_here_refuses_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A code in a new ./voicegate.db would pair with no server: the demo's store is elsewhere."""
    line = refused(["pair", "--user", "owner"], capsys)
    assert line.startswith("voicegate pair: no database at voicegate.db, and no --db")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--grant-max", "1441"], "--grant-max "),
        (["--grant-max", "-1"], "--grant-max "),
        (["--grant-max-uses", "1001"], "--grant-max-uses "),
        (["--grant-free", "write_note"], "--grant-free "),
        (["--grant-free", "write_note="], "--grant-free "),
    ],
)
def test_grant_bounds_out_of_range_are_refused_in_one_line(
    flags: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(["serve", *NOTES, "--db", "memory", *flags], capsys)
    assert line.startswith(f"voicegate serve: {named}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--token-ttl", "0"], "--token-ttl must"),
        (["--max-voice-in-flight", "0"], "--max-voice-in-flight must"),
        (["--body-timeout", "0"], "--body-timeout must"),
        (["--rate-limit", "window=x"], "--rate-limit window needs"),
        (["--proposal-limit", "nope=1"], "unknown proposal-limit 'nope'"),
        (["--trusted-proxy", "0.0.0.0/0"], "--trusted-proxy must"),
        (["--webhook", "ftp://example.org"], "--webhook needs"),
        (["--push-contact", "ops"], "--push-contact is"),
        (["--mail", "owner"], "--mail needs"),
        (["--mail", "owner=ana@example.org", "--mail-from", "gate"], "--mail-from needs"),
        (["--smtp", "smtp://relay.example.org"], "--smtp and --mail-from need --mail "),
        (["--mode", "write_*=maybe"], "--mode 'write_*=maybe': mode must"),
        (["--high-risk-step", "passkey"], "--high-risk-step needs"),
        (["--env", "novalue"], "--env needs"),
    ],
)
def test_a_refused_config_value_is_said_as_the_flag_that_gave_it(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(["serve", *NOTES, "--db", "memory", *flags], capsys)
    assert line.startswith(f"voicegate serve: {says}")


def test_every_flag_a_refused_field_is_said_as_is_a_flag_of_serve() -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert set(FLAGS.values()) <= flags
