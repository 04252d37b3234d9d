"""The device API's OpenAPI document tells a client how to sign and what a recording may be."""

from __future__ import annotations

from typing import Any

import pytest

from voicegate.clock import ManualClock
from voicegate.device import signing
from voicegate.device.openapi import AUDIO_TYPES, MAX_VOICE_SECONDS, MIN_VOICE_SECONDS
from voicegate.gate import grant_rules
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.secrets import KeyRing
from voicegate.settings import MAX_VOICE_BYTES, ServerConfig
from voicegate.store.memory import MemoryStore
from voicegate.voice.audio import Limits
from voicegate.web.app import build_app

SIGNED_ROUTES = [
    ("/device/pending", "get"),
    ("/device/tap", "post"),
    ("/device/voice", "post"),
    ("/device/more-time", "post"),
    ("/device/receipts", "get"),
    ("/device/enrol/voice", "post"),
    ("/device/enrol", "get"),
    ("/device/enrol", "delete"),
    ("/device/enrol/{template_id}", "delete"),
    ("/device/enrol/hard", "post"),
    ("/device/passkeys", "get"),
    ("/device/passkeys/options", "post"),
    ("/device/passkeys", "post"),
    ("/device/passkeys/{passkey_id}", "delete"),
    ("/device/passkey", "post"),
    ("/device/sets/{pending_id}", "get"),
    ("/device/push", "get"),
    ("/device/push", "post"),
    ("/device/push", "delete"),
    ("/device/approve-all", "post"),
    ("/device/grants", "get"),
    ("/device/grants/{grant_id}", "delete"),
]


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """The OpenAPI document of the whole app ``build_app`` serves."""
    app = build_app(
        ServerConfig(keys=KeyRing.generate()),
        upstream=UpstreamSpec.in_process(build_notes_server()),
        policy=Policy(),
        store=MemoryStore(),
        clock=ManualClock(),
    )
    return app.openapi()


def headers_of(operation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "header"}


def test_the_signature_scheme_describes_the_signed_string(document: dict[str, Any]) -> None:
    scheme = document["components"]["securitySchemes"][signing.SCHEME]
    assert scheme["type"] == "apiKey"
    assert scheme["in"] == "header"
    assert scheme["name"] == signing.SIGNATURE_HEADER
    # Every line of ``signing.canonical``, in order, is named in the description.
    lines = [signing.SCHEME, signing.DEVICE_HEADER, "METHOD", "path and query"]
    lines += [signing.TIMESTAMP_HEADER, "SHA-256 of the body", *signing.COVERED]
    at = [scheme["description"].find(line) for line in lines]
    assert -1 not in at and at == sorted(at), dict(zip(lines, at, strict=True))


@pytest.mark.parametrize(("path", "method"), SIGNED_ROUTES)
def test_every_signed_route_declares_the_scheme_and_headers(
    document: dict[str, Any], path: str, method: str
) -> None:
    operation = document["paths"][path][method]
    assert operation["security"] == [{signing.SCHEME: []}]
    headers = headers_of(operation)
    assert headers[signing.DEVICE_HEADER]["required"] is True
    assert headers[signing.TIMESTAMP_HEADER]["required"] is True


def test_pairing_needs_no_signature(document: dict[str, Any]) -> None:
    operation = document["paths"]["/device/pair"]["post"]
    assert "security" not in operation
    assert headers_of(operation) == {}


def test_only_the_signed_routes_carry_the_scheme(document: dict[str, Any]) -> None:
    secured = {
        (path, method)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if operation.get("security")
    }
    assert secured == set(SIGNED_ROUTES)


def test_voice_route_declares_the_covered_headers_and_the_audio_limits(
    document: dict[str, Any],
) -> None:
    operation = document["paths"]["/device/voice"]["post"]
    headers = headers_of(operation)
    assert headers[signing.PENDING_HEADER]["required"] is False
    assert headers[signing.NONCE_HEADER]["required"] is False
    described = operation["description"]
    assert all(f"`{kind}`" in described for kind in AUDIO_TYPES)
    assert f"{MAX_VOICE_BYTES} bytes" in described
    assert f"{MIN_VOICE_SECONDS:g} to {MAX_VOICE_SECONDS:g} seconds" in described
    assert set(operation["requestBody"]["content"]) == {*AUDIO_TYPES, "multipart/form-data"}


def test_the_described_duration_limits_are_the_decoders() -> None:
    assert (Limits().min_seconds, Limits().max_seconds) == (MIN_VOICE_SECONDS, MAX_VOICE_SECONDS)


def test_a_refusal_is_documented_with_its_reason_next_step_and_optional_detail(
    document: dict[str, Any],
) -> None:
    refusal = document["components"]["schemas"]["RefusalOut"]
    assert set(refusal["properties"]) == {"reason", "next_step", "detail"}
    assert set(refusal["required"]) == {"reason", "next_step"}


def test_the_voice_routes_grant_count_is_documented_with_the_bounds_it_is_refused_outside(
    document: dict[str, Any],
) -> None:
    (query,) = [
        p
        for p in document["paths"]["/device/voice"]["post"]["parameters"]
        if p["name"] == "grant_uses"
    ]
    assert query["in"] == "query" and query["schema"]["minimum"] == 1
    assert query["schema"]["maximum"] == grant_rules.MOST_USES
