"""Web Push subscriptions in SQL, for SQLite and PostgreSQL (``voicegate.store.base.PushStore``)."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from voicegate.domain import PushSubscription

if TYPE_CHECKING:
    from voicegate.store.sql_runner import Runner

_COLUMNS = "device_id, user_id, endpoint, p256dh, auth, created_at"


class SqlPush:
    """One subscription per device, indexed by (user, created_at)."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def put(self, subscription: PushSubscription) -> None:
        """Keep ``subscription`` in place of any its device had (one upsert)."""
        await self._db.run(
            f"INSERT INTO vg_push ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (device_id) DO UPDATE SET user_id = excluded.user_id,"
            " endpoint = excluded.endpoint, p256dh = excluded.p256dh, auth = excluded.auth,"
            " created_at = excluded.created_at",
            (
                subscription.device_id,
                subscription.user,
                subscription.endpoint,
                subscription.p256dh,
                subscription.auth,
                float(subscription.created_at),
            ),
        )

    async def list(self, user: str) -> builtins.list[PushSubscription]:
        """This user's subscriptions, oldest first."""
        found = await self._db.rows(
            f"SELECT {_COLUMNS} FROM vg_push WHERE user_id = ? ORDER BY created_at, ord", (user,)
        )
        return [PushSubscription(r[0], r[1], r[2], r[3], r[4], float(r[5])) for r in found]

    async def remove(self, device_id: str, endpoint: str | None = None) -> bool:
        """Forget the device's subscription (only if still ``endpoint``, when given)."""
        if endpoint is None:
            gone = await self._db.run("DELETE FROM vg_push WHERE device_id = ?", (device_id,))
        else:
            gone = await self._db.run(
                "DELETE FROM vg_push WHERE device_id = ? AND endpoint = ?", (device_id, endpoint)
            )
        return gone > 0
