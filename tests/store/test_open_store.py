"""open_store picks the backend its URL names, and SQLite files keep what they were given."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import PG_DSN
from tests.store.conftest import with_schema
from voicegate.errors import ConfigError, NoStore
from voicegate.settings import keys_for
from voicegate.store import (
    MemoryStore,
    PostgresStore,
    SqliteStore,
    open_store,
    redact,
    sqlite_path,
    store_for,
)


@pytest.mark.parametrize("url", ["memory", "memory:", " memory "])
async def test_memory_urls_open_a_memory_store(url: str) -> None:
    store = await open_store(url)
    assert isinstance(store, MemoryStore) and store.durable is False
    await store.close()


async def test_a_path_and_a_sqlite_url_open_the_same_durable_file(tmp_path: Path) -> None:
    path = tmp_path / "gate.db"
    first = await open_store(str(path))
    assert await first.ledger.consume("nonce", expires_at=9.0)
    await first.close()
    again = await open_store(f"sqlite:///{path}")
    assert isinstance(again, SqliteStore) and again.durable is True
    assert await again.ledger.consume("nonce", expires_at=9.0) is False
    await again.close()


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///{tmp}/gate.db", "{tmp}/gate.db"),
        ("sqlite:////{tmp}/gate.db", "{tmp}/gate.db"),
        ("sqlite:data/gate.db", "data/gate.db"),
    ],
)
def test_sqlite_url_with_three_slashes_is_absolute_and_without_slashes_relative(
    url: str, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    tmp = str(tmp_path).lstrip("/")
    store = store_for(url.format(tmp=tmp))
    expected = Path(path.format(tmp="/" + tmp))
    assert isinstance(store, SqliteStore) and store.runner.path == expected
    assert sqlite_path(url.format(tmp=tmp)) == str(expected)


def test_a_sqlite_file_in_a_folder_that_is_not_there_is_refused_and_no_folder_is_made(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError):
        store_for(str(tmp_path / "no" / "gate.db"))
    with pytest.raises(ConfigError):
        keys_for(str(tmp_path / "no" / "gate.db"), env={})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgres_urls_open_postgres_and_keep_the_schema_apart(scheme: str) -> None:
    store = store_for(f"{scheme}://gate:pw@db.example:5433/vg?schema=gate_a&sslmode=disable")
    assert isinstance(store, PostgresStore)
    assert store.runner.schema == "gate_a"
    assert store.runner.dsn == f"{scheme}://gate:pw@db.example:5433/vg?sslmode=disable"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "mysql://db/x",
        "sqlite:",
        "sqlite://gate.db",
        "sqlite:///",
        "postgresql://h/d?schema=Bad-Name",
    ],
)
def test_unusable_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        store_for(url)


def test_redact_masks_only_the_password() -> None:
    assert redact("postgresql://gate:s3cret@db:5432/vg") == "postgresql://gate:***@db:5432/vg"
    assert redact("postgresql://gate@db/vg") == "postgresql://gate@db/vg"


async def test_sqlite_file_is_in_wal_mode(tmp_path: Path) -> None:
    store = await open_store(str(tmp_path / "gate.db"))
    with sqlite3.connect(tmp_path / "gate.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    await store.close()


async def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gate.db"
    await (await open_store(str(path))).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE vg_schema SET version = version + 1")
    conn.close()
    with pytest.raises(ConfigError):
        await open_store(str(path))


async def test_an_existing_store_opens_without_create(tmp_path: Path) -> None:
    path = tmp_path / "gate.db"
    first = await open_store(str(path))
    assert await first.ledger.consume("nonce", expires_at=9.0)
    await first.close()
    again = await open_store(str(path), create=False)
    assert await again.ledger.consume("nonce", expires_at=9.0) is False
    await again.close()


@pytest.mark.parametrize("content", [b"", None])
async def test_a_sqlite_file_without_tables_is_unavailable_without_create_and_left_as_it_was(
    tmp_path: Path, content: bytes | None
) -> None:
    path = tmp_path / "gate.db"
    if content is None:  # a database of another program: one table, not voicegate's
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE other (x INTEGER)")
        conn.close()
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    store = store_for(str(path), create=False)
    with pytest.raises(NoStore):
        await store.start()
    await store.close()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gate.db"]


@pytest.mark.postgres
async def test_a_postgres_schema_without_tables_is_unavailable_without_create(
    pg_schema: str,
) -> None:
    url = with_schema(PG_DSN, pg_schema)
    store = store_for(url, create=False)
    with pytest.raises(NoStore):
        await store.start()
    await store.close()
    conn = await asyncpg.connect(PG_DSN, timeout=5)
    try:
        made = await conn.fetchval(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", pg_schema
        )
    finally:
        await conn.close()
    assert made == 0
    created = await open_store(url)
    await created.close()
    again = await open_store(url, create=False)
    assert await again.ledger.consume("nonce", expires_at=9.0)
    await again.close()
