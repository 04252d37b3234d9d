"""schemathesis over the device API's OpenAPI document: no generated request is a 5xx.

Two runs: the device router alone, and the whole app ``build_app`` serves (its exception
handlers, body limits, events and the notes server upstream). Every generated request is signed
by a device paired for real, so the fuzzing reaches past the signature check into the routes, the
gate and the voice pipeline; the recogniser hears a clear "yes" in anything. The rate limits are
raised so that the budget does not turn the run into a string of 429s. Nothing may run upstream.
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
from tests.security.kit import Eager
from voicegate.clock import ManualClock
from voicegate.device.openapi import AUDIO_TYPES
from voicegate.device.pairing import start_pairing
from voicegate.device.routes import device_router
from voicegate.device.signing import NONCE_HEADER, PENDING_HEADER
from voicegate.domain import DeviceKind, PendingSet, Risk
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.limits import RateLimits
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.secrets import KeyRing
from voicegate.services import Services
from voicegate.settings import ServerConfig
from voicegate.store.memory import MemoryStore
from voicegate.voice.pipeline import VoicePipeline
from voicegate.web.app import Assembly, build_app

EXAMPLES = 100
UNLIMITED = RateLimits(10**6, 10**6, 10**6, 10**6)
CLOCK = ManualClock()
STORE = MemoryStore()
EXECUTED = Executed()
SERVICES = Services(
    store=STORE,
    gate=Gate(
        STORE,
        executor=EXECUTED,
        policy=GatePolicy(is_write=lambda tool: True),
        receipt_keys=KeyRing.generate(),
        clock=CLOCK,
    ),
    voice=VoicePipeline(Eager(), None),
    clock=CLOCK,
    config=ServerConfig(rate_limits=UNLIMITED),
)
APP = FastAPI(title="voicegate device API")
APP.include_router(device_router(SERVICES))
# Recordings go on the wire as raw bytes, like any binary upload.
schemathesis.serializer.alias(list(AUDIO_TYPES), "application/octet-stream")
SCHEMA = schemathesis.openapi.from_dict(APP.openapi())

REAL_STORE = MemoryStore()
REAL_APP = build_app(
    ServerConfig(keys=KeyRing.generate(), rate_limits=UNLIMITED),
    upstream=UpstreamSpec.in_process(build_notes_server()),
    policy=Policy(),
    store=REAL_STORE,
    voice=VoicePipeline(Eager(), None),
    clock=CLOCK,
)
REAL: Assembly = REAL_APP.state.voicegate
REAL_SCHEMA = schemathesis.openapi.from_dict(REAL_APP.openapi())


def pair(client: TestClient, services: Services, user: str) -> SigningDevice:
    """A voice device of ``user`` paired through ``client``, with a high-risk set waiting."""
    code = asyncio.run(
        start_pairing(
            services.store, user, DeviceKind.VOICE, keys=services.gate.receipt_keys, clock=CLOCK
        )
    )
    device = SigningDevice(client, CLOCK)  # type: ignore[arg-type]
    paired = client.post("/device/pair", json={"code": code, "public_key": device.public_jwk()})
    assert paired.status_code == 200, paired.text
    device.id = paired.json()["device_id"]
    return device


def send(
    case: Any, client: TestClient, device: SigningDevice, answering: PendingSet | None = None
) -> None:
    """Send one generated request, signed by ``device``; it must not be a server error.

    With ``answering``, a generated recording goes to that set (its id and nonce ride in
    headers the schema does not describe), so it reaches the decoder and the recogniser.
    """
    kwargs = case.as_transport_kwargs(base_url="http://testserver")
    kwargs.pop("cookies", None)
    prepared = requests.Request(**kwargs).prepare()
    raw: Any = prepared.body or b""
    body: bytes = raw if isinstance(raw, bytes) else str(raw).encode()
    headers = {
        k: v if isinstance(v, str) else v.decode("latin-1") for k, v in prepared.headers.items()
    }
    if answering is not None and prepared.path_url.startswith("/device/voice"):
        headers.update({PENDING_HEADER: answering.id, NONCE_HEADER: answering.nonce})
    if not prepared.path_url.startswith("/device/pair"):
        headers = device.headers(prepared.method or "GET", prepared.path_url, body, headers)
    response = client.request(
        prepared.method or "GET", prepared.url or "", content=body, headers=headers
    )
    case.validate_response(response, checks=[not_a_server_error])
    assert response.status_code < 500, (response.status_code, response.text[:300])


@pytest.fixture(scope="module")
def signed() -> Iterator[tuple[TestClient, SigningDevice]]:
    with TestClient(APP, base_url="http://testserver") as client:
        device = pair(client, SERVICES, "asha")
        asyncio.run(
            SERVICES.gate.propose(
                "asha", [ActionRequest("write_note", {"name": "n", "text": "t"})], risk=Risk.HIGH
            )
        )
        yield client, device


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[TestClient, SigningDevice, PendingSet]]:
    with TestClient(REAL_APP, base_url=REAL.config.base_url) as client:
        device = pair(client, REAL.services, REAL.config.user)
        propose = REAL.services.gate.propose
        request = ActionRequest("write_note", {"name": "n", "text": "t"})
        portal = client.portal
        assert portal is not None  # the client's portal is open inside its ``with``
        pending = portal.call(lambda: propose(REAL.config.user, [request], risk=Risk.LOW))
        yield client, device, pending
        receipts = portal.call(REAL.services.gate.receipts)
        assert receipts == [], "a generated request released a write"


FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.slow
@SCHEMA.parametrize()
@FUZZ
def test_no_generated_device_request_is_a_server_error(
    case: Any, signed: tuple[TestClient, SigningDevice]
) -> None:
    send(case, *signed)
    assert EXECUTED.calls == []


@pytest.mark.slow
@REAL_SCHEMA.parametrize()
@FUZZ
def test_no_generated_request_to_the_served_app_is_a_server_error(
    case: Any, served: tuple[TestClient, SigningDevice, PendingSet]
) -> None:
    send(case, *served)
