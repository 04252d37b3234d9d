"""``voicegate eval --url``: the corpus against a running ``voicegate serve``, and its refusals.

The twin test starts the real server as its own process, over a SQLite file, in front of the
notes server over stdio, with the real recogniser; the eval pairs over HTTP, proposes its sets
in the server's store, uploads signed audio and reads the upstream through the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, require
from tests.reliability.cluster import Served, free_port, running
from voicegate import cli
from voicegate.cli.arguments import DB_ENV
from voicegate.reasons import Reason
from voicegate.store import open_store
from voicegate_lab.cli import eval as eval_cli

CLIPS = FIXTURES / "corpus" / "clips"
GENUINE = "0002-genuine-en-en-us_f3-s175p50.ogg"  # "two", three cards open
SILENCE = "0012-silence-none-silence-05-None.ogg"
CORRUPT = "0074-corrupt-none-corrupt-png.ogg"
TOKEN = "eval-remote-bearer-token-0123456789"
# id, clip, cards, stage, expect, class, lang, user, replay_of (the replay guard is per user,
# so a replay comes from the same user as its original)
CASES = [
    ("genuine", GENUINE, 3, "choose", "choose:2", "genuine", "en", "u1", None),
    ("silence", SILENCE, 3, "final", "refuse", "silence", "none", "u2", None),
    ("corrupt", CORRUPT, 1, "choose", "refuse", "corrupt", "none", "u1", None),
    ("replay", GENUINE, 3, "choose", "refuse", "replay", "en", "u1", "genuine"),
]


def write_manifest(folder: Path) -> Path:
    """The cases above as a manifest beside copies of their clips."""
    (folder / "clips").mkdir()
    keys = ("id", "audio", "cards", "stage", "expect", "class", "lang", "user", "replay_of")
    lines = []
    for case in CASES:
        shutil.copy(CLIPS / case[1], folder / "clips" / case[1])
        line = dict(zip(keys, (case[0], f"clips/{case[1]}", *case[2:]), strict=True))
        lines.append(json.dumps({k: v for k, v in line.items() if v is not None}))
    path = folder / "manifest.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def serve(folder: Path, db: Path) -> Served:
    """``voicegate serve`` over ``db`` in front of the notes server over stdio, voice on."""
    from voicegate.voice import models

    require(models.describe("tiny.en").status == "present", "the tiny.en model")
    port = free_port()
    argv = [
        sys.executable, "-m", "voicegate.cli", "serve",
        "--upstream-cmd", f"{sys.executable} -m voicegate.mcp.notes",
        "--reads", "list_notes", "--writes", "write_note",
        "--db", str(db), "--port", str(port), "--token", TOKEN,
        "--voice-model", "tiny.en", "--lang", "en",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOICEGATE_")}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    log = folder / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return Served("serve", proc, port, log)


@pytest.mark.whisper
@pytest.mark.slow
async def test_the_corpus_runs_against_a_running_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write_manifest(tmp_path)
    db = tmp_path / "gate.db"
    served = serve(tmp_path, db)
    out = tmp_path / "out.json"
    argv = [
        "eval", "--manifest", str(manifest), "--json", str(out), "--no-progress",
        "--url", served.base, "--db", str(db), "--token", TOKEN,
    ]  # fmt: skip
    async with running(served):
        status = await asyncio.to_thread(cli.main, argv)
        wrong_token = await asyncio.to_thread(cli.main, [*argv[:-1], "not-the-token"])
    assert status == 0, served.output()
    assert wrong_token == 2
    assert "refused the bearer token" in capsys.readouterr().err
    doc = json.loads(out.read_text(encoding="utf-8"))
    results = {r["id"]: r for r in doc["results"]}
    assert doc["cases"] == len(CASES)
    assert doc["false_releases"] == 0
    genuine = results["genuine"]
    assert (genuine["decision"], genuine["card"]) == ("choose", 2), genuine
    assert {k: (r["released"], r["write"]) for k, r in results.items()} == {
        "genuine": (True, 2),
        "silence": (False, None),
        "corrupt": (False, None),
        "replay": (False, None),
    }
    assert results["replay"]["reason"] == Reason.AUDIO_REUSED.value, results["replay"]
    assert all(r["correct"] for r in results.values()), doc["results"]
    # Every set the eval opened was answered or cancelled: nothing is left waiting.
    store = await open_store(str(db))
    try:
        assert [await store.pending.list_for_user(u) for u in ("u1", "u2")] == [[], []]
        assert {d.user for d in await store.devices.list(None)} == {"u1", "u2"}
    finally:
        await store.close()


def test_url_without_the_servers_store_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DB_ENV, raising=False)
    argv = ["eval", "--manifest", str(tmp_path / "m.jsonl"), "--url", "http://127.0.0.1:9"]
    assert cli.main([*argv, "--token", "t"]) == 2
    assert "--url needs --db" in capsys.readouterr().err


def test_url_without_a_token_and_db_without_url_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VOICEGATE_TOKEN", raising=False)
    manifest = ["eval", "--manifest", str(tmp_path / "m.jsonl")]
    assert cli.main([*manifest, "--url", "http://127.0.0.1:9", "--db", "x.db"]) == 2
    assert "--token" in capsys.readouterr().err
    assert cli.main([*manifest, "--db", "x.db"]) == 2
    assert "go with --url" in capsys.readouterr().err


def test_a_server_that_does_not_answer_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write_manifest(tmp_path)
    db = tmp_path / "gate.db"
    db.touch()
    url = f"http://127.0.0.1:{free_port()}"
    argv = ["eval", "--manifest", str(manifest), "--url", url, "--db", str(db), "--token", "t"]
    assert cli.main([*argv, "--no-progress"]) == 2
    assert f"cannot reach {url}" in capsys.readouterr().err
    assert cli.main([*argv[:-2], "--db", "memory", "--token", "t"]) == 2
    assert "--db memory" in capsys.readouterr().err


def test_the_report_command_hides_the_token_and_the_store_password() -> None:
    argv = ["--url", "http://h", "--token", "s3cret", "--db=postgresql://u:pw@h/db"]
    assert eval_cli.shown_command(argv) == [
        "--url",
        "http://h",
        "--token",
        "***",
        "--db=postgresql://u:***@h/db",
    ]
