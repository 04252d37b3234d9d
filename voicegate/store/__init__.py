"""Storage backends behind the protocols of ``voicegate.store.base``.

``open_store(url)`` picks one by its URL:

    memory, memory:                      MemoryStore, in this process only (durable=False)
    voicegate.db, /var/lib/vg/gate.db    SqliteStore, a file path
    sqlite:///var/lib/vg/gate.db         SqliteStore, the absolute path /var/lib/vg/gate.db
                                         (sqlite:////var/lib/vg/gate.db names the same file)
    sqlite:data/gate.db                  SqliteStore, the relative path data/gate.db
    postgresql://user@host/db            PostgresStore; postgres:// works too; add
        ?schema=name                     to keep the tables in their own schema

A SQLite file may be new, but its folder must already be there: a mistyped path is refused,
never made into folders.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from voicegate.errors import ConfigError, StoreUnavailable
from voicegate.extras import need
from voicegate.store.base import Store
from voicegate.store.memory import MemoryStore
from voicegate.store.sqlite import SqliteStore

if TYPE_CHECKING:
    # imported on first use: the driver is the [postgres] extra
    from voicegate.store.postgres import PostgresStore

__all__ = [
    "MemoryStore",
    "PostgresStore",
    "SqliteStore",
    "Store",
    "key_file",
    "open_store",
    "redact",
    "sqlite_path",
    "store_for",
]

_POSTGRES = ("postgresql://", "postgres://")


async def open_store(url: str, *, create: bool = True) -> Store:
    """The store ``url`` names, connected and with its schema in place.

    Raises ``ConfigError`` for a URL it cannot use and ``StoreUnavailable`` when the database
    cannot be reached now. With ``create`` False, a SQLite file that is not there, or a file or
    PostgreSQL database (or schema) without voicegate's tables, is ``NoStore`` (a
    ``StoreUnavailable``) and is left as it was: the commands that read or change an existing
    store open stores so. A voicegate store is opened as ``serve`` opens it, its schema brought
    up to this version's (receipts written before receipt heads get their roster marked).
    """
    store = store_for(url, create=create)
    await store.start()
    return store


def store_for(url: str, *, create: bool = True) -> MemoryStore | SqliteStore | PostgresStore:
    """The store ``url`` names, not yet connected (it connects on ``start`` or first use).

    With ``create`` False, ``StoreUnavailable`` for a SQLite file that is not there, and, on
    ``start``, ``NoStore`` for a store without voicegate's tables.
    """
    store = _store_for(url.strip(), create=create)
    if isinstance(store, SqliteStore):
        path = store.runner.path
        if not create and not path.is_file():
            raise StoreUnavailable(f"no database at {path}")
        if not path.parent.is_dir():
            what = "is a file, not a folder" if path.parent.exists() else "does not exist"
            raise ConfigError(f"the folder {path.parent} for the store {what}; make it first")
    return store


def key_file(db: str) -> Path | None:
    """Where a SQLite store's signing keys live (``<db>.keys``); None for any other store."""
    if db.strip() in ("", "memory", "memory:"):
        return None
    try:
        path = sqlite_path(db)
    except ConfigError:
        return None  # not a store at all: opening it says why
    return Path(path + ".keys") if path is not None else None


def sqlite_path(url: str) -> str | None:
    """The file a SQLite store URL or path names; None for a memory or PostgreSQL store.

    ``sqlite:///abs/x.db`` is the absolute path ``/abs/x.db`` (four slashes name the same file),
    ``sqlite:rel/x.db`` the relative path ``rel/x.db``; ``ConfigError`` for a URL it cannot use.
    """
    url = url.strip()
    if url in ("memory", "memory:") or url.startswith(_POSTGRES):
        return None
    if url.startswith("sqlite:"):
        rest = url.removeprefix("sqlite:")
        if rest.startswith("///"):
            rest = "/" + rest.lstrip("/")
        elif rest.startswith("//"):
            rest = ""  # sqlite://name: a host part, which a file has not
        if rest in ("", "/"):
            raise ConfigError(
                "a SQLite URL is sqlite:///absolute/path.db or sqlite:relative/path.db"
            )
        return rest
    if not url or "://" in url:
        raise ConfigError(f"unknown store URL {redact(url)!r}")
    return url


def _store_for(url: str, *, create: bool) -> MemoryStore | SqliteStore | PostgresStore:
    if url in ("memory", "memory:"):
        return MemoryStore()
    if url.startswith(_POSTGRES):
        dsn, schema = _split_schema(url)
        return _postgres()(dsn, schema=schema, create=create)
    path = sqlite_path(url)
    assert path is not None  # memory and PostgreSQL were taken above
    return SqliteStore(path, create=create)


def __getattr__(name: str) -> Any:
    """``PostgresStore``, imported only when asked for; ``MissingExtra`` without its driver."""
    if name == "PostgresStore":
        return _postgres()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _postgres() -> type[PostgresStore]:
    need("asyncpg", "a PostgreSQL store")
    from voicegate.store.postgres import PostgresStore

    return PostgresStore


def redact(url: str) -> str:
    """``url`` with any password masked, fit for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def _split_schema(url: str) -> tuple[str, str | None]:
    """The DSN without our ``schema`` parameter (asyncpg would send it to the server)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    rest = [(key, value) for key, value in query if key != "schema"]
    dsn = urlunsplit(parts._replace(query=urlencode(rest)))
    return dsn, (schemas[-1] if schemas else None)
