"""The device API for passkeys: register one, list and remove them, and answer a passkey step.

    GET    /device/passkeys                this user's passkeys, and whom they are made for
    POST   /device/passkeys/options        the options of a new passkey (a fresh challenge)
    POST   /device/passkeys                {"name", "credential"}: register the new passkey
    DELETE /device/passkeys/{passkey_id}   forget one
    POST   /device/passkey                 {"pending_id", "nonce", "credential" | "failure"}

Every route is signed by the paired device's key, like every answer: an approval by passkey
proves both the device and the user's passkey. The challenge of a passkey step is never sent by
the page: the gate recomputes it from the set as stored (``gate.checks.passkey_challenge``), so
the assertion must have been made over this set, this stage's nonce and this exact action. A
step the browser could not take (no WebAuthn, a closed prompt, a page at another address than
the passkeys' RP id) is sent as ``failure`` and refused by name; nothing runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from voicegate import limits
from voicegate.device.auth import signed_json_router
from voicegate.device.models import AnswerOut, _In
from voicegate.device.openapi import SIGNED
from voicegate.device.pairing import device_name
from voicegate.device.routes import answer_response, new_evidence, not_anothers
from voicegate.domain import Decision, Device, InputKind, Modality, Passkey, PasskeyAssertion
from voicegate.errors import Refused
from voicegate.passkey import (
    ALGORITHMS,
    TIMEOUT_MS,
    b64url,
    check_registration,
    registration_challenge,
    unb64url,
    user_handle,
)
from voicegate.reasons import Kind, Reason
from voicegate.services import Services

__all__ = ["passkey_router"]

# At most this many passkeys per user: a phone, a laptop, a security key or two, with room.
MAX_PASSKEYS = 10
# What the page reports when the browser could not make an assertion, and the reason of each.
FAILURES: dict[str, Reason] = {
    "unsupported": Reason.PASSKEY_UNSUPPORTED,
    "cancelled": Reason.PASSKEY_CANCELLED,
    "wrong_rp": Reason.PASSKEY_WRONG_RP,
}


class PasskeyOut(BaseModel):
    """One passkey as its user sees it; ``id`` is its credential's id hash."""

    id: str
    name: str
    created_at: float
    last_used_at: float | None
    device_id: str
    sign_count: int

    @classmethod
    def of(cls, p: Passkey) -> PasskeyOut:
        return cls(
            id=p.id,
            name=p.name,
            created_at=p.created_at,
            last_used_at=p.last_used_at,
            device_id=p.device_id,
            sign_count=p.sign_count,
        )


class PasskeyList(BaseModel):
    """This user's passkeys, and the RP id and origin they are made for (null where this
    server cannot use passkeys: an address that is not a name)."""

    passkeys: list[PasskeyOut]
    rp_id: str | None
    origin: str | None


class RegisterIn(_In):
    """A new passkey: the browser's ``PublicKeyCredential`` as JSON, and a name for it."""

    name: str = Field(default="", max_length=60, examples=["Asha's phone"])
    credential: dict[str, Any]


