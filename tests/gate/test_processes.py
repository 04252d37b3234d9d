"""100 confirms of one pending set from two OS processes execute exactly once, and 20 calls on a
grant of 5 from two OS processes run exactly 5, per backend."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.store.conftest import with_schema
from tests.store.processes import race
from voicegate.domain import Device, DeviceKind, Grant, Risk
from voicegate.gate import grants
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.receipts import verify_chain
from voicegate.secrets import KeyRing, generate_secret
from voicegate.store import open_store

from .helpers import Upstream


async def _race_one_set(url: str, tmp_path: Path) -> None:
    keys = "k1:" + generate_secret().reveal().decode()
    ring = KeyRing(keys)
    store = await open_store(url)
    try:
        gate = Gate(
            store,
            executor=Upstream(),
            policy=GatePolicy(is_write=lambda t: True),
            receipt_keys=ring,
        )
        await store.devices.add(Device("d1", "u1", DeviceKind.TAP, "pk", "ES256", 0.0))
        requests = [ActionRequest("write_note", {"name": f"n{i}"}) for i in range(3)]
        pending = await gate.propose("u1", requests, risk=Risk.LOW)
        log = tmp_path / "executions.log"
        payload = {
            "url": url,
            "keys": keys,
            "pending_id": pending.id,
            "device_id": "d1",
            "log": str(log),
            "times": 50,
        }
        released = race("tests.gate.racers:confirm_many", [payload, payload])
        assert sum(released) == 1
        assert len(log.read_text().splitlines()) == 1
        receipts = await gate.receipts("u1")
        assert len(receipts) == 1 and verify_chain(receipts, ring) == []
    finally:
        await store.close()


@pytest.mark.slow
async def test_hundred_confirms_from_two_processes_execute_once_on_sqlite(tmp_path: Path) -> None:
    await _race_one_set(str(tmp_path / "gate.db"), tmp_path)


@pytest.mark.slow
@pytest.mark.postgres
async def test_hundred_confirms_from_two_processes_execute_once_on_postgres(
    tmp_path: Path, pg_schema: str
) -> None:
    from tests.conftest import PG_DSN

    await _race_one_set(with_schema(PG_DSN, pg_schema), tmp_path)


async def _race_one_grant(url: str, tmp_path: Path) -> None:
    keys = "k1:" + generate_secret().reveal().decode()
    ring = KeyRing(keys)
    store = await open_store(url)
    try:
        arguments = {"name": "shopping", "text": "eggs"}
        await store.devices.add(Device("d1", "u1", DeviceKind.TAP, "pk", "ES256", 0.0))
        await store.grants.add(
            Grant(
                id="g_1",
                user="u1",
                upstream="stdio:notes",
                tool="write_note",
                fixed=arguments,
                fixed_hash=grants.fixed_hash("write_note", arguments),
                free=(),
                created_at=time.time(),
                expires_at=time.time() + 600,
                max_uses=5,
                uses_left=5,
                device_id="d1",
                pending_id="p1",
                receipt_id="r1",
            )
        )
        log = tmp_path / "executions.log"
        payload = {
            "url": url,
            "keys": keys,
            "log": str(log),
            "user": "u1",
            "upstream": "stdio:notes",
            "tool": "write_note",
            "arguments": arguments,
            "times": 10,
        }
        ran = race("tests.gate.racers:use_grant_many", [payload, payload])
        assert sum(ran) == 5
        assert len(log.read_text().splitlines()) == 5
        receipts = await store.receipts.list("u1")
        assert len(receipts) == 5 and verify_chain(receipts, ring) == []
        assert {r.grant.uses_left for r in receipts if r.grant} == {0, 1, 2, 3, 4}
    finally:
        await store.close()


@pytest.mark.slow
async def test_twenty_calls_on_a_grant_of_five_from_two_processes_run_five_on_sqlite(
    tmp_path: Path,
) -> None:
    await _race_one_grant(str(tmp_path / "gate.db"), tmp_path)


@pytest.mark.slow
@pytest.mark.postgres
async def test_twenty_calls_on_a_grant_of_five_from_two_processes_run_five_on_postgres(
    tmp_path: Path, pg_schema: str
) -> None:
    from tests.conftest import PG_DSN

    await _race_one_grant(with_schema(PG_DSN, pg_schema), tmp_path)
