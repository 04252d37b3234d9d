"""``voicegate pair`` and ``voicegate devices list|revoke`` against a SQLite store a server uses."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from fastapi import FastAPI

from tests.device.kit import Executed, SigningDevice
from voicegate.cli import main
from voicegate.clock import ManualClock
from voicegate.device.routes import device_router
from voicegate.domain import Risk
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.reasons import Reason
from voicegate.secrets import KEYS_ENV
from voicegate.services import Services
from voicegate.settings import keys_for
from voicegate.store import open_store

T = TypeVar("T")
NOTE = ActionRequest("write_note", {"name": "door", "text": "unlock"})
CODE_LINE = re.compile(r"Pairing code for (\S+) \((\w+)\): (\d{4}) (\d{4})")
ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@pytest.fixture(autouse=True)
def key_file_beside_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys as a one-machine ``voicegate serve`` finds them: the file beside the SQLite store."""
    monkeypatch.delenv(KEYS_ENV, raising=False)


def cli(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    status = main(list(words))
    out, err = capsys.readouterr()
    return status, out, err


def printed_code(out: str) -> tuple[str, str, str]:
    found = CODE_LINE.search(out)
    assert found is not None, out
    return found[1], found[2], found[3] + found[4]


def on_server(db: Path, work: Callable[[SigningDevice, Services], Awaitable[T]]) -> T:
    """Run ``work`` against the device API over ``db``, keyed as ``voicegate serve`` keys it."""

    async def run() -> T:
        store = await open_store(str(db))
        keys = keys_for(str(db))
        assert keys is not None
        # The CLI stamps codes with the real time, as the real server does.
        clock = ManualClock(time.time())
        gate = Gate(
            store,
            executor=Executed(),
            policy=GatePolicy(is_write=lambda t: True),
            receipt_keys=keys,
            clock=clock,
        )
        services = Services(store=store, gate=gate, clock=clock)
        app = FastAPI()
        app.include_router(device_router(services))
        transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 50000))
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
                return await work(SigningDevice(c, clock), services)
        finally:
            await store.close()

    return asyncio.run(run())


def test_pair_prints_a_code_the_server_redeems_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "gate.db"
    status, out, _ = cli(capsys, "pair", "--user", "asha", "--kind", "tap", "--db", str(db))
    assert status == 0
    user, kind, code = printed_code(out)
    assert (user, kind) == ("asha", "tap")
    assert "/approve" in out and "10 minutes" in out

    async def redeem(device: SigningDevice, services: Services) -> list[int]:
        first = await device.pair(code)
        assert first.json()["user"] == "asha" and first.json()["kind"] == "tap"
        second = await SigningDevice(device.client, device.clock).pair(code)
        assert second.json()["reason"] == Reason.BAD_PAIRING_CODE
        return [first.status_code, second.status_code]

    assert on_server(db, redeem) == [200, 400]


@pytest.mark.parametrize(
    "url",
    [
        "http://phone.example:9",
        "http://phone.example:9/",
        "http://phone.example:9/approve",
        "http://phone.example:9/approve/",
    ],
)
def test_pair_url_names_the_approve_page_once_with_or_without_it(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "gate.db")
    status, out, _ = cli(capsys, "pair", "--user", "asha", "--db", db, "--url", url)
    assert status == 0
    assert "Open http://phone.example:9/approve on the device" in out


def test_pair_without_signing_keys_refuses_and_prints_no_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A memory store has no key file beside it, and the environment names no keys.
    status, out, err = cli(capsys, "pair", "--user", "asha", "--db", "memory")
    assert status == 2
    assert CODE_LINE.search(out) is None and KEYS_ENV in err


def test_a_code_from_the_environment_s_keys_pairs_on_a_server_with_the_same_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS_ENV, "k1:" + "s" * 43)
    db = tmp_path / "gate.db"
    status, out, _ = cli(capsys, "pair", "--user", "asha", "--db", str(db))
    assert status == 0 and not (tmp_path / "gate.db.keys").exists()
    _, _, code = printed_code(out)

    async def redeem(device: SigningDevice, services: Services) -> int:
        return (await device.pair(code)).status_code

    assert on_server(db, redeem) == 200


