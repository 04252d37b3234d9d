"""Single-use keys stay single-use when two OS processes race on one database."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.processes import race


def spend_from_two_processes(url: str) -> list[int]:
    payload = {"url": url, "key": "nonce-shared", "times": 50}
    return race("tests.store.processes:consume_many", [payload, payload])


def test_two_processes_spend_a_key_once_in_one_sqlite_file(tmp_path: Path) -> None:
    assert sum(spend_from_two_processes(str(tmp_path / "gate.db"))) == 1


@pytest.mark.slow
def test_two_processes_open_new_sqlite_files_at_once(tmp_path: Path) -> None:
    # both ask to switch each new file to WAL at the same moment; SQLite refuses one of them at
    # once (a few races in a hundred), and that one must wait its turn, not fail to start
    payload = {"paths": [str(tmp_path / f"gate-{i}.db") for i in range(50)]}
    assert race("tests.store.processes:open_new_files", [payload, payload]) == [50, 50]


@pytest.mark.postgres
def test_two_processes_spend_a_key_once_in_postgres(pg_url: str) -> None:
    assert sum(spend_from_two_processes(pg_url)) == 1
