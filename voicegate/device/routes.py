"""The device API: pair, list waiting sets, answer by tap or voice, ask for more time, receipts.

Every route but ``/device/pair`` needs a signed request from a paired device (``auth``). A
refusal anywhere answers 4xx with ``{reason, next_step}``; an unreachable store answers 503
``ledger_unavailable``. Neither ever releases anything. An answer that reached the gate but
released nothing (not understood, wrong stage, ...) answers with the refusal's 4xx status and
the full ``AnswerOut``, so the page can show what was heard and what to say instead.
"""

from __future__ import annotations

import hmac
import re
import secrets
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from voicegate import limits
from voicegate.device.auth import device_dependency
from voicegate.device.edge import TIME_HEADER, limited_route, status_for
from voicegate.device.models import (
    AnswerOut,
    MoreTimeIn,
    PairIn,
    PairOut,
    PendingList,
    PendingOut,
    ReceiptOut,
    RefusalOut,
    TapIn,
)
from voicegate.device.pairing import complete_pairing
from voicegate.device.signing import (
    DEVICE_HEADER,
    NONCE_HEADER,
    PENDING_HEADER,
    SCHEME,
    TIMESTAMP_HEADER,
)
from voicegate.errors import DeviceRefused, Refused
from voicegate.gate.core import Outcome
from voicegate.gate.types import (
    Decision,
    Device,
    DeviceKind,
    Evidence,
    InputKind,
    Modality,
    PendingSet,
    Stage,
    Status,
)
from voicegate.reasons import Kind, Reason
from voicegate.services import Services
from voicegate.text import storable

_WORD = re.compile(r"[^\W\d_]+")
# One per container the decoder reads: ``voice.audio.CONTENT_TYPES``, kept equal by a test.
AUDIO_TYPES = ("audio/wav", "audio/flac", "audio/ogg", "audio/webm", "audio/mp4")
# ``voice.audio.Limits``' bounds on one recording, kept equal by a test (that module needs the
# audio stack, which the device API does not import).
MIN_VOICE_SECONDS = 0.1
MAX_VOICE_SECONDS = 15.0

_REFUSALS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": RefusalOut, "description": "Refused: a reason code and the next step"},
    503: {"model": RefusalOut, "description": "The store is unreachable; nothing ran"},
}


def _header(name: str, description: str, *, required: bool) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": required,
        "description": description,
        "schema": {"type": "string"},
    }


# Sent with the signature (``auth.SIGNATURE_SCHEME``, the security scheme, says how to sign).
_SIGNED_HEADERS = [
    _header(
        DEVICE_HEADER, f"The paired device's id; line 2 of the {SCHEME} string.", required=True
    ),
    _header(
        TIMESTAMP_HEADER,
        f"Whole Unix seconds on the server's clock; line 5 of the {SCHEME} string.",
        required=True,
    ),
]
_SIGNED: dict[str, Any] = {"parameters": _SIGNED_HEADERS}
# The voice route also reads these (or the form fields of the same name); they are
# covered by the signature, as is Content-Type, which picks the audio decoder.
_VOICE_HEADERS = [
    _header(
        PENDING_HEADER,
        f"The waiting set answered (else `pending_id`); line 8 of the {SCHEME} string.",
        required=False,
    ),
    _header(
        NONCE_HEADER,
        f"That set's nonce (else the `nonce` form field); line 9 of the {SCHEME} string.",
        required=False,
    ),
]
_VOICE_BODY: dict[str, Any] = {
    "parameters": _SIGNED_HEADERS + _VOICE_HEADERS,
    "requestBody": {
        "required": True,
        "description": "The recording as the raw body (its own Content-Type, which the "
        "signature covers), or multipart with an `audio` file part and optional `pending_id` "
        "and `nonce` fields.",
        "content": {
            **{t: {"schema": {"type": "string", "format": "binary"}} for t in AUDIO_TYPES},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "audio": {"type": "string", "format": "binary"},
                        "pending_id": {"type": "string"},
                        "nonce": {"type": "string"},
                    },
                    "required": ["audio"],
                }
            },
        },
    },
}

__all__ = ["device_router"]


