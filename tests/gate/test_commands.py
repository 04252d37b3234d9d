"""``voicegate receipts``: listing, export and a verify that catches an edited receipt."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from voicegate.cli import main
from voicegate.clock import ManualClock
from voicegate.gate.core import Gate
from voicegate.gate.types import Risk
from voicegate.reasons import Kind
from voicegate.settings import keys_for
from voicegate.store import open_store

from .helpers import Upstream, actions, evidence, pair


async def _two_receipts(db: Path) -> None:
    store = await open_store(str(db))
    clock = ManualClock()
    keys = keys_for(str(db), env={})
    assert keys is not None
    gate = Gate(store, executor=Upstream(), is_write=lambda t: True, receipt_keys=keys, clock=clock)
    device = await pair(store)
    for _ in range(2):
        pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
        assert (await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))).released
    await store.close()


@pytest.fixture
async def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("VOICEGATE_SECRET_KEYS", raising=False)
    path = tmp_path / "gate.db"
    await _two_receipts(path)
    return path


def test_verify_accepts_an_intact_chain(db, capsys):
    assert main(["receipts", "verify", "--db", str(db)]) == 0
    assert "2 receipts, 0 problems" in capsys.readouterr().out


def test_verify_detects_an_edited_receipt(db, capsys):
    with sqlite3.connect(db) as conn:
        (data,) = conn.execute("SELECT data FROM vg_receipts WHERE seq = 1").fetchone()
        edited = json.loads(data)
        edited["arguments"] = {"name": "note1", "text": "something else"}
        conn.execute("UPDATE vg_receipts SET data = ? WHERE seq = 1", (json.dumps(edited),))
    assert main(["receipts", "verify", "--db", str(db)]) == 1


def test_verify_detects_a_deleted_receipt(db):
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM vg_receipts WHERE seq = 1")
    assert main(["receipts", "verify", "--db", str(db)]) == 1


def test_export_writes_every_receipt_as_json(db, capsys):
    assert main(["receipts", "export", "--db", str(db)]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert [r["seq"] for r in exported] == [1, 2]
    assert all(r["outcome"] == "executed" for r in exported)


def test_the_key_file_beside_the_database_is_private(db):
    mode = (db.parent / "gate.db.keys").stat().st_mode & 0o777
    assert mode == 0o600
