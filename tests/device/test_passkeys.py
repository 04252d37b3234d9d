"""Passkeys through the device API: register, list, remove, and the passkey step of a card.

Every answer here is a signed device request carrying a WebAuthn assertion made by a software
passkey (``tests.authenticator``), so each wrong assertion can be made exactly; Chromium's own
virtual authenticator drives the page in ``tests/browser/test_passkeys.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.authenticator import ORIGIN, RP_ID, SoftPasskey
from tests.device.kit import Executed, SigningDevice, paired_device
from voicegate.canonical import args_hash
from voicegate.clock import ManualClock
from voicegate.device.passkeys import passkey_router
from voicegate.device.routes import device_router
from voicegate.domain import HighRiskStep, Risk
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.passkey import RelyingParty, challenge, unb64url
from voicegate.reasons import PASSKEY_STEP, Reason
from voicegate.secrets import KeyRing
from voicegate.services import Services
from voicegate.store.base import Store

NOTES = [
    ActionRequest("write_note", {"name": "shopping", "text": "milk"}),
    ActionRequest("write_note", {"name": "door", "text": "unlock"}),
]


class Steps:
    """The operator's ``--high-risk-step``, changed by a test as a restart would change it."""

    def __init__(self) -> None:
        self.step = HighRiskStep.PASSKEY

    def __call__(self, tool: str) -> HighRiskStep:
        return self.step


@pytest.fixture
def steps() -> Steps:
    return Steps()


@pytest.fixture
def services(store: Store, clock: ManualClock, executed: Executed, steps: Steps) -> Services:
    gate = Gate(
        store,
        executor=executed,
        policy=GatePolicy(is_write=lambda tool: True, step_of=steps),
        receipt_keys=KeyRing.generate(),
        clock=clock,
        relying_party=RelyingParty(RP_ID, (ORIGIN,)),
    )
    return Services(store=store, gate=gate, clock=clock)