def device_router(services: Services) -> APIRouter:
    """The ``/device/*`` routes over ``services``' store, gate and voice pipeline."""
    settings = services.settings
    clock = services.clock
    gate = services.gate
    events = services.events
    intake = limits.Intake(settings.max_voice_in_flight)
    events.queue_depth.set_function(lambda: intake.depth)

    def limit_for(path: str) -> int:
        return settings.max_voice_bytes if path.endswith("/voice") else settings.max_json_bytes

    router = APIRouter(
        prefix="/device",
        tags=["device"],
        route_class=limited_route(
            limit_for, clock, body_timeout=settings.body_timeout, events=events
        ),
        responses=_REFUSALS,
    )

    async def within_budget(device: Device, *spent: limits.What) -> None:
        for what in spent:
            await limits.take(
                services.store.budgets, settings.rate_limits, device, what, now=clock()
            )

    signed = Depends(device_dependency(services))

    @router.post("/pair", response_model=PairOut)
    async def pair(body: PairIn, request: Request) -> PairOut:
        """Pair this device with the operator's one-time code; the server keeps its public key."""
        device = await complete_pairing(
            services.store,
            body.code,
            body.public_key,
            source_address=request.client.host if request.client else "",
            keys=gate.receipt_keys,
            name=body.name,
            clock=clock,
        )
        return PairOut.of(device, clock())

    @router.get("/pending", response_model=PendingList, openapi_extra=_SIGNED)
    async def pending(device: Device = signed) -> PendingList:
        """This user's waiting sets, with card text, stage, deadline and the nonce."""
        now = clock()
        sets = await gate.open_for(device.user)
        return PendingList(
            sets=[PendingOut.of(p, now=now, max_extensions=gate.max_extensions) for p in sets],
            server_time=now,
        )

    @router.post("/tap", response_model=AnswerOut, openapi_extra=_SIGNED)
    async def tap(body: TapIn, device: Device = signed) -> JSONResponse:
        """Choose a card, confirm or cancel by touch, key or switch."""
        if body.decision == "choose" and body.card is None:
            raise Refused(Reason.BAD_REQUEST, "choose needs a card number")
        await within_budget(device, "answer")
        decision = Decision(Kind(body.decision), body.card)
        evidence = _evidence(
            services, device, body.pending_id, body.nonce, decision, InputKind(body.input)
        )
        return _answer(services, evidence, await gate.answer(evidence), heard=[])

    @router.post(
        "/voice",
        response_model=AnswerOut,
        openapi_extra=_VOICE_BODY,
        description=_voice_description(settings.max_voice_bytes),
    )
    async def voice(request: Request, device: Device = signed) -> JSONResponse:
        """Answer by voice: the server transcribes the recording and decides what it means."""
        if device.kind is not DeviceKind.VOICE:
            raise DeviceRefused(Reason.DEVICE_CANNOT_SPEAK)
        pipeline = services.voice
        if pipeline is None:
            raise Refused(Reason.LANGUAGE_UNAVAILABLE, "this server has no recogniser")
        await within_budget(device, "voice", "answer")
        audio, content_type, fields = await _read_audio(request, settings.max_voice_bytes)
        pending_id = _field(request, fields, "pending_id", PENDING_HEADER)
        nonce = _field(request, fields, "nonce", NONCE_HEADER, in_query=False)
        # Cheap checks before the recogniser spends a second of CPU on the recording.
        pending = await _open_set(services, device, pending_id, nonce)
        # A place is taken only now: the body is whole and signed by a paired device, so an
        # unsigned or stalled upload can never hold one.
        with intake.admit(), events.transcribing():
            result = await pipeline.decide(
                audio,
                user=device.user,
                cards=len(pending.actions),
                stage=pending.stage,
                content_type=content_type,
                card_words=_card_words(pending),
            )
        heard = [str(t) for t in result.transcripts]
        evidence = _evidence(
            services,
            device,
            pending_id,
            nonce,
            result.decision,
            InputKind.VOICE,
            transcript=heard[0] if heard else "",
            recogniser=result.recogniser,
            model=result.model,
            fingerprint_id=result.fingerprint_id,
        )
        return _answer(services, evidence, await gate.answer(evidence), heard=heard)

    @router.post("/more-time", response_model=PendingOut, openapi_extra=_SIGNED)
    async def more_time(body: MoreTimeIn, device: Device = signed) -> PendingOut:
        """More time to decide (WCAG 2.2.1): the set's clock restarts; it never shortens."""
        extended = await gate.extend(body.pending_id, user=device.user)
        return PendingOut.of(extended, now=clock(), max_extensions=gate.max_extensions)

    @router.get("/receipts", response_model=list[ReceiptOut], openapi_extra=_SIGNED)
    async def receipts(device: Device = signed) -> list[ReceiptOut]:
        """This user's receipts, newest first."""
        return [ReceiptOut.of(r) for r in reversed(await gate.receipts(device.user))]

    return router


def _voice_description(max_bytes: int) -> str:
    """The voice route's OpenAPI description, with the limits a recording must keep to."""
    types = ", ".join(f"`{t}`" for t in AUDIO_TYPES)
    return (
        "Answer by voice: the server transcribes the recording and decides what it means.\n\n"
        f"Accepted types: {types} (WAV, FLAC, OGG/Opus, WebM/Opus, MP4/AAC), as the raw body "
        "or as the `audio` part of a multipart body. At most "
        f"{max_bytes} bytes (a larger body answers 413) and "
        f"{MIN_VOICE_SECONDS:g} to {MAX_VOICE_SECONDS:g} seconds of sound; anything else, or a "
        "silent, clipped or undecodable recording, is refused with a reason code. Only a "
        "device paired as a voice device may speak. The answer says what was heard, the "
        "decision and, on refusal, what to say instead."
    )


