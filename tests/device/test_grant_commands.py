"""``voicegate grants list|revoke`` and ``devices revoke`` against a SQLite store, as an operator
runs them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.store.test_contract import device, grant
from voicegate.cli import main
from voicegate.store import open_store


def seed(db: Path) -> None:
    """Two live grants of ann made by d1, one by d2, and one of bob."""
    now = time.time()

    async def work() -> None:
        store = await open_store(str(db))
        try:
            await store.devices.add(device("d1"))
            for gid, user, made_by in (("g_1", "ann", "d1"), ("g_2", "ann", "d1"),
                                       ("g_3", "ann", "d2"), ("g_b", "bob", "d9")):  # fmt: skip
                await store.grants.add(grant(gid, user, at=now, device_id=made_by))
        finally:
            await store.close()

    asyncio.run(work())


def cli(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    status = main(list(words))
    return status, capsys.readouterr().out


def test_the_operator_lists_live_grants_and_ends_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "gate.db"
    seed(db)
    status, out = cli(capsys, "grants", "list", "--user", "ann", "--db", str(db))
    assert status == 0
    rows = out.splitlines()
    assert [r.split()[0] for r in rows] == ["g_1", "g_2", "g_3"]
    assert 'name="shopping"' in rows[0] and "varying: text" in rows[0]
    assert "5/5 left" in rows[0]
    assert cli(capsys, "grants", "revoke", "g_1", "--db", str(db)) == (0, "Ended grant g_1.\n")
    assert cli(capsys, "grants", "revoke", "g_1", "--db", str(db))[0] == 1
    status, out = cli(capsys, "grants", "list", "--db", str(db))
    assert [r.split()[0] for r in out.splitlines()] == ["g_2", "g_3", "g_b"]


def test_revoking_a_device_ends_the_grants_it_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "gate.db"
    seed(db)
    assert cli(capsys, "devices", "revoke", "d1", "--db", str(db)) == (
        0,
        "Revoked d1; ended 2 grant(s) it made.\n",
    )
    _, out = cli(capsys, "grants", "list", "--user", "ann", "--db", str(db))
    assert [r.split()[0] for r in out.splitlines()] == ["g_3"]


def test_grants_on_a_missing_store_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["grants", "list", "--db", str(tmp_path / "none.db")]) == 2