@pytest.fixture
async def client(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    app.include_router(device_router(services))
    app.include_router(passkey_router(services))
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


async def register(device: SigningDevice, soft: SoftPasskey, **made: Any) -> httpx.Response:
    options = (await device.post_json("/device/passkeys/options", {})).json()["publicKey"]
    given = unb64url(options["challenge"])
    assert given is not None
    credential = soft.register(given, **made)
    return await device.post_json("/device/passkeys", {"name": "phone", "credential": credential})


async def at_passkey_step(device: SigningDevice, services: Services, n: int = 1) -> dict[str, Any]:
    """A high-risk set of ``n`` cards, its first card chosen: the set at its passkey step."""
    proposed = await services.gate.propose("asha", NOTES[:n], risk=Risk.HIGH)
    (first,) = [s for s in await sets(device) if s["id"] == proposed.id]
    chose = await tap(device, first, decision="choose", card=1)
    assert chose.json()["stage"] == "passkey" and chose.json()["next_step"] == PASSKEY_STEP
    (step,) = [s for s in await sets(device) if s["id"] == proposed.id]
    return step


async def sets(device: SigningDevice) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = (await device.get("/device/pending")).json()["sets"]
    return listed


async def tap(device: SigningDevice, pending: dict[str, Any], **answer: Any) -> httpx.Response:
    body = {"pending_id": pending["id"], "nonce": pending["nonce"], **answer}
    return await device.post_json("/device/tap", body)


def asked(step: dict[str, Any]) -> bytes:
    given = unb64url(step["passkey"]["challenge"])
    assert given is not None
    return given


async def approve(device: SigningDevice, step: dict[str, Any], **body: Any) -> httpx.Response:
    answer = {"pending_id": step["id"], "nonce": step["nonce"], **body}
    return await device.post_json("/device/passkey", answer)


async def test_a_registered_passkey_is_listed_and_removed(device: SigningDevice) -> None:
    soft = SoftPasskey()
    made = await register(device, soft)
    assert made.status_code == 201, made.text
    listed = (await device.get("/device/passkeys")).json()
    assert listed["rp_id"] == RP_ID and listed["origin"] == ORIGIN
    (shown,) = listed["passkeys"]
    assert shown["id"] == made.json()["id"] and shown["name"] == "phone"
    assert (await device.delete(f"/device/passkeys/{shown['id']}")).status_code == 200
    gone = await device.delete(f"/device/passkeys/{shown['id']}")
    assert gone.status_code == 404 and gone.json()["reason"] == Reason.UNKNOWN_PASSKEY
    assert (await device.get("/device/passkeys")).json()["passkeys"] == []


async def test_a_passkey_releases_the_card_and_the_receipt_names_it_and_its_flags(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    soft = SoftPasskey()
    passkey_id = (await register(device, soft)).json()["id"]
    step = await at_passkey_step(device, services)
    assert executed.calls == []
    assert step["passkey"]["credentials"] == [soft.assertion(b"x")["rawId"]]
    done = await approve(device, step, credential=soft.assertion(asked(step)))
    assert done.status_code == 200 and done.json()["released"] is True, done.text
    assert executed.calls == [("write_note", {"name": "shopping", "text": "milk"})]
    (receipt,) = await services.gate.receipts("asha")
    assert receipt.passkey is not None and receipt.passkey.id == passkey_id
    assert receipt.passkey.user_verified and receipt.passkey.user_present
    assert receipt.passkey.origin == ORIGIN and receipt.modality == "passkey"
    passed = [c.name for c in receipt.checks if c.passed]
    assert "passkey_verified" in passed and len(passed) == len(receipt.checks)
    assert receipt.first_yes is not None and receipt.second_yes is None


async def test_both_asks_a_yes_then_the_passkey_and_the_receipt_keeps_all_three(
    device: SigningDevice, services: Services, executed: Executed, steps: Steps
) -> None:
    steps.step = HighRiskStep.BOTH
    soft = SoftPasskey()
    await register(device, soft)
    proposed = await services.gate.propose("asha", NOTES[:1], risk=Risk.HIGH)
    (first,) = await sets(device)
    assert (await tap(device, first, decision="choose", card=1)).json()["stage"] == "final"
    (final,) = await sets(device)
    early = await approve(device, final, credential=soft.assertion(b"\0" * 32))
    assert early.json()["reason"] == Reason.WRONG_STAGE and executed.calls == []
    assert (await tap(device, final, decision="confirm")).json()["stage"] == "passkey"
    (step,) = await sets(device)
    assert step["nonce"] not in (first["nonce"], final["nonce"])
    done = await approve(device, step, credential=soft.assertion(asked(step)))
    assert done.json()["released"] is True and len(executed.calls) == 1
    (receipt,) = await services.gate.receipts("asha")
    assert receipt.first_yes is not None and receipt.second_yes is not None
    assert receipt.passkey is not None and receipt.pending_id == proposed.id


async def test_a_tapped_yes_at_the_passkey_step_runs_nothing(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    await register(device, SoftPasskey())
    step = await at_passkey_step(device, services)
    refused = await tap(device, step, decision="confirm")
    assert refused.json()["reason"] == Reason.PASSKEY_REQUIRED and executed.calls == []
    assert (await sets(device))[0]["stage"] == "passkey"


async def test_an_assertion_for_one_card_cannot_approve_another(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    soft = SoftPasskey()
    await register(device, soft)
    one = await at_passkey_step(device, services)
    other = await at_passkey_step(device, services)
    made = soft.assertion(asked(one))
    replayed = await approve(device, other, credential=made)
    assert replayed.status_code == 403 and replayed.json()["reason"] == Reason.PASSKEY_MISMATCH
    assert executed.calls == []


async def test_an_assertion_made_for_changed_arguments_approves_nothing(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    soft = SoftPasskey()
    await register(device, soft)
    step = await at_passkey_step(device, services)
    changed = args_hash({"tool": "write_note", "arguments": {"name": "shopping", "text": "gin"}})
    made = soft.assertion(challenge(step["id"], step["nonce"], changed))
    refused = await approve(device, step, credential=made)
    assert refused.json()["reason"] == Reason.PASSKEY_MISMATCH and executed.calls == []


async def test_an_action_edited_after_the_assertion_was_made_runs_nothing(
    device: SigningDevice, services: Services, executed: Executed, store: Store
) -> None:
    soft = SoftPasskey()
    await register(device, soft)
    step = await at_passkey_step(device, services)
    made = soft.assertion(asked(step))
    stored = await store.pending.get(step["id"])
    assert stored is not None
    edited = dataclasses.replace(stored.actions[0], arguments={"name": "shopping", "text": "gin"})
    assert await store.pending.swap(stored, stored.replace(actions=(edited,)))
    refused = await approve(device, step, credential=made)
    assert refused.json()["reason"] == Reason.ACTION_CHANGED and executed.calls == []


@pytest.mark.parametrize(
    ("made", "reason"),
    [
        ({"uv": False}, Reason.PASSKEY_NOT_VERIFIED),
        ({"origin": "http://localhost:9999"}, Reason.PASSKEY_WRONG_ORIGIN),
        ({"rp_id": "example.com"}, Reason.PASSKEY_WRONG_RP),
        ({"counter": 0}, Reason.PASSKEY_COUNTER),
    ],
)
async def test_a_wrong_assertion_is_refused_by_name_and_runs_nothing(
    device: SigningDevice,
    services: Services,
    executed: Executed,
    made: dict[str, Any],
    reason: Reason,
) -> None:
    soft = SoftPasskey()
    await register(device, soft)
    first = await at_passkey_step(device, services)
    assert (await approve(device, first, credential=soft.assertion(asked(first)))).json()[
        "released"
    ]
    step = await at_passkey_step(device, services)
    refused = await approve(device, step, credential=soft.assertion(asked(step), **made))
    assert refused.status_code == 403 and refused.json()["reason"] == reason
    assert len(executed.calls) == 1
    (still,) = await sets(device)
    assert still["id"] == step["id"] and still["stage"] == "passkey"


async def test_another_users_passkey_is_unknown(
    device: SigningDevice, services: Services, executed: Executed, client: httpx.AsyncClient
) -> None:
    clock = services.clock
    assert isinstance(clock, ManualClock)
    bob = await paired_device(client, services, clock, user="bob")
    bobs = SoftPasskey()
    await register(bob, bobs)
    await register(device, SoftPasskey())
    step = await at_passkey_step(device, services)
    refused = await approve(device, step, credential=bobs.assertion(asked(step)))
    assert refused.json()["reason"] == Reason.UNKNOWN_PASSKEY and executed.calls == []


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        ("unsupported", Reason.PASSKEY_UNSUPPORTED),
        ("cancelled", Reason.PASSKEY_CANCELLED),
        ("wrong_rp", Reason.PASSKEY_WRONG_RP),
    ],
)
async def test_a_step_the_browser_could_not_take_is_refused_by_name(
    device: SigningDevice, services: Services, executed: Executed, failure: str, reason: Reason
) -> None:
    await register(device, SoftPasskey())
    step = await at_passkey_step(device, services)
    refused = await approve(device, step, failure=failure)
    assert refused.json()["reason"] == reason and refused.json()["next_step"]
    assert executed.calls == [] and (await sets(device))[0]["stage"] == "passkey"


async def test_without_a_registered_passkey_the_step_says_so_and_waits(
    device: SigningDevice, services: Services, executed: Executed
) -> None:
    step = await at_passkey_step(device, services)
    assert step["passkey"]["credentials"] == []
    refused = await approve(device, step, credential=SoftPasskey().assertion(asked(step)))
    assert refused.json()["reason"] == Reason.NO_PASSKEY and executed.calls == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"credential": {"id": "x", "rawId": "x", "type": "public-key", "response": {}}},
        {"credential": {"id": "x", "rawId": "!!", "type": "public-key", "response": {}}},
        {"credential": {"type": "public-key"}},
        {
            "credential": {
                "id": "AA",
                "rawId": "AA",
                "type": "public-key",
                "response": {"clientDataJSON": "AA", "authenticatorData": "AA", "signature": "AA"},
            }
        },
        {"failure": "bored"},
    ],
)
async def test_bad_passkey_answers_are_clear_refusals_and_run_nothing(
    device: SigningDevice, services: Services, executed: Executed, body: dict[str, Any]
) -> None:
    await register(device, SoftPasskey())
    step = await at_passkey_step(device, services)
    refused = await approve(device, step, **body)
    assert 400 <= refused.status_code < 500 and refused.json()["reason"], refused.text
    assert executed.calls == [] and (await sets(device))[0]["stage"] == "passkey"


