"""schemathesis over the device API's own OpenAPI document: no generated request is a 5xx.

Every generated request is signed by a device paired for real, so the fuzzing reaches past the
signature check into the routes, the gate and the voice pipeline. The rate limits are raised so
that the budget does not turn the run into a string of 429s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from starlette.testclient import TestClient

from tests.device.kit import Executed, SigningDevice
from tests.security.kit import Deaf
from voicegate.clock import ManualClock
from voicegate.device.pairing import start_pairing
from voicegate.device.routes import AUDIO_TYPES, device_router
from voicegate.gate.core import ActionRequest, Gate
from voicegate.gate.types import DeviceKind, Risk
from voicegate.limits import RateLimits
from voicegate.secrets import KeyRing
from voicegate.services import Services, Settings
from voicegate.store.memory import MemoryStore
from voicegate.voice.pipeline import VoicePipeline

EXAMPLES = 100
CLOCK = ManualClock()
STORE = MemoryStore()
EXECUTED = Executed()
SERVICES = Services(
    store=STORE,
    gate=Gate(
        STORE,
        executor=EXECUTED,
        is_write=lambda tool: True,
        receipt_keys=KeyRing.generate(),
        clock=CLOCK,
    ),
    voice=VoicePipeline(Deaf(), None),
    clock=CLOCK,
    settings=Settings(rate_limits=RateLimits(10**6, 10**6, 10**6, 10**6)),
)
APP = FastAPI(title="voicegate device API")
APP.include_router(device_router(SERVICES))
# Recordings go on the wire as raw bytes, like any binary upload.
schemathesis.serializer.alias(list(AUDIO_TYPES), "application/octet-stream")
SCHEMA = schemathesis.openapi.from_dict(APP.openapi())


@pytest.fixture(scope="module")
def signed() -> Iterator[tuple[TestClient, SigningDevice]]:
    with TestClient(APP, base_url="http://testserver") as client:
        code = asyncio.run(start_pairing(STORE, "asha", DeviceKind.VOICE, clock=CLOCK))
        device = SigningDevice(client, CLOCK)  # type: ignore[arg-type]
        paired = client.post("/device/pair", json={"code": code, "public_key": device.public_jwk()})
        assert paired.status_code == 200, paired.text
        device.id = paired.json()["device_id"]
        asyncio.run(
            SERVICES.gate.propose(
                "asha", [ActionRequest("write_note", {"name": "n", "text": "t"})], risk=Risk.HIGH
            )
        )
        yield client, device


@SCHEMA.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_generated_device_request_is_a_server_error(
    case: Any, signed: tuple[TestClient, SigningDevice]
) -> None:
    client, device = signed
    kwargs = case.as_transport_kwargs(base_url="http://testserver")
    kwargs.pop("cookies", None)
    prepared = requests.Request(**kwargs).prepare()
    raw: Any = prepared.body or b""
    body: bytes = raw if isinstance(raw, bytes) else str(raw).encode()
    headers = {
        k: v if isinstance(v, str) else v.decode("latin-1") for k, v in prepared.headers.items()
    }
    if not prepared.path_url.startswith("/device/pair"):
        headers.update(device.headers(prepared.method or "GET", prepared.path_url, body))
    response = client.request(
        prepared.method or "GET", prepared.url or "", content=body, headers=headers
    )
    case.validate_response(response, checks=[not_a_server_error])
    assert response.status_code < 500, (response.status_code, response.text[:300])
    assert EXECUTED.calls == []
