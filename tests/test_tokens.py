"""Two-phase tokens: each check refuses with its own reason, and no tampering gets through."""

from __future__ import annotations

import base64
import json
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicegate.canonical import args_hash, canonical_json
from voicegate.clock import ManualClock
from voicegate.errors import TokenRefused
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing, generate_secret
from voicegate.tokens import MAX_TOKEN_CHARS, PREFIX, Claims, TokenCodec

BINDING: dict[str, str] = {
    "subject": "user:alice",
    "tenant": "acme",
    "tool": "send_email",
    "target": "mail.example.com",
    "args_hash": args_hash({"to": "bob@example.com", "amount": 10}),
}
RING = KeyRing([("k1", generate_secret())])
ALPHABET = string.ascii_letters + string.digits + "-_."

# A loaded machine must not fail a property on time; speed lives in benchmarks.
NO_DEADLINE = settings(deadline=None)


def codec(keys: KeyRing = RING, clock: ManualClock | None = None, ttl: float = 300.0) -> TokenCodec:
    return TokenCodec(keys, ttl=ttl, clock=clock or ManualClock(1_700_000_000.0))


def refusal(token: Any, codec_: TokenCodec | None = None, /, **changes: str) -> Reason:
    with pytest.raises(TokenRefused) as caught:
        (codec_ or codec()).verify(token, **{**BINDING, **changes})
    return caught.value.reason


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(header: Any, claims: Any, keys: KeyRing = RING) -> str:
    """A token with this header and payload, correctly signed, to reach the later checks."""
    signing_input = PREFIX + b64(canonical_json(header)) + "." + b64(canonical_json(claims))
    _, mac = keys.sign(signing_input.encode())
    return signing_input + "." + b64(mac)


def valid_claims() -> dict[str, Any]:
    return {
        "sub": "user:alice",
        "ten": "acme",
        "tool": "send_email",
        "tgt": "mail.example.com",
        "ah": BINDING["args_hash"],
        "iat": 1_700_000_000,
        "exp": 1_700_000_300,
        "jti": "abc",
    }


HEADER = {"alg": "HS256", "typ": "vgcf", "kid": "k1"}


def test_a_fresh_token_verifies_and_returns_its_claims() -> None:
    clock = ManualClock(1_700_000_000.0)
    tokens = codec(clock=clock)
    claims = tokens.verify(tokens.mint(**BINDING), **BINDING)
    assert isinstance(claims, Claims)
    assert (claims.subject, claims.tenant, claims.tool, claims.target) == (
        "user:alice",
        "acme",
        "send_email",
        "mail.example.com",
    )
    assert claims.args_hash == BINDING["args_hash"]
    assert claims.issued_at == clock.now
    assert claims.expires_at == clock.now + 300
    assert claims.key_id == "k1"


def test_token_has_the_documented_shape() -> None:
    token = codec().mint(**BINDING)
    assert token.startswith("vg_cf_")
    header, payload, signature = token[len(PREFIX) :].split(".")
    assert "=" not in token
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == HEADER
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    assert set(claims) == {"sub", "ten", "tool", "tgt", "ah", "iat", "exp", "jti"}
    assert len(base64.urlsafe_b64decode(claims["jti"] + "==")) == 16
    assert len(base64.urlsafe_b64decode(signature + "=")) == 32


def test_every_token_has_its_own_jti() -> None:
    tokens = codec()
    first = tokens.verify(tokens.mint(**BINDING), **BINDING)
    second = tokens.verify(tokens.mint(**BINDING), **BINDING)
    assert first.jti != second.jti


def test_jti_comes_from_the_injected_randomness() -> None:
    tokens = TokenCodec(RING, clock=ManualClock(1_700_000_000.0), token_bytes=lambda n: b"\x01" * n)
    assert tokens.verify(tokens.mint(**BINDING), **BINDING).jti == b64(b"\x01" * 16)


@pytest.mark.parametrize("token", [None, "", b""])
def test_no_token_is_refused_as_missing(token: str | bytes | None) -> None:
    assert refusal(token) is Reason.MISSING


def test_token_as_ascii_bytes_is_accepted() -> None:
    tokens = codec()
    assert tokens.verify(tokens.mint(**BINDING).encode(), **BINDING).subject == "user:alice"


def test_every_single_character_change_is_refused() -> None:
    tokens = codec()
    token = tokens.mint(**BINDING)
    tried = 0
    for position, original in enumerate(token):
        for replacement in ALPHABET:
            if replacement == original:
                continue
            tampered = token[:position] + replacement + token[position + 1 :]
            with pytest.raises(TokenRefused):
                tokens.verify(tampered, **BINDING)
            tried += 1
    assert tried > 10_000