async def test_a_registration_is_checked_and_a_bad_one_adds_nothing(
    device: SigningDevice, store: Store
) -> None:
    assert (await register(device, SoftPasskey(), uv=False)).json()[
        "reason"
    ] == Reason.PASSKEY_NOT_VERIFIED
    other = await register(device, SoftPasskey(), origin="http://evil.example")
    assert other.json()["reason"] == Reason.PASSKEY_WRONG_ORIGIN
    made = SoftPasskey().register(b"\0" * 40)
    forged = await device.post_json("/device/passkeys", {"credential": made})
    assert forged.json()["reason"] == Reason.PASSKEY_REGISTRATION
    garbage = await device.post_json("/device/passkeys", {"credential": {"response": []}})
    assert garbage.status_code == 422 and garbage.json()["reason"] == Reason.PASSKEY_REGISTRATION
    assert await store.passkeys.list("asha") == []


async def test_a_registration_challenge_and_a_credential_are_used_once(
    device: SigningDevice, store: Store
) -> None:
    soft = SoftPasskey()
    options = (await device.post_json("/device/passkeys/options", {})).json()["publicKey"]
    given = unb64url(options["challenge"])
    assert given is not None and options["authenticatorSelection"]["userVerification"] == "required"
    credential = soft.register(given)
    assert (await device.post_json("/device/passkeys", {"credential": credential})).is_success
    again = await device.post_json("/device/passkeys", {"credential": credential})
    assert again.json()["reason"] == Reason.PASSKEY_REGISTRATION
    twice = await register(device, soft)
    assert twice.json()["reason"] == Reason.PASSKEY_REGISTRATION
    assert len(await store.passkeys.list("asha")) == 1
