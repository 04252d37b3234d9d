"""Workers for the two-process races: each answers one pending set, or calls under one grant,
many times at once."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from voicegate.domain import Decision, Evidence, InputKind, Modality
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.reasons import Kind
from voicegate.secrets import KeyRing
from voicegate.store import open_store


def logged(log: str) -> Callable[[str, Mapping[str, Any]], Awaitable[Any]]:
    """An upstream that appends one line to ``log`` per execution (O_APPEND, so lines from
    several processes never interleave); the test counts them."""

    async def upstream(tool: str, arguments: Mapping[str, Any]) -> Any:
        line = f"{os.getpid()} {tool}\n".encode()
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return {"ok": True}

    return upstream


async def confirm_many(payload: Mapping[str, Any], go: Callable[[], Awaitable[None]]) -> int:
    """Open the shared store, then confirm ``payload["pending_id"]`` ``times`` times at once.

    Every upstream execution appends one line to ``payload["log"]`` (O_APPEND, so lines from
    both processes never interleave); the test counts them.
    """
    store = await open_store(payload["url"])
    gate = Gate(
        store,
        executor=logged(payload["log"]),
        policy=GatePolicy(is_write=lambda tool: True),
        receipt_keys=KeyRing(payload["keys"]),
    )
    pending = await gate.status(payload["pending_id"])
    try:
        await go()
        outcomes = await asyncio.gather(
            *(
                gate.answer(
                    Evidence(
                        id=secrets.token_hex(8),
                        pending_id=pending.id,
                        nonce=pending.nonce,
                        device_id=payload["device_id"],
                        user=pending.user,
                        modality=Modality.TAP,
                        input=InputKind.TOUCH,
                        decision=Decision(Kind.CHOOSE, 1),
                        created_at=gate.clock(),
                    )
                )
                for _ in range(payload["times"])
            )
        )
    finally:
        await store.close()
    return sum(o.released for o in outcomes)


async def use_grant_many(payload: Mapping[str, Any], go: Callable[[], Awaitable[None]]) -> int:
    """Open the shared store, then make ``times`` calls that fit one grant at once; how many
    ran under it."""
    store = await open_store(payload["url"])
    gate = Gate(
        store,
        executor=logged(payload["log"]),
        policy=GatePolicy(is_write=lambda tool: True, upstream=payload["upstream"]),
        receipt_keys=KeyRing(payload["keys"]),
    )
    call = ActionRequest(payload["tool"], payload["arguments"])
    try:
        await go()
        ran = await asyncio.gather(
            *(gate.use_grant(payload["user"], call) for _ in range(payload["times"]))
        )
    finally:
        await store.close()
    return sum(r is not None for r in ran)