def test_dropping_or_adding_one_character_is_refused() -> None:
    tokens = codec()
    token = tokens.mint(**BINDING)
    for position in range(len(token)):
        with pytest.raises(TokenRefused):
            tokens.verify(token[:position] + token[position + 1 :], **BINDING)
    for position in range(len(token) + 1):
        with pytest.raises(TokenRefused):
            tokens.verify(token[:position] + "A" + token[position:], **BINDING)


def test_padding_the_base64_parts_is_refused() -> None:
    token = codec().mint(**BINDING)
    assert refusal(token + "=") is Reason.MALFORMED
    assert refusal(token.replace(".", "=.", 1)) is Reason.MALFORMED


def test_changed_args_hash_is_refused_as_plan_changed() -> None:
    token = codec().mint(**BINDING)
    other = args_hash({"to": "bob@example.com", "amount": 1000})
    assert refusal(token, args_hash=other) is Reason.PLAN_CHANGED


def test_token_past_expiry_is_refused_as_expired() -> None:
    clock = ManualClock(1_700_000_000.0)
    tokens = codec(clock=clock)
    token = tokens.mint(**BINDING)
    clock.now += 299.999
    tokens.verify(token, **BINDING)
    clock.now += 0.001
    assert refusal(token, tokens) is Reason.EXPIRED


def test_ttl_is_configurable() -> None:
    clock = ManualClock(1_700_000_000.0)
    tokens = codec(clock=clock, ttl=30)
    token = tokens.mint(**BINDING)
    clock.now += 30
    assert refusal(token, tokens) is Reason.EXPIRED


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf")])
def test_nonsense_ttl_is_refused(ttl: float) -> None:
    with pytest.raises(ValueError):
        TokenCodec(RING, ttl=ttl)


@pytest.mark.parametrize("change", [{"subject": "user:mallory"}, {"tenant": "other-corp"}])
def test_token_of_another_user_or_tenant_is_refused_as_wrong_user(change: dict[str, str]) -> None:
    assert refusal(codec().mint(**BINDING), **change) is Reason.WRONG_USER


@pytest.mark.parametrize(
    "change",
    [{"tool": "delete_mailbox"}, {"tool": "SEND_EMAIL"}, {"target": "mail.evil.example"}],
)
def test_token_for_another_tool_or_target_is_refused_as_wrong_tool(change: dict[str, str]) -> None:
    assert refusal(codec().mint(**BINDING), **change) is Reason.WRONG_TOOL


def test_checks_run_in_order_cheapest_and_most_definite_first() -> None:
    clock = ManualClock(1_700_000_000.0)
    tokens = codec(clock=clock)
    token = tokens.mint(**BINDING)
    clock.now += 1000
    everything_wrong = {
        "subject": "x",
        "tenant": "x",
        "tool": "x",
        "target": "x",
        "args_hash": "x",
    }
    tampered = token[:-2] + ("AA" if token[-2:] != "AA" else "BA")
    assert refusal(tampered, tokens, **everything_wrong) is Reason.BAD_SIGNATURE
    assert refusal(token, tokens, **everything_wrong) is Reason.EXPIRED
    clock.now -= 1000
    assert refusal(token, tokens, **everything_wrong) is Reason.WRONG_USER
    assert refusal(token, tokens, tool="x", target="x", args_hash="x") is Reason.WRONG_TOOL
    assert refusal(token, tokens, args_hash="x") is Reason.PLAN_CHANGED


def test_token_signed_by_an_older_key_verifies_after_rotation() -> None:
    old = KeyRing([("k1", generate_secret())])
    token = codec(old).mint(**BINDING)
    rotated = KeyRing([("k2", generate_secret()), *old])
    assert codec(rotated).verify(token, **BINDING).key_id == "k1"
    assert codec(rotated).mint(**BINDING) != token
    assert codec(rotated).verify(codec(rotated).mint(**BINDING), **BINDING).key_id == "k2"


def test_token_whose_key_was_renamed_still_verifies() -> None:
    secret = generate_secret()
    token = codec(KeyRing([("k1", secret)])).mint(**BINDING)
    assert codec(KeyRing([("k9", secret)])).verify(token, **BINDING).key_id == "k1"


def test_token_from_an_unknown_key_is_refused_as_bad_signature() -> None:
    token = codec(KeyRing([("k1", generate_secret())])).mint(**BINDING)
    assert refusal(token, codec(KeyRing([("k1", generate_secret())]))) is Reason.BAD_SIGNATURE
    assert refusal(token, codec(KeyRing([("k2", generate_secret())]))) is Reason.BAD_SIGNATURE


def test_token_for_a_retired_key_is_refused() -> None:
    old = KeyRing([("k1", generate_secret())])
    token = codec(old).mint(**BINDING)
    assert refusal(token, codec(KeyRing([("k2", generate_secret())]))) is Reason.BAD_SIGNATURE


