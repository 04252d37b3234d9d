"""Signed device requests: accepted once, inside the window, only over the bytes signed."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given
from hypothesis import strategies as st

from tests.device.kit import START
from voicegate.device import signing
from voicegate.device.auth import authenticate
from voicegate.domain import Device, DeviceKind
from voicegate.errors import DeviceRefused
from voicegate.reasons import Reason
from voicegate.services import Services

KEY = ec.generate_private_key(ec.SECP256R1())
DEVICE = Device(
    id="dev_test",
    user="asha",
    kind=DeviceKind.VOICE,
    public_key=signing.normalise_public_key(
        KEY.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    ),
    algorithm=signing.ALGORITHM,
    created_at=START,
)
BODY = b'{"pending_id":"p_1","nonce":"n","decision":"choose","card":2,"input":"touch"}'


def signed(
    body: bytes = BODY,
    *,
    at: float = START,
    method: str = "POST",
    target: str = "/device/tap",
    key: ec.EllipticCurvePrivateKey = KEY,
    sent: dict[str, str] | None = None,
) -> signing.SignedRequest:
    headers = signing.sign(key, DEVICE.id, method, target, body, at, sent)
    return signing.SignedRequest(
        device_id=headers[signing.DEVICE_HEADER],
        method=method,
        target=target,
        timestamp=headers[signing.TIMESTAMP_HEADER],
        body=body,
        signature=headers[signing.SIGNATURE_HEADER],
        headers={name: headers[name] for name in signing.COVERED if name in headers},
    )


def refusal(device: Device | None, request: signing.SignedRequest, now: float = START) -> Reason:
    with pytest.raises(DeviceRefused) as caught:
        signing.verify(device, request, now=now)
    return caught.value.reason


def test_a_correctly_signed_request_verifies() -> None:
    key, expires_at = signing.verify(DEVICE, signed(), now=START)
    assert key.startswith("device-request:dev_test:")
    assert expires_at > START + signing.WINDOW


def test_request_sent_61_seconds_late_is_stale() -> None:
    assert refusal(DEVICE, signed(at=START - 61)) is Reason.STALE_REQUEST


def test_request_stamped_61_seconds_ahead_is_stale() -> None:
    assert refusal(DEVICE, signed(at=START + 61)) is Reason.STALE_REQUEST


def test_request_60_seconds_old_is_still_inside_the_window() -> None:
    signing.verify(DEVICE, signed(at=START - 60), now=START)


def test_request_with_one_body_byte_changed_is_refused() -> None:
    request = signed()
    changed = request.body.replace(b'"card":2', b'"card":1')
    assert changed != request.body
    tampered = dataclasses.replace(request, body=changed)
    assert refusal(DEVICE, tampered) is Reason.BAD_DEVICE_SIGNATURE


@given(position=st.integers(min_value=0, max_value=len(BODY) - 1), flip=st.integers(1, 255))
def test_any_changed_body_byte_is_refused(position: int, flip: int) -> None:
    request = signed()
    body = bytearray(request.body)
    body[position] ^= flip
    tampered = dataclasses.replace(request, body=bytes(body))
    assert refusal(DEVICE, tampered) is Reason.BAD_DEVICE_SIGNATURE


def test_signature_for_another_path_is_refused() -> None:
    request = signed(target="/device/tap")
    moved = dataclasses.replace(request, target="/device/more-time")
    assert refusal(DEVICE, moved) is Reason.BAD_DEVICE_SIGNATURE


def test_signature_for_another_query_is_refused() -> None:
    request = signed(target="/device/voice?pending_id=p_1")
    moved = dataclasses.replace(request, target="/device/voice?pending_id=p_2")
    assert refusal(DEVICE, moved) is Reason.BAD_DEVICE_SIGNATURE


VOICE_HEADERS = {
    "Content-Type": "audio/wav",
    signing.PENDING_HEADER: "p_1",
    signing.NONCE_HEADER: "n_1",
}


@pytest.mark.parametrize(
    ("name", "swapped"),
    [
        ("Content-Type", "audio/flac"),
        ("Content-Type", "multipart/form-data; boundary=x"),
        (signing.PENDING_HEADER, "p_2"),
        (signing.NONCE_HEADER, "n_2"),
    ],
)
def test_a_swapped_covered_header_is_refused(name: str, swapped: str) -> None:
    request = signed(b"RIFF", target="/device/voice", sent=VOICE_HEADERS)
    signing.verify(DEVICE, request, now=START)
    moved = dataclasses.replace(request, headers={**request.headers, name: swapped})
    assert refusal(DEVICE, moved) is Reason.BAD_DEVICE_SIGNATURE


@pytest.mark.parametrize("name", signing.COVERED)
def test_a_covered_header_dropped_or_added_is_refused(name: str) -> None:
    request = signed(b"RIFF", target="/device/voice", sent=VOICE_HEADERS)
    dropped = {k: v for k, v in request.headers.items() if k != name}
    assert refusal(DEVICE, dataclasses.replace(request, headers=dropped)) is (
        Reason.BAD_DEVICE_SIGNATURE
    )
    bare = signed(b"RIFF", target="/device/voice", sent={})
    added = dataclasses.replace(bare, headers={name: VOICE_HEADERS[name]})
    assert refusal(DEVICE, added) is Reason.BAD_DEVICE_SIGNATURE


def test_covered_headers_are_matched_in_any_letter_case() -> None:
    request = signed(b"RIFF", target="/device/voice", sent=VOICE_HEADERS)
    lowered = {k.lower(): v for k, v in request.headers.items()}
    signing.verify(DEVICE, dataclasses.replace(request, headers=lowered), now=START)


def test_a_line_break_in_a_covered_header_cannot_pass_for_another_line() -> None:
    # Were line breaks allowed, "audio/wav" + pending "p_1\nn_1" would sign the same bytes as
    # pending "p_1" and nonce "n_1".
    with pytest.raises(ValueError):
        signing.canonical("d", "POST", "/device/voice", "1", b"", {"X-Voicegate-Pending": "a\nb"})
    request = signed(b"RIFF", target="/device/voice", sent=VOICE_HEADERS)
    broken = dataclasses.replace(request, headers={**request.headers, "Content-Type": "a\rb"})
    assert refusal(DEVICE, broken) is Reason.BAD_DEVICE_SIGNATURE


def test_a_body_without_headers_is_signed_as_json() -> None:
    headers = signing.sign(KEY, DEVICE.id, "POST", "/device/tap", BODY, START)
    assert headers["Content-Type"] == "application/json"
    assert "Content-Type" not in signing.sign(KEY, DEVICE.id, "GET", "/device/pending", b"", START)


def test_changed_timestamp_is_refused_even_inside_the_window() -> None:
    request = signed()
    moved = dataclasses.replace(request, timestamp=str(int(START) + 1))
    assert refusal(DEVICE, moved) is Reason.BAD_DEVICE_SIGNATURE


def test_signature_by_another_key_is_refused() -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    assert refusal(DEVICE, signed(key=other)) is Reason.BAD_DEVICE_SIGNATURE


def test_garbage_signature_is_refused() -> None:
    request = signed()
    for junk in (
        "",
        "not base64!",
        "AAAA",
        "A" * 86,
        base64.urlsafe_b64encode(b"\0" * 64).decode(),
    ):
        broken = dataclasses.replace(request, signature=junk)
        assert refusal(DEVICE, broken) is Reason.BAD_DEVICE_SIGNATURE


def test_unknown_device_is_refused() -> None:
    assert refusal(None, signed()) is Reason.UNKNOWN_DEVICE


def test_request_without_any_signature_header_is_refused_as_unsigned() -> None:
    bare = dataclasses.replace(signed(), device_id="", timestamp="", signature="")
    assert refusal(DEVICE, bare) is Reason.UNSIGNED_REQUEST
    assert refusal(None, bare) is Reason.UNSIGNED_REQUEST


def test_revoked_device_is_refused() -> None:
    revoked = dataclasses.replace(DEVICE, revoked_at=START - 1)
    assert refusal(revoked, signed()) is Reason.DEVICE_REVOKED


def test_mirrored_signature_spends_the_same_replay_key() -> None:
    request = signed()
    raw = base64.urlsafe_b64decode(request.signature + "==")
    r, s = raw[:32], int.from_bytes(raw[32:], "big")
    mirrored = r + (signing.P256_ORDER - s).to_bytes(32, "big")
    twin = dataclasses.replace(
        request, signature=base64.urlsafe_b64encode(mirrored).decode().rstrip("=")
    )
    assert (
        signing.verify(DEVICE, twin, now=START)[0] == signing.verify(DEVICE, request, now=START)[0]
    )


async def test_replayed_request_is_refused(services: Services) -> None:
    await services.store.devices.add(DEVICE)
    request = signed()
    assert (await authenticate(services, request)).id == DEVICE.id
    with pytest.raises(DeviceRefused) as caught:
        await authenticate(services, request)
    assert caught.value.reason is Reason.REQUEST_REPLAYED


def test_jwk_spki_pem_and_der_normalise_to_one_stored_form() -> None:
    public = KEY.public_key()
    pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    jwk = json.loads(DEVICE.public_key)
    forms = [pem, base64.b64encode(der).decode(), jwk, json.dumps(jwk)]
    assert {signing.normalise_public_key(f) for f in forms} == {DEVICE.public_key}
    assert set(jwk) == {"crv", "kty", "x", "y"}


def test_private_jwk_and_other_curves_are_not_accepted_as_device_keys() -> None:
    jwk = json.loads(DEVICE.public_key)
    with pytest.raises(ValueError):
        signing.normalise_public_key({**jwk, "d": jwk["x"]})
    other = ec.generate_private_key(ec.SECP384R1()).public_key()
    pem = other.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    with pytest.raises(ValueError):
        signing.normalise_public_key(pem)
    with pytest.raises(ValueError):
        signing.normalise_public_key({**jwk, "y": jwk["x"]})  # not a point on the curve
