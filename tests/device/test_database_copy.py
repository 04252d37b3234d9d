"""A full copy of the SQLite database gives nobody the power to approve: it holds no signing key,
and an open pairing code in it cannot be recovered without the server's own key."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import shutil
import sqlite3
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fastapi import FastAPI

from tests.device.kit import Executed, paired_device
from voicegate.clock import ManualClock
from voicegate.device import pairing, signing
from voicegate.device.routes import device_router
from voicegate.domain import Device, DeviceKind, Risk
from voicegate.errors import DeviceRefused
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing
from voicegate.services import Services
from voicegate.store import open_store
from voicegate_lab.eval.agent_forgery import stored_values

NOTE = ActionRequest("write_note", {"name": "door", "text": "unlock"})
JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def sqlite_services(
    tmp_path: Path, clock: ManualClock, executed: Executed
) -> AsyncIterator[Services]:
    store = await open_store(str(tmp_path / "gate.db"))
    gate = Gate(
        store,
        executor=executed,
        policy=GatePolicy(is_write=lambda t: True),
        receipt_keys=KeyRing.generate(),
        clock=clock,
    )
    yield Services(store=store, gate=gate, clock=clock)
    await store.close()


def private_keys_from(value: str | bytes) -> Iterator[ec.EllipticCurvePrivateKey]:
    """Every way ``value`` could be read as an EC private key: PEM, DER, JWK ``d``, raw scalar."""
    raw = value.encode("utf-8", "replace") if isinstance(value, str) else value
    decoded = [raw]
    for decode in (bytes.fromhex, base64.b64decode, base64.urlsafe_b64decode):
        with contextlib.suppress(ValueError):
            text = raw.decode("ascii").strip()
            decoded.append(
                decode(text + ("=" * (-len(text) % 4) if decode != bytes.fromhex else ""))
            )
    for blob in decoded:
        for load in (serialization.load_pem_private_key, serialization.load_der_private_key):
            with contextlib.suppress(ValueError, TypeError):
                key = load(blob, password=None)
                if isinstance(key, ec.EllipticCurvePrivateKey):
                    yield key
        if len(blob) == 32:
            scalar = int.from_bytes(blob, "big")
            if 0 < scalar < signing.P256_ORDER:
                yield ec.derive_private_key(scalar, ec.SECP256R1())
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        jwk = json.loads(raw)
        if isinstance(jwk, dict) and "d" in jwk:
            d = base64.urlsafe_b64decode(jwk["d"] + "==")
            yield ec.derive_private_key(int.from_bytes(d, "big"), ec.SECP256R1())


async def test_copy_of_the_database_cannot_sign_an_approval(
    tmp_path: Path, sqlite_services: Services, clock: ManualClock, executed: Executed
) -> None:
    services = sqlite_services
    app = FastAPI()
    app.include_router(device_router(services))
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        owner = await paired_device(client, services, clock)
        # Some history: one approved write, and one still waiting, its nonce in the database.
        await services.gate.propose("asha", [NOTE], risk=Risk.LOW)
        first = (await owner.get("/device/pending")).json()["sets"][0]
        body = {"pending_id": first["id"], "nonce": first["nonce"], "decision": "confirm"}
        assert (await owner.post_json("/device/tap", body)).json()["released"] is True
        waiting = await services.gate.propose("asha", [NOTE], risk=Risk.LOW)
        # And a pairing code the operator has just shown, still open when the copy is taken.
        keys = services.gate.receipt_keys
        code = await pairing.start_pairing(services.store, "asha", keys=keys, clock=clock)

        db = tmp_path / "gate.db"
        copy_dir = tmp_path / "stolen"
        copy_dir.mkdir()
        for part in tmp_path.glob("gate.db*"):
            shutil.copy(part, copy_dir / part.name)
        values = list(stored_values(copy_dir / db.name))
        assert any(waiting.nonce.encode() in v for v in values)
        (open_hash,) = open_code_hashes(copy_dir / db.name)
        # The copy holds the keyed hash only: neither the code, nor the unkeyed hash a table
        # built once for every install would match, nor the server's key.
        assert open_hash == pairing.hash_code(code, keys)
        assert not any(code.encode() in v for v in values)
        assert open_hash not in {
            unkeyed_scrypt(code).hex(),
            hashlib.sha256(code.encode()).hexdigest(),
        }
        assert not any(secret.reveal() in v for _, secret in keys for v in values)
        stored: Device | None = await services.store.devices.get(owner.id)
        assert stored is not None

        target = "/device/tap"
        tap = json.dumps(
            {"pending_id": waiting.id, "nonce": waiting.nonce, "decision": "confirm"}
        ).encode()
        stamp = str(int(clock()))
        message = signing.canonical(owner.id, "POST", target, stamp, tap, JSON)
        tried = 0
        for value in values:
            # As an HMAC key, the way a shared-secret scheme would sign.
            mac = hmac.new(value, message, hashlib.sha256).digest()
            forged = [base64.urlsafe_b64encode(mac).decode().rstrip("="), _b64(mac + mac)]
            # As a private key, in every encoding it might be hiding in.
            for key in private_keys_from(value):
                assert (
                    key.public_key().public_numbers()
                    != signing.load_public_key(stored.public_key).public_numbers()
                )
                forged.append(
                    signing.sign(key, owner.id, "POST", target, tap, clock())[
                        signing.SIGNATURE_HEADER
                    ]
                )
            # And the stored value itself, sent as the signature.
            forged.append(_b64(value[:64]))
            for signature in forged:
                tried += 1
                request = signing.SignedRequest(
                    owner.id, "POST", target, stamp, tap, signature, JSON
                )
                with pytest.raises(DeviceRefused) as caught:
                    signing.verify(stored, request, now=clock())
                assert caught.value.reason is Reason.BAD_DEVICE_SIGNATURE
        assert tried > 100

        # Through the real route too: a forged tap on the waiting set is refused and runs nothing.
        headers = {
            signing.DEVICE_HEADER: owner.id,
            signing.TIMESTAMP_HEADER: stamp,
            signing.SIGNATURE_HEADER: _b64(
                hmac.new(stored.public_key.encode(), message, hashlib.sha256).digest()
            ),
            "Content-Type": "application/json",
        }
        response = await client.post(target, content=tap, headers=headers)
        assert response.status_code == 401
        assert response.json()["reason"] == Reason.BAD_DEVICE_SIGNATURE
        assert len(executed.calls) == 1
        # The device whose key never touched the database still can.
        assert (await owner.post_json(target, json.loads(tap))).json()["released"] is True
        assert len(executed.calls) == 2
        # The open code still pairs the owner's new device: the copy changed nothing for them.
        assert (await paired_with(client, code)).status_code == 200


# A code space small enough to search in a test: 3 digits, and scrypt at its cheapest. The
# search below is the one an attacker holding the copy would run against 8 digits.
SMALL_DIGITS = 3
CHEAP_SCRYPT = {"n": 2, "r": 1, "p": 1, "dklen": 32}


def open_code_hashes(db: Path) -> list[str]:
    """The stored hashes of the pairing codes still open in a copy of the database."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [row[0] for row in conn.execute("SELECT code_hash FROM vg_pairings")]


