"""``voicegate receipts``: listing, export, heads, and a verify that catches any edited,
deleted or reordered receipt, a cut-short chain, and a rollback against a saved copy of heads."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from voicegate.cli import main
from voicegate.clock import ManualClock
from voicegate.domain import Risk
from voicegate.gate.core import Gate, GatePolicy
from voicegate.reasons import Kind
from voicegate.settings import keys_for
from voicegate.store import open_store

from .helpers import Upstream, actions, evidence, pair


async def _receipts(db: Path, user: str = "u1", count: int = 2) -> None:
    """``count`` receipts of ``user``, released through the gate as a server would."""
    store = await open_store(str(db))
    clock = ManualClock()
    keys = keys_for(str(db), env={})
    assert keys is not None
    gate = Gate(
        store,
        executor=Upstream(),
        policy=GatePolicy(is_write=lambda t: True),
        receipt_keys=keys,
        clock=clock,
    )
    device = await pair(store, user)
    for _ in range(count):
        pending = await gate.propose(user, actions(1), risk=Risk.LOW)
        assert (await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))).released
    await store.close()


@pytest.fixture
async def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("VOICEGATE_SECRET_KEYS", raising=False)
    path = tmp_path / "gate.db"
    await _receipts(path)
    return path


def test_verify_accepts_an_intact_chain(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["receipts", "verify", "--db", str(db)]) == 0
    assert "2 receipts, 0 problems" in capsys.readouterr().out


def test_list_shows_each_receipt_with_its_time_in_iso_8601_utc(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["receipts", "list", "--db", str(db)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    # the receipts ran at ManualClock's default start, 1_800_000_000 s
    assert [row[4] for row in rows] == ["2027-01-15T08:00:00Z"] * 2


def test_export_keeps_the_times_as_unix_seconds(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["receipts", "export", "--db", str(db)]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert [r["executed_at"] for r in exported] == [1_800_000_000.0] * 2


def test_verify_detects_an_edited_receipt(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with sqlite3.connect(db) as conn:
        (data,) = conn.execute("SELECT data FROM vg_receipts WHERE seq = 1").fetchone()
        edited = json.loads(data)
        edited["arguments"] = {"name": "note1", "text": "something else"}
        conn.execute("UPDATE vg_receipts SET data = ? WHERE seq = 1", (json.dumps(edited),))
    assert main(["receipts", "verify", "--db", str(db)]) == 1


def test_verify_detects_a_deleted_receipt(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM vg_receipts WHERE seq = 1")
    assert main(["receipts", "verify", "--db", str(db)]) == 1


def test_export_writes_every_receipt_as_json(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["receipts", "export", "--db", str(db)]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert [r["seq"] for r in exported] == [1, 2]
    assert all(r["outcome"] == "executed" for r in exported)


def test_the_key_file_beside_the_database_is_private(db: Path) -> None:
    mode = (db.parent / "gate.db.keys").stat().st_mode & 0o777
    assert mode == 0o600


def _sql(db: Path, *statements: str) -> None:
    with sqlite3.connect(db) as conn:
        for statement in statements:
            conn.execute(statement)


def _verify(db: Path, *extra: str) -> int:
    return main(["receipts", "verify", "--db", str(db), *extra])


def test_verify_detects_a_deleted_last_receipt(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sql(db, "DELETE FROM vg_receipts WHERE seq = 2")
    assert _verify(db) == 1
    out = capsys.readouterr().out
    assert "u1#2: truncated" in out and "claim_missing" in out


def test_verify_detects_every_receipt_of_a_user_deleted(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sql(db, "DELETE FROM vg_receipts WHERE user_id = 'u1'")
    assert _verify(db) == 1
    _sql(db, "DELETE FROM vg_receipt_heads WHERE user_id = 'u1'")
    assert _verify(db) == 1
    assert "missing_chain" in capsys.readouterr().out


def test_receipts_after_a_deleted_tail_take_new_numbers_and_verify_still_fails(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sql(db, "DELETE FROM vg_receipts WHERE seq = 2")
    asyncio.run(_receipts(db, count=2))
    assert _verify(db) == 1
    assert "missing" in capsys.readouterr().out
    with sqlite3.connect(db) as conn:
        seqs = [row[0] for row in conn.execute("SELECT seq FROM vg_receipts ORDER BY seq")]
    assert seqs == [1, 3, 4]


def test_verify_detects_reordered_receipts(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, seq, data FROM vg_receipts").fetchall()
        conn.execute("UPDATE vg_receipts SET seq = -seq")
        for receipt_id, seq, data in rows:
            swapped = {**json.loads(data), "seq": 3 - seq}
            conn.execute(
                "UPDATE vg_receipts SET seq = ?, data = ? WHERE id = ?",
                (3 - seq, json.dumps(swapped), receipt_id),
            )
    assert _verify(db) == 1
    assert "edited" in capsys.readouterr().out


def test_head_prints_the_signed_heads_and_roster_as_json(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["receipts", "head", "--db", str(db)]) == 0
    printed = json.loads(capsys.readouterr().out)
    (head,) = printed["heads"]
    assert (head["user"], head["seq"]) == ("u1", 2) and head["signature"]
    assert printed["roster"]["users"] == 1


def test_an_older_copy_of_the_database_is_behind_a_saved_head(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    older = db.read_bytes()
    asyncio.run(_receipts(db, count=1))
    assert main(["receipts", "head", "--db", str(db)]) == 0
    saved = tmp_path / "head.json"
    saved.write_text(capsys.readouterr().out)
    assert _verify(db, "--expect-head", str(saved)) == 0

    db.write_bytes(older)  # restored from a backup: receipts and heads rolled back together
    assert _verify(db) == 0
    assert _verify(db, "--expect-head", str(saved)) == 1
    assert "u1#3: behind_expected" in capsys.readouterr().out


def test_an_unreadable_heads_file_is_refused(db: Path, tmp_path: Path) -> None:
    saved = tmp_path / "head.json"
    saved.write_text("[1, 2]")
    assert _verify(db, "--expect-head", str(saved)) == 2
    assert _verify(db, "--expect-head", str(tmp_path / "absent.json")) == 2


@pytest.mark.parametrize("action", ["list", "show", "export", "head", "verify"])
def test_a_missing_database_is_refused_and_nothing_is_created(
    action: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICEGATE_SECRET_KEYS", raising=False)
    missing = tmp_path / "nowhere" / "gate.db"
    receipt_id = ["r1"] if action == "show" else []  # only show takes one
    assert main(["receipts", action, *receipt_id, "--db", str(missing)]) == 2
    assert "no database" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_verify_without_the_key_file_says_so_and_makes_no_key(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = db.parent / "gate.db.keys"
    keys.unlink()
    assert _verify(db) == 2
    assert "no key file" in capsys.readouterr().err
    assert not keys.exists()


def test_a_database_from_before_heads_verifies_after_its_heads_are_built(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sql(
        db,
        "DROP TABLE vg_receipt_heads",
        "DROP TABLE vg_receipt_roster",
        "UPDATE vg_schema SET version = 1",
    )
    assert _verify(db) == 0
    assert "heads of 1 users were built from their chains" in capsys.readouterr().out
    _sql(db, "DELETE FROM vg_receipts WHERE seq = 2")
    assert _verify(db) == 1