def _evidence(
    services: Services,
    device: Device,
    pending_id: str,
    nonce: str,
    decision: Decision,
    input_kind: InputKind,
    **voice: Any,
) -> Evidence:
    return Evidence(
        id="ev_" + secrets.token_urlsafe(16),
        pending_id=pending_id,
        nonce=nonce,
        device_id=device.id,
        user=device.user,
        modality=Modality.VOICE if input_kind is InputKind.VOICE else Modality.TAP,
        input=input_kind,
        decision=decision,
        created_at=services.clock(),
        **voice,
    )


def _answer(
    services: Services, evidence: Evidence, outcome: Outcome, *, heard: list[str]
) -> JSONResponse:
    now = services.clock()
    _report(services, evidence, outcome)
    body = AnswerOut.of(outcome, now=now, heard=heard)
    # A write that ran but failed upstream was still released: that is news, not a refusal.
    status = 200 if outcome.released or outcome.reason is None else status_for(outcome.reason)
    response = JSONResponse(body.model_dump(mode="json"), status_code=status)
    response.headers[TIME_HEADER] = str(int(now))
    if outcome.reason is Reason.BUSY and not outcome.released:
        response.headers["Retry-After"] = str(limits.BUSY_RETRY_AFTER)
    return response


def _report(services: Services, evidence: Evidence, outcome: Outcome) -> None:
    """One decision, and its confirm event, to the app's metrics and log."""
    events = services.events
    events.decided(outcome.decision.kind.value, outcome.reason)
    fields = {
        "edge": "device",
        "pending_id": evidence.pending_id,
        "device_id": evidence.device_id,
        "user": evidence.user,
        "modality": evidence.modality.value,
        "kind": evidence.decision.kind.value,
        "stage": outcome.pending.stage.value,
        "status": outcome.pending.status.value,
    }
    if outcome.released or outcome.reason is None:
        events.accepted(
            **fields,
            released=outcome.released,
            card=outcome.pending.chosen,
            outcome=outcome.receipt.outcome if outcome.receipt else None,
            receipt_id=outcome.receipt.id if outcome.receipt else None,
        )
    else:
        events.refused(outcome.reason, **fields)


async def _open_set(services: Services, device: Device, pending_id: str, nonce: str) -> PendingSet:
    pending = await services.gate.status(pending_id)
    if pending.user != device.user:
        raise DeviceRefused(Reason.WRONG_DEVICE_USER)
    if pending.status is Status.EXPIRED:
        raise Refused(Reason.SET_EXPIRED)
    if pending.status is not Status.WAITING:
        raise Refused(Reason.NOT_OPEN)
    if not hmac.compare_digest(nonce.encode(), pending.nonce.encode()):
        raise Refused(Reason.WRONG_SET)
    return pending


async def _read_audio(request: Request, limit: int) -> tuple[bytes, str | None, dict[str, str]]:
    """The recording, its declared type and any plain form fields, from a raw or multipart body."""
    content_type = request.headers.get("content-type", "")
    if not content_type.startswith("multipart/form-data"):
        return await request.body(), content_type or None, {}
    form = await request.form(max_files=1, max_fields=8, max_part_size=limit)
    fields: dict[str, str] = {}
    audio: UploadFile | None = None
    for key, value in form.multi_items():
        if isinstance(value, str):
            fields[key] = value
        elif key == "audio":
            audio = value
    if audio is None:
        raise Refused(Reason.BAD_REQUEST, "multipart voice needs an `audio` file part")
    data = await audio.read()
    await form.close()
    return data, audio.content_type, fields


def _card_words(pending: PendingSet) -> tuple[str, ...]:
    """On the final card, the words of the chosen action may be said back ("yes, unlock it")."""
    if pending.stage is not Stage.FINAL or pending.chosen is None:
        return ()
    return tuple(
        dict.fromkeys(_WORD.findall(pending.actions[pending.chosen - 1].card_text.lower()))
    )


def _field(
    request: Request, fields: dict[str, str], name: str, header: str, *, in_query: bool = True
) -> str:
    # The nonce never rides in a URL: URLs end up in access logs and proxy logs.
    query = request.query_params.get(name) if in_query else None
    value = fields.get(name) or request.headers.get(header) or query
    if not value or not storable(value):
        raise Refused(Reason.BAD_REQUEST, f"voice needs {name}")
    return value