def test_forged_well_formed_claims_need_the_key() -> None:
    claims = {**valid_claims(), "sub": "user:mallory"}
    stranger = KeyRing([("k1", generate_secret())])
    assert refusal(forge(HEADER, claims, stranger)) is Reason.BAD_SIGNATURE


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "none", "typ": "vgcf", "kid": "k1"},
        {"alg": "HS512", "typ": "vgcf", "kid": "k1"},
        {"alg": "HS256", "typ": "JWT", "kid": "k1"},
        {"alg": "HS256", "typ": "vgcf", "kid": 1},
        {"alg": "HS256", "typ": "vgcf"},
        {"alg": "HS256", "typ": "vgcf", "kid": "k1", "extra": 1},
        ["HS256"],
    ],
)
def test_header_other_than_ours_is_refused_as_malformed(header: Any) -> None:
    assert refusal(forge(header, valid_claims())) is Reason.MALFORMED


@pytest.mark.parametrize(
    "change",
    [
        {"sub": 1},
        {"ah": None},
        {"jti": ["a"]},
        {"iat": "1700000000"},
        {"exp": True},
        {"exp": 1_699_999_999},
        {"exp": 10**400},
        {"extra": "x"},
    ],
)
def test_claims_of_the_wrong_type_are_refused_as_malformed(change: dict[str, Any]) -> None:
    assert refusal(forge(HEADER, {**valid_claims(), **change})) is Reason.MALFORMED


def test_missing_claim_is_refused_as_malformed() -> None:
    claims = valid_claims()
    del claims["jti"]
    assert refusal(forge(HEADER, claims)) is Reason.MALFORMED


def test_a_correctly_signed_forged_claim_set_reaches_the_binding_checks() -> None:
    token = forge(HEADER, valid_claims())
    assert codec().verify(token, **BINDING).jti == "abc"


def test_non_canonical_json_inside_is_refused_as_malformed() -> None:
    header = b64(b'{"kid": "k1", "alg": "HS256", "typ": "vgcf"}')
    payload = b64(canonical_json(valid_claims()))
    signing_input = f"{PREFIX}{header}.{payload}"
    token = signing_input + "." + b64(RING.sign(signing_input.encode())[1])
    assert refusal(token) is Reason.MALFORMED


@pytest.mark.parametrize(
    "token",
    [
        "mcp_cf_a.b.c",
        "vg_cf_",
        "vg_cf_a.b",
        "vg_cf_a.b.c.d",
        "vg_cf_..",
        "vg_cf_!!!!.bbbb.cccc",
        "vg_cf_e30.e30.AAAA",
        "vg_cf_" + b64(b"[" * 1500 + b"]" * 1500) + ".e30." + "A" * 43,
        "vg_cf_" + b64(b"\xff\xfe") + ".e30." + "A" * 43,
        "vg_cf_" + "A" * MAX_TOKEN_CHARS,
        b"vg_cf_\xff.a.b",
        "vg_cf_é.a.b",
    ],
)
def test_garbage_is_refused_as_malformed(token: str | bytes) -> None:
    assert refusal(token) is Reason.MALFORMED


def test_a_value_that_is_not_text_is_refused_as_malformed() -> None:
    assert refusal(12345) is Reason.MALFORMED


def test_a_token_too_large_to_verify_is_not_minted() -> None:
    with pytest.raises(ValueError):
        codec().mint(**{**BINDING, "target": "x" * MAX_TOKEN_CHARS})


@NO_DEADLINE
@given(st.text(max_size=600) | st.binary(max_size=600))
def test_arbitrary_input_only_ever_raises_token_refused(token: str | bytes) -> None:
    with pytest.raises(TokenRefused):
        codec().verify(token, **BINDING)


@NO_DEADLINE
@given(st.text(alphabet=ALPHABET, max_size=200))
def test_arbitrary_token_shaped_input_only_ever_raises_token_refused(rest: str) -> None:
    with pytest.raises(TokenRefused):
        codec().verify(PREFIX + rest, **BINDING)


@NO_DEADLINE
@given(st.data())
def test_any_tampered_token_is_refused(data: st.DataObject) -> None:
    # A fixed jti keeps the token, and so the drawn examples, the same on every run.
    tokens = TokenCodec(RING, clock=ManualClock(1_700_000_000.0), token_bytes=lambda n: b"\x07" * n)
    token = tokens.mint(**BINDING)
    position = data.draw(st.integers(0, len(token) - 1))
    replacement = data.draw(st.characters(exclude_characters=token[position]))
    tampered = token[:position] + replacement + token[position + 1 :]
    with pytest.raises(TokenRefused):
        tokens.verify(tampered, **BINDING)
