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


@pytest.mark.postgres
def test_two_processes_spend_a_key_once_in_postgres(pg_url: str) -> None:
    assert sum(spend_from_two_processes(pg_url)) == 1
