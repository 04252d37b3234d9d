"""The passkey core: the challenge binds set, nonce and action; each failed check has its reason."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.authenticator import ORIGIN, RP_ID, SoftPasskey
from voicegate.domain import PasskeyAssertion
from voicegate.errors import Refused
from voicegate.passkey import (
    REGISTRATION_TTL,
    RelyingParty,
    challenge,
    check_assertion,
    check_registration,
    counter_ok,
    passkey_id,
    registration_challenge,
    unb64url,
)
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing

RP = RelyingParty(RP_ID, (ORIGIN,))
KEYS = KeyRing.generate()
NOW = 1_800_000_000.0
text = st.text(max_size=40)


def parts(credential: dict[str, Any]) -> PasskeyAssertion:
    """The raw parts of an assertion's JSON, as the device route decodes them."""
    response = credential["response"]
    decoded = {
        "credential_id": unb64url(credential["rawId"]),
        "client_data": unb64url(response["clientDataJSON"]),
        "authenticator_data": unb64url(response["authenticatorData"]),
        "signature": unb64url(response["signature"]),
    }
    assert all(v is not None for v in decoded.values())
    return PasskeyAssertion(**{k: v for k, v in decoded.items() if v is not None})


def registered(soft: SoftPasskey) -> Any:
    fresh = registration_challenge(KEYS, "dev_1", NOW)
    passkey, _ = check_registration(
        soft.register(fresh), rp=RP, keys=KEYS, device_id="dev_1", user="asha", now=NOW
    )
    return passkey


@given(text, text, text, text, text, text)
def test_any_change_of_set_nonce_or_action_changes_the_challenge(
    pending: str, nonce: str, action: str, pending2: str, nonce2: str, action2: str
) -> None:
    same = (pending, nonce, action) == (pending2, nonce2, action2)
    assert (challenge(pending, nonce, action) == challenge(pending2, nonce2, action2)) is same


@given(text, st.text(min_size=1, max_size=40), text)
def test_no_two_ways_of_splitting_one_string_share_a_challenge(a: str, b: str, c: str) -> None:
    # The parts are joined as canonical JSON: moving text from one part to the next changes it.
    assert challenge(a + b, c, "h") != challenge(a, b + c, "h")


def test_a_registration_makes_a_passkey_named_by_its_id_hash() -> None:
    soft = SoftPasskey()
    passkey = registered(soft)
    assert passkey.id == passkey_id(soft.credential_id) and passkey.id.startswith("pk_")
    assert passkey.user == "asha" and passkey.device_id == "dev_1" and passkey.sign_count == 0


def test_an_assertion_over_the_expected_challenge_proves_the_flags_and_counter() -> None:
    soft = SoftPasskey()
    passkey = registered(soft)
    expected = challenge("p_1", "n_1", "ab" * 32)
    proof = check_assertion(parts(soft.assertion(expected)), passkey, rp=RP, expected=expected)
    assert proof.id == passkey.id and proof.user_verified and proof.user_present
    assert proof.sign_count == 1 and proof.origin == ORIGIN and proof.rp_id == RP_ID


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"challenge": challenge("p_2", "n_1", "ab" * 32)}, Reason.PASSKEY_MISMATCH),
        ({"origin": "http://localhost:9999"}, Reason.PASSKEY_WRONG_ORIGIN),
        ({"rp_id": "example.com"}, Reason.PASSKEY_WRONG_RP),
        ({"uv": False}, Reason.PASSKEY_NOT_VERIFIED),
        ({"counter": 0}, Reason.PASSKEY_COUNTER),
    ],
)
def test_each_wrong_assertion_is_refused_by_its_own_reason(
    change: dict[str, Any], reason: Reason
) -> None:
    soft = SoftPasskey()
    passkey = registered(soft)
    expected = challenge("p_1", "n_1", "ab" * 32)
    stored = dataclasses.replace(passkey, sign_count=5) if "counter" in change else passkey
    made = soft.assertion(change.pop("challenge", expected), **change)
    with pytest.raises(Refused) as refused:
        check_assertion(parts(made), stored, rp=RP, expected=expected)
    assert refused.value.reason is reason