class CredentialIn(_In):
    """A WebAuthn assertion as JSON (``PublicKeyCredential.toJSON()``), bytes as base64url."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(max_length=1400)
    rawId: str = Field(max_length=1400)
    type: Literal["public-key"]
    response: dict[str, Any]


class PasskeyAnswerIn(_In):
    """The passkey step of a high-risk card: an assertion, or why the browser made none."""

    pending_id: str = Field(max_length=100)
    nonce: str = Field(max_length=200)
    input: Literal["touch", "key", "switch"] = "touch"
    shown: list[Annotated[int, Field(ge=1, le=5)]] = Field(default_factory=list, max_length=5)
    credential: CredentialIn | None = None
    failure: Literal["unsupported", "cancelled", "wrong_rp"] | None = None


class RemovedOut(BaseModel):
    """The passkey that was forgotten."""

    removed: str


def passkey_router(services: Services) -> APIRouter:
    """The ``/device/passkeys`` routes and the passkey answer, over ``services``."""
    clock = services.clock
    gate = services.gate
    router, signed = signed_json_router(services, "/device", "passkeys")

    def relying_party() -> Any:
        rp = gate.relying_party
        if rp is None:
            raise Refused(Reason.PASSKEY_WRONG_RP, "this server's address is not a name")
        return rp

    @router.get("/passkeys", response_model=PasskeyList, openapi_extra=SIGNED)
    async def listed(device: Device = signed) -> PasskeyList:
        """This user's passkeys, oldest first."""
        rp = gate.relying_party
        rows = await services.store.passkeys.list(device.user)
        return PasskeyList(
            passkeys=[PasskeyOut.of(p) for p in rows],
            rp_id=rp.id if rp else None,
            origin=rp.origins[0] if rp else None,
        )

    @router.post("/passkeys/options", openapi_extra=SIGNED)
    async def options(device: Device = signed) -> dict[str, Any]:
        """The ``PublicKeyCredentialCreationOptions`` of a new passkey, bytes as base64url:
        user verification required, a resident key preferred, no attestation."""
        rp = relying_party()
        held = await services.store.passkeys.list(device.user)
        return {
            "publicKey": {
                "rp": {"id": rp.id, "name": rp.name},
                "user": {
                    "id": b64url(user_handle(device.user)),
                    "name": device.user,
                    "displayName": device.user,
                },
                "challenge": b64url(registration_challenge(gate.receipt_keys, device.id, clock())),
                "pubKeyCredParams": [{"type": "public-key", "alg": alg} for alg in ALGORITHMS],
                "timeout": TIMEOUT_MS,
                "excludeCredentials": [
                    {"type": "public-key", "id": b64url(p.credential_id)} for p in held
                ],
                "authenticatorSelection": {
                    "residentKey": "preferred",
                    "requireResidentKey": False,
                    "userVerification": "required",
                },
                "attestation": "none",
            }
        }

    @router.post("/passkeys", response_model=PasskeyOut, status_code=201, openapi_extra=SIGNED)
    async def register(body: RegisterIn, device: Device = signed) -> PasskeyOut:
        """Register a new passkey of this user, made on this device's browser."""
        rp = relying_party()
        name = device_name(body.name)
        passkey, challenge = check_registration(
            body.credential,
            rp=rp,
            keys=gate.receipt_keys,
            device_id=device.id,
            user=device.user,
            now=clock(),
            name=name,
        )
        # A soft bound: two registrations racing at the limit may both land, one over it.
        if len(await services.store.passkeys.list(device.user)) >= MAX_PASSKEYS:
            raise Refused(Reason.PASSKEY_LIMIT, f"at most {MAX_PASSKEYS} passkeys")
        ledger_key = "passkey-register:" + b64url(challenge)
        if not await services.store.ledger.consume(ledger_key, expires_at=clock() + 3600.0):
            raise Refused(Reason.PASSKEY_REGISTRATION, "this challenge was used already")
        try:
            await services.store.passkeys.add(passkey)
        except ValueError:
            raise Refused(
                Reason.PASSKEY_REGISTRATION, "this passkey is registered already"
            ) from None
        return PasskeyOut.of(passkey)

    @router.delete("/passkeys/{passkey_id}", response_model=RemovedOut, openapi_extra=SIGNED)
    async def remove(passkey_id: str, device: Device = signed) -> RemovedOut:
        """Forget one of this user's passkeys."""
        if not await services.store.passkeys.remove(passkey_id, user=device.user):
            raise Refused(Reason.UNKNOWN_PASSKEY)
        return RemovedOut(removed=passkey_id)

    @router.post("/passkey", response_model=AnswerOut, openapi_extra=SIGNED)
    async def answer(body: PasskeyAnswerIn, device: Device = signed) -> JSONResponse:
        """Approve the passkey step of a high-risk card with the user's passkey."""
        await limits.take(
            services.store.budgets, services.config.rate_limits, device, "answer", now=clock()
        )
        await not_anothers(services, device, body.pending_id)
        if not await services.store.passkeys.list(device.user):
            raise Refused(Reason.NO_PASSKEY)
        if body.failure is not None:
            raise Refused(FAILURES[body.failure])
        if body.credential is None:
            raise Refused(Reason.BAD_REQUEST, "a passkey answer needs credential or failure")
        evidence = new_evidence(
            services,
            device,
            body.pending_id,
            body.nonce,
            Decision(Kind.CONFIRM),
            InputKind(body.input),
            modality=Modality.PASSKEY,
            shown_in_full=frozenset(body.shown),
            passkey=_assertion(body.credential),
        )
        return answer_response(services, evidence, await gate.answer(evidence), heard=[])

    return router


def _assertion(credential: CredentialIn) -> PasskeyAssertion:
    """The raw parts of an assertion; a part that is not base64url is a bad request."""
    parts = {
        "credential_id": unb64url(credential.rawId),
        "client_data": unb64url(credential.response.get("clientDataJSON")),
        "authenticator_data": unb64url(credential.response.get("authenticatorData")),
        "signature": unb64url(credential.response.get("signature")),
    }
    missing = [name for name, value in parts.items() if value is None]
    if missing:
        raise Refused(Reason.BAD_REQUEST, f"credential: {missing[0]} is not base64url")
    return PasskeyAssertion(**{k: v for k, v in parts.items() if v is not None})
