"""Grants in SQL, for SQLite and PostgreSQL (``voicegate.store.base.GrantStore``)."""

from __future__ import annotations

import builtins
import json
from typing import TYPE_CHECKING, Any

from voicegate.domain import Grant

if TYPE_CHECKING:
    from voicegate.store.sql_runner import Runner

_COLUMNS = (
    "id, user_id, upstream, tool, fixed, fixed_hash, free, created_at, expires_at, max_uses,"
    " uses_left, device_id, pending_id, receipt_id, ended_at"
)
# A grant that may still be spent at the time given as the last parameter.
_LIVE = "ended_at IS NULL AND uses_left > 0 AND expires_at > ?"


class SqlGrants:
    """Grants indexed by (user, created_at); a use is spent by one conditional UPDATE."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def add(self, grant: Grant) -> None:
        """Store a new grant; an existing id raises ``ValueError``."""
        inserted = await self._db.rows(
            f"INSERT INTO vg_grants ({_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (
                grant.id,
                grant.user,
                grant.upstream,
                grant.tool,
                _json(dict(grant.fixed)),
                grant.fixed_hash,
                _json(list(grant.free)),
                float(grant.created_at),
                float(grant.expires_at),
                int(grant.max_uses),
                int(grant.uses_left),
                grant.device_id,
                grant.pending_id,
                grant.receipt_id,
                None if grant.ended_at is None else float(grant.ended_at),
            ),
        )
        if not inserted:
            raise ValueError(f"grant {grant.id!r} exists")

    async def get(self, grant_id: str) -> Grant | None:
        """One grant by id, or None."""
        found = await self._db.rows(f"SELECT {_COLUMNS} FROM vg_grants WHERE id = ?", (grant_id,))
        return _grant(found[0]) if found else None

    async def live(self, user: str | None, now: float) -> builtins.list[Grant]:
        """Live grants of ``user`` (everyone's when None), oldest first."""
        where, params = ("user_id = ? AND ", (user,)) if user is not None else ("", ())
        found = await self._db.rows(
            f"SELECT {_COLUMNS} FROM vg_grants WHERE {where}{_LIVE} ORDER BY created_at, ord",
            (*params, float(now)),
        )
        return [_grant(row) for row in found]

    async def spend(self, grant_id: str, now: float) -> Grant | None:
        """Take one use of a live grant: one UPDATE whose condition is the liveness itself."""
        spent = await self._db.rows(
            f"UPDATE vg_grants SET uses_left = uses_left - 1 WHERE id = ? AND {_LIVE}"
            f" RETURNING {_COLUMNS}",
            (grant_id, float(now)),
        )
        return _grant(spent[0]) if spent else None

    async def end(self, grant_id: str, *, at: float, user: str | None = None) -> bool:
        """End a grant (of ``user`` only, when named)."""
        mine, params = (" AND user_id = ?", (user,)) if user is not None else ("", ())
        ended = await self._db.rows(
            f"UPDATE vg_grants SET ended_at = ? WHERE id = ? AND ended_at IS NULL{mine}"
            " RETURNING 1",
            (float(at), grant_id, *params),
        )
        return bool(ended)

    async def end_for_device(self, device_id: str, *, at: float) -> int:
        """End every grant the device made."""
        return await self._db.run(
            "UPDATE vg_grants SET ended_at = ? WHERE device_id = ? AND ended_at IS NULL",
            (float(at), device_id),
        )

    async def prune(self, before: float) -> int:
        """Forget grants that expired or ended before ``before``."""
        return await self._db.run(
            "DELETE FROM vg_grants WHERE expires_at < ? OR ended_at < ?",
            (float(before), float(before)),
        )


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False, sort_keys=True)


def _grant(row: Any) -> Grant:
    return Grant(
        id=row[0],
        user=row[1],
        upstream=row[2],
        tool=row[3],
        fixed=json.loads(row[4]),
        fixed_hash=row[5],
        free=tuple(json.loads(row[6])),
        created_at=float(row[7]),
        expires_at=float(row[8]),
        max_uses=int(row[9]),
        uses_left=int(row[10]),
        device_id=row[11],
        pending_id=row[12],
        receipt_id=row[13],
        ended_at=None if row[14] is None else float(row[14]),
    )