def test_an_assertion_signed_by_another_key_is_a_bad_signature() -> None:
    soft, other = SoftPasskey(), SoftPasskey()
    passkey = registered(soft)
    expected = challenge("p_1", "n_1", "ab" * 32)
    with pytest.raises(Refused) as refused:
        check_assertion(parts(other.assertion(expected)), passkey, rp=RP, expected=expected)
    assert refused.value.reason is Reason.PASSKEY_BAD_SIGNATURE


def test_garbage_in_every_part_is_refused_never_raised() -> None:
    passkey = registered(SoftPasskey())
    for field in ("client_data", "authenticator_data", "signature"):
        broken = dataclasses.replace(
            PasskeyAssertion(b"id", b"{}", b"\0" * 37, b"sig"), **{field: b"\xff\x00garbage"}
        )
        with pytest.raises(Refused) as refused:
            check_assertion(broken, passkey, rp=RP, expected=b"x" * 32)
        assert refused.value.reason in (Reason.PASSKEY_BAD_SIGNATURE, Reason.PASSKEY_MISMATCH)


@pytest.mark.parametrize(
    ("device", "now", "origin", "uv", "reason"),
    [
        ("dev_2", NOW, ORIGIN, True, Reason.PASSKEY_REGISTRATION),  # another device's challenge
        ("dev_1", NOW + REGISTRATION_TTL + 1, ORIGIN, True, Reason.PASSKEY_REGISTRATION),
        ("dev_1", NOW, "http://evil.example", True, Reason.PASSKEY_WRONG_ORIGIN),
        ("dev_1", NOW, ORIGIN, False, Reason.PASSKEY_NOT_VERIFIED),
    ],
)
def test_a_registration_is_refused_by_name(
    device: str, now: float, origin: str, uv: bool, reason: Reason
) -> None:
    made = SoftPasskey().register(registration_challenge(KEYS, "dev_1", NOW), origin=origin, uv=uv)
    with pytest.raises(Refused) as refused:
        check_registration(made, rp=RP, keys=KEYS, device_id=device, user="asha", now=now)
    assert refused.value.reason is reason


@pytest.mark.parametrize(
    "credential",
    [{}, {"response": "x"}, {"response": {"clientDataJSON": "!!", "attestationObject": "AA"}}],
)
def test_a_malformed_registration_is_refused(credential: dict[str, Any]) -> None:
    with pytest.raises(Refused) as refused:
        check_registration(credential, rp=RP, keys=KEYS, device_id="d", user="u", now=NOW)
    assert refused.value.reason is Reason.PASSKEY_REGISTRATION


@pytest.mark.parametrize(
    ("stored", "signed", "ok"),
    [(0, 0, True), (0, 1, True), (4, 5, True), (5, 5, False), (5, 1, False), (5, 0, False)],
)
def test_the_counter_must_grow_unless_it_is_never_kept(stored: int, signed: int, ok: bool) -> None:
    assert counter_ok(stored, signed) is ok


@pytest.mark.parametrize(
    ("url", "rp"),
    [
        ("http://127.0.0.1:8800", RelyingParty("localhost", ("http://localhost:8800",))),
        (
            "https://Gate.Example.org",
            RelyingParty("gate.example.org", ("https://gate.example.org",)),
        ),
        (
            "https://gate.example.org:8443/x",
            RelyingParty("gate.example.org", ("https://gate.example.org:8443",)),
        ),
        ("http://192.168.1.5:8800", None),
        ("http://[::1]:8800", RelyingParty("localhost", ("http://localhost:8800",))),
    ],
)
def test_the_relying_party_comes_from_the_servers_own_address(
    url: str, rp: RelyingParty | None
) -> None:
    assert RelyingParty.for_url(url) == rp
