"""Passkeys in SQL, for SQLite and PostgreSQL (``voicegate.store.base.PasskeyStore``)."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from voicegate.domain import Passkey

if TYPE_CHECKING:
    from voicegate.store.sql_runner import Runner

_COLUMNS = (
    "id, user_id, credential_id, public_key, sign_count, created_at, device_id, name, last_used_at"
)


class SqlPasskeys:
    """Registered passkeys indexed by (user, created_at); the counter moves by one UPDATE."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def add(self, passkey: Passkey) -> None:
        """Store a new passkey; an existing id raises ``ValueError``."""
        inserted = await self._db.rows(
            f"INSERT INTO vg_passkeys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (
                passkey.id,
                passkey.user,
                bytes(passkey.credential_id),
                bytes(passkey.public_key),
                int(passkey.sign_count),
                float(passkey.created_at),
                passkey.device_id,
                passkey.name,
                None if passkey.last_used_at is None else float(passkey.last_used_at),
            ),
        )
        if not inserted:
            raise ValueError(f"passkey {passkey.id!r} exists")

    async def get(self, passkey_id: str) -> Passkey | None:
        """One passkey by id, or None."""
        found = await self._db.rows(
            f"SELECT {_COLUMNS} FROM vg_passkeys WHERE id = ?", (passkey_id,)
        )
        return _passkey(found[0]) if found else None

    async def list(self, user: str | None = None) -> builtins.list[Passkey]:
        """Passkeys of ``user`` (everyone's when None), oldest first."""
        where, params = (" WHERE user_id = ?", (user,)) if user is not None else ("", ())
        found = await self._db.rows(
            f"SELECT {_COLUMNS} FROM vg_passkeys{where} ORDER BY created_at, ord", params
        )
        return [_passkey(row) for row in found]

    async def remove(self, passkey_id: str, user: str | None = None) -> bool:
        """Forget one passkey (of ``user`` only, when named)."""
        if user is None:
            gone = await self._db.rows(
                "DELETE FROM vg_passkeys WHERE id = ? RETURNING 1", (passkey_id,)
            )
        else:
            gone = await self._db.rows(
                "DELETE FROM vg_passkeys WHERE id = ? AND user_id = ? RETURNING 1",
                (passkey_id, user),
            )
        return bool(gone)

    async def use(self, passkey_id: str, sign_count: int, *, at: float) -> bool:
        """Move the counter on iff ``sign_count`` follows the stored one (one statement)."""
        moved = await self._db.rows(
            "UPDATE vg_passkeys SET sign_count = ?, last_used_at = ?"
            " WHERE id = ? AND (sign_count < ? OR (sign_count = 0 AND ? = 0)) RETURNING 1",
            (int(sign_count), float(at), passkey_id, int(sign_count), int(sign_count)),
        )
        return bool(moved)


def _passkey(row: Any) -> Passkey:
    return Passkey(
        id=row[0],
        user=row[1],
        credential_id=bytes(row[2]),
        public_key=bytes(row[3]),
        sign_count=int(row[4]),
        created_at=float(row[5]),
        device_id=row[6],
        name=row[7],
        last_used_at=None if row[8] is None else float(row[8]),
    )
