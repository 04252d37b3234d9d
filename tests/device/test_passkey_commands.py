"""``voicegate passkeys list|remove`` against a SQLite store, as an operator runs it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from voicegate.cli import main
from voicegate.domain import Passkey
from voicegate.store import open_store


def seed(db: Path) -> None:
    """Two passkeys of asha (one used, one named with escapes before names were checked), one
    of ben."""

    async def work() -> None:
        store = await open_store(str(db))
        try:
            for pid, user, name in (("pk_a1", "asha", "phone"), ("pk_a2", "asha", "key\x1b[2J"),
                                    ("pk_b1", "ben", "laptop")):  # fmt: skip
                await store.passkeys.add(Passkey(pid, user, b"id", b"\xa5", 0, 10.0, "d1", name))
            await store.passkeys.use("pk_a1", 3, at=1_800_000_000.0)
        finally:
            await store.close()

    asyncio.run(work())


def cli(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    status = main(list(words))
    return status, capsys.readouterr().out


def test_the_operator_lists_passkeys_escaped_and_removes_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "gate.db"
    seed(db)
    status, out = cli(capsys, "passkeys", "list", "--user", "asha", "--db", str(db))
    assert status == 0
    rows = out.splitlines()
    assert [r.split()[0] for r in rows] == ["pk_a1", "pk_a2"]
    assert "2027-01-15T08:00:00Z" in rows[0] and "never used" in rows[1]
    assert "\x1b" not in out and "pk_b1" not in out
    assert cli(capsys, "passkeys", "remove", "pk_a1", "--db", str(db)) == (
        0,
        "Removed passkey pk_a1.\n",
    )
    assert cli(capsys, "passkeys", "remove", "pk_a1", "--db", str(db))[0] == 1
    status, out = cli(capsys, "passkeys", "list", "--db", str(db))
    assert [r.split()[0] for r in out.splitlines()] == ["pk_a2", "pk_b1"]


def test_passkeys_on_a_missing_store_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["passkeys", "list", "--db", str(tmp_path / "none.db")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "none.db").exists()
