"""F7: a device name cannot carry terminal escapes or bidi controls, and no command prints one.

The outside probe paired with the name ``PROBED`` below, and ``voicegate devices list`` printed
it raw: a cleared screen, red text, a new window title, and the rest of the line reversed.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tests.device.kit import SigningDevice
from tests.security.probe import served
from voicegate.cli import main
from voicegate.cli import receipts as receipts_cli
from voicegate.device.pairing import device_name, start_pairing
from voicegate.domain import Device, DeviceKind
from voicegate.errors import DeviceRefused
from voicegate.reasons import Reason
from voicegate.secrets import KEYS_ENV
from voicegate.store import open_store

PROBED = "phone\u001b[2J\u001b[31mRED\u001b]0;title\u0007\u202eevil"
HOSTILE = [
    PROBED,
    "\u202eenohp",
    "bell\u0007",
    "zero\u200bwidth",
    "csi\u009b2J",
    "del\u007f",
    "isolate\u2066x\u2069",
    "private\ue000use",
]
FRIENDLY = ["Asha's phone", "आशा का फ़ोन", "Bob’s iPad 🎉", "Zoë's tablet"]


def terminal_safe(text: str) -> bool:
    """Nothing in ``text`` but printing characters, spaces and line breaks."""
    return all(ch in " \n" or ch.isprintable() for ch in text)


async def test_pairing_refuses_a_name_with_escapes_and_keeps_the_code() -> None:
    async with served() as probe:
        keys = probe.services.gate.receipt_keys
        code = await start_pairing(
            probe.services.store, probe.config.user, keys=keys, clock=probe.clock
        )
        device = SigningDevice(probe.http, probe.clock)
        body = {"code": code, "public_key": device.public_jwk(), "name": PROBED}
        refused = await probe.http.post("/device/pair", json=body)
        assert (refused.status_code, refused.json()["reason"]) == (400, Reason.BAD_REQUEST)
        # The refusal came before the code was checked: the owner can still use it.
        paired = await probe.http.post("/device/pair", json={**body, "name": "Asha's phone"})
        assert paired.status_code == 200, paired.text
        names = [d.name for d in await probe.services.store.devices.list()]
        assert "Asha's phone" in names and PROBED not in names


@pytest.mark.parametrize("name", HOSTILE)
def test_a_name_with_a_control_or_bidi_character_is_refused(name: str) -> None:
    with pytest.raises(DeviceRefused) as refused:
        device_name(name)
    assert refused.value.reason is Reason.BAD_REQUEST


@pytest.mark.parametrize("name", FRIENDLY)
def test_ordinary_names_in_any_script_are_kept(name: str) -> None:
    assert device_name(f"  {name}\t") == name


def test_devices_list_escapes_a_name_stored_before_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)
    db = tmp_path / "gate.db"

    async def older_device() -> None:
        store = await open_store(str(db))
        device = Device("dev_old", "ow\u202ener", DeviceKind.TAP, "", "ES256", time.time(), PROBED)
        await store.devices.add(device)
        await store.close()

    asyncio.run(older_device())
    assert main(["devices", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert terminal_safe(out), repr(out)
    assert "phone\\u001b[2J\\u001b[31mRED\\u001b]0;title\\u0007\\u202eevil" in out
    assert "ow\\u202ener" in out


def test_receipts_json_escapes_what_json_leaves_raw(capsys: pytest.CaptureFixture[str]) -> None:
    value = {"tool": "del\u007f\u009b2J\u202e", "transcript": "हाँ\nyes"}
    receipts_cli.dump(value)
    out = capsys.readouterr().out
    assert terminal_safe(out), repr(out)
    assert json.loads(out) == value
