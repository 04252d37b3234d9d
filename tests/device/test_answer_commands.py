"""``voicegate answers list|delete`` against a SQLite store, as an operator runs it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from voicegate.cli import main
from voicegate.domain import Device, DeviceKind, StoredTemplate
from voicegate.store import open_store


def seed(db: Path) -> None:
    """Two taught answers of asha from her phone, one of ben; then asha's phone is revoked."""

    async def work() -> None:
        store = await open_store(str(db))
        try:
            await store.devices.add(Device("d1", "asha", DeviceKind.VOICE, "pk", "ES256", 1.0))
            for tid, user, meaning in (("t1", "asha", "confirm"), ("t2", "asha", "choose:2"),
                                       ("b1", "ben", "cancel")):  # fmt: skip
                await store.templates.add(
                    StoredTemplate(tid, user, meaning, "haan", 10.0, b"VGT1", "d1")
                )
            await store.templates.set_hard("asha", True)
            await store.devices.revoke("d1", 20.0)
        finally:
            await store.close()

    asyncio.run(work())


def cli(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    status = main(list(words))
    return status, capsys.readouterr().out


def test_the_operator_lists_a_users_taught_answers_after_the_device_is_revoked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "gate.db"
    seed(db)
    status, out = cli(capsys, "answers", "list", "--user", "asha", "--db", str(db))
    assert status == 0
    assert out.splitlines()[0].split() == [
        "take",
        "id",
        "answer",
        "taught",
        "at",
        "device",
        "label",
    ]
    assert out.splitlines()[0].index("answer") == out.splitlines()[1].index("confirm")
    assert [line.split()[0] for line in out.splitlines()[1:3]] == ["t1", "t2"]
    assert "b1" not in out and "hard for recognisers: yes" in out


def test_the_operator_deletes_one_then_all_of_a_users_taught_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "gate.db"
    seed(db)
    assert cli(capsys, "answers", "delete", "--user", "asha", "t1", "--db", str(db))[0] == 0
    assert cli(capsys, "answers", "delete", "--user", "asha", "b1", "--db", str(db))[0] == 1
    status, out = cli(capsys, "answers", "delete", "--user", "asha", "--db", str(db))
    assert status == 0 and out.startswith("Deleted 1 taught take of asha"), out
    # A name with nothing taught (a typo, say) is told as such, not as "deleted 0".
    status, out = cli(capsys, "answers", "delete", "--user", "ashaa", "--db", str(db))
    assert status == 0 and out.startswith("ashaa had no taught takes"), out
    _, out = cli(capsys, "answers", "list", "--user", "asha", "--db", str(db))
    assert "No taught answers" in out and "hard for recognisers: no" in out
    assert "b1" in cli(capsys, "answers", "list", "--user", "ben", "--db", str(db))[1]