def unkeyed_scrypt(code: str) -> bytes:
    """scrypt of a code under the fixed salt: what anyone could compute without the key."""
    return hashlib.scrypt(code.encode(), salt=pairing.SALT, **pairing.SCRYPT)


def search(stored: str, candidate_keys: Iterable[bytes]) -> set[str]:
    """Every code of ``SMALL_DIGITS`` digits whose hash matches ``stored`` under any candidate:
    no key at all, each candidate as the HMAC key, and each as a signing key the pairing key
    is derived from."""
    keys = list(candidate_keys)
    found = set()
    for n in range(10**SMALL_DIGITS):
        code = f"{n:0{SMALL_DIGITS}d}"
        slow = unkeyed_scrypt(code)
        if stored in (slow.hex(), hashlib.sha256(code.encode()).hexdigest()):
            found.add(code)
        for key in keys:
            derived = hmac.new(key, pairing.KEY_LABEL, hashlib.sha256).digest()
            for pepper in (key, derived):
                if hmac.new(pepper, slow, hashlib.sha256).hexdigest() == stored:
                    found.add(code)
    return found


async def paired_with(client: httpx.AsyncClient, code: str) -> httpx.Response:
    key = ec.generate_private_key(ec.SECP256R1())
    spki = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return await client.post("/device/pair", json={"code": code, "public_key": spki.decode()})


async def test_an_open_pairing_code_cannot_be_searched_out_of_a_copy(
    tmp_path: Path,
    sqlite_services: Services,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pairing, "CODE_DIGITS", SMALL_DIGITS)
    monkeypatch.setattr(pairing, "SCRYPT", CHEAP_SCRYPT)
    services = sqlite_services
    keys = services.gate.receipt_keys
    code = await pairing.start_pairing(
        services.store, "asha", DeviceKind.TAP, keys=keys, clock=clock
    )
    copy_dir = tmp_path / "stolen"
    copy_dir.mkdir()
    for part in tmp_path.glob("gate.db*"):
        shutil.copy(part, copy_dir / part.name)
    (stored,) = open_code_hashes(copy_dir / "gate.db")
    values = list(stored_values(copy_dir / "gate.db"))
    assert stored.encode() in values

    # With the copy alone, every code is searched under every value in it: nothing matches.
    assert search(stored, values) == set()
    # The same search with the server's key finds the code, so its silence above is meaningful.
    assert search(stored, [secret.reveal() for _, secret in keys]) == {code}
    # And another install's key is no better than none: no table carries over between installs.
    other = KeyRing.generate()
    assert search(stored, [secret.reveal() for _, secret in other]) == set()
    assert pairing.hash_code(code, other) != stored

    app = FastAPI()
    app.include_router(device_router(services))
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        assert (await paired_with(client, code)).status_code == 200


def test_private_key_probe_finds_a_key_when_one_is_there() -> None:
    # The probe above must be able to find a key, or its silence would prove nothing.
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    scalar = key.private_numbers().private_value.to_bytes(32, "big")
    jwk = json.dumps({"kty": "EC", "crv": "P-256", "d": _b64(scalar)})
    for hidden in (pem, scalar.hex(), _b64(scalar), jwk):
        found = list(private_keys_from(hidden))
        assert any(
            k.private_numbers().private_value == key.private_numbers().private_value for k in found
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
