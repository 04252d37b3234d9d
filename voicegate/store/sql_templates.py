"""Personal answers in SQL, for SQLite and PostgreSQL (``voicegate.store.base.TemplateStore``)."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from voicegate.domain import StoredTemplate

if TYPE_CHECKING:
    from voicegate.store.sql_runner import Runner

_COLUMNS = "id, user_id, meaning, label, created_at, device_id, data"


class SqlTemplates:
    """Enrolment templates indexed by (user, created_at), and the per-user flag."""

    def __init__(self, db: Runner) -> None:
        self._db = db

    async def add(self, template: StoredTemplate) -> None:
        """Store one template; an existing id raises ``ValueError``."""
        inserted = await self._db.rows(
            f"INSERT INTO vg_templates ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (
                template.id,
                template.user,
                template.meaning,
                template.label,
                float(template.created_at),
                template.device_id,
                bytes(template.data),
            ),
        )
        if not inserted:
            raise ValueError(f"template {template.id!r} exists")

    async def list(self, user: str) -> builtins.list[StoredTemplate]:
        """This user's templates, oldest first."""
        found = await self._db.rows(
            f"SELECT {_COLUMNS} FROM vg_templates WHERE user_id = ? ORDER BY created_at, ord",
            (user,),
        )
        return [StoredTemplate(r[0], r[1], r[2], r[3], r[4], bytes(r[6]), r[5]) for r in found]

    async def delete(self, user: str, template_id: str | None = None) -> int:
        """Forget one template of ``user``, or all of them and the flag, in one transaction."""
        if template_id is not None:
            return await self._db.run(
                "DELETE FROM vg_templates WHERE user_id = ? AND id = ?", (user, template_id)
            )
        async with self._db.transaction() as tx:
            gone = await tx.rows("DELETE FROM vg_templates WHERE user_id = ? RETURNING 1", (user,))
            await tx.rows("DELETE FROM vg_voice_flags WHERE user_id = ? RETURNING 1", (user,))
        return len(gone)

    async def set_hard(self, user: str, hard: bool) -> None:
        """Record the flag (an upsert)."""
        await self._db.run(
            "INSERT INTO vg_voice_flags (user_id, hard) VALUES (?, ?)"
            " ON CONFLICT (user_id) DO UPDATE SET hard = excluded.hard",
            (user, 1 if hard else 0),
        )

    async def hard(self, user: str) -> bool:
        """The flag; False when never set."""
        found = await self._db.rows("SELECT hard FROM vg_voice_flags WHERE user_id = ?", (user,))
        return bool(found and found[0][0])