def test_devices_list_shows_each_device_and_revoke_stops_its_signed_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "gate.db"
    _, out, _ = cli(capsys, "pair", "--user", "asha", "--db", str(db))
    _, _, code = printed_code(out)

    async def pair_and_use(device: SigningDevice, services: Services) -> SigningDevice:
        assert (await device.pair(code)).status_code == 200
        assert (await device.get("/device/pending")).status_code == 200
        return device

    paired = on_server(db, pair_and_use)
    device_id = paired.id
    status, listed, _ = cli(capsys, "devices", "list", "--db", str(db))
    assert status == 0
    (row,) = listed.splitlines()
    assert row.split()[:4] == [device_id, "asha", "voice", "active"]
    assert ISO_UTC.fullmatch(row.split()[4])
    assert cli(capsys, "devices", "list", "--user", "ravi", "--db", str(db))[1].strip() == (
        "No paired devices."
    )

    status, out, _ = cli(capsys, "devices", "revoke", device_id, "--db", str(db))
    assert status == 0 and device_id in out
    assert cli(capsys, "devices", "list", "--db", str(db))[1].split()[3] == "revoked"
    # Revoking twice, or an unknown id, says so and fails.
    assert cli(capsys, "devices", "revoke", device_id, "--db", str(db))[0] == 1
    assert cli(capsys, "devices", "revoke", "dev_nope", "--db", str(db))[0] == 1

    async def answer_after_revoke(device: SigningDevice, services: Services) -> None:
        # The revoked device's key still signs correctly; the server refuses it anyway.
        stored = await services.store.devices.get(device_id)
        assert stored is not None and stored.revoked_at is not None
        pending = await services.gate.propose("asha", [NOTE], risk=Risk.LOW)
        # The same device, its private key and all, on the server's next start.
        device.id, device.key = paired.id, paired.key
        listing = await device.get("/device/pending")
        assert listing.status_code == 401
        assert listing.json()["reason"] == Reason.DEVICE_REVOKED
        tap = {"pending_id": pending.id, "nonce": pending.nonce, "decision": "confirm"}
        answer = await device.post_json("/device/tap", tap)
        assert answer.status_code == 401 and answer.json()["reason"] == Reason.DEVICE_REVOKED
        assert (await services.gate.status(pending.id)).status.value == "waiting"
        assert await services.gate.receipts("asha") == []

    on_server(db, answer_after_revoke)


def test_cards_outlive_their_agent_and_the_operator_lists_and_withdraws_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A set proposed by a server that has stopped (its stdio agent gone) is still waiting in
    the store, named on the page by its own card; ``cards list`` shows it and ``cards
    withdraw`` takes it back, after which no tap can release it."""
    db = tmp_path / "gate.db"
    _, out, _ = cli(capsys, "pair", "--user", "asha", "--db", str(db))
    _, _, code = printed_code(out)

    async def propose(device: SigningDevice, services: Services) -> tuple[SigningDevice, str]:
        assert (await device.pair(code)).status_code == 200
        pending = await services.gate.propose("asha", [NOTE], risk=Risk.LOW)
        return device, pending.id

    paired, pending_id = on_server(db, propose)  # that server, and its agent, are gone now
    assert cli(capsys, "cards", "list", "--user", "ravi", "--db", str(db))[1].strip() == (
        "No cards are waiting."
    )
    status, listed, _ = cli(capsys, "cards", "list", "--db", str(db))
    assert status == 0
    (row,) = listed.splitlines()
    assert row.split()[:2] == [pending_id, "asha"] and ISO_UTC.fullmatch(row.split()[2])
    assert "s left" in row and 'write_note(name="door", text="unlock")' in row

    async def listed_on_the_next_start(device: SigningDevice, services: Services) -> str:
        device.id, device.key = paired.id, paired.key
        (shown,) = (await device.get("/device/pending")).json()["sets"]
        assert shown["id"] == pending_id
        return str(shown["name"])

    assert "door" in on_server(db, listed_on_the_next_start)

    status, out, _ = cli(capsys, "cards", "withdraw", pending_id, "--db", str(db))
    assert status == 0 and out == f"Withdrew {pending_id}: nothing of it runs.\n"
    assert cli(capsys, "cards", "list", "--db", str(db))[1].strip() == "No cards are waiting."
    status, out, _ = cli(capsys, "cards", "withdraw", pending_id, "--db", str(db))
    assert status == 1 and "no longer waiting" in out
    status, out, _ = cli(capsys, "cards", "withdraw", "set_nope", "--db", str(db))
    assert status == 1 and "not a set in this store" in out

    async def tap_after_withdrawal(device: SigningDevice, services: Services) -> None:
        device.id, device.key = paired.id, paired.key
        pending = await services.gate.status(pending_id)
        tap = {"pending_id": pending_id, "nonce": pending.nonce, "decision": "confirm"}
        answer = await device.post_json("/device/tap", tap)
        assert answer.json()["reason"] == Reason.WITHDRAWN
        assert (await services.gate.status(pending_id)).status.value == "withdrawn"
        assert await services.gate.receipts("asha") == []

    on_server(db, tap_after_withdrawal)
