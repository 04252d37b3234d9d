"""The device API: pair, list waiting sets, answer by tap or voice, ask for more time, receipts.

Every route but ``/device/pair`` needs a signed request from a paired device (``auth``). A
refusal anywhere answers 4xx with ``{reason, next_step}``; an unreachable store answers 503
``ledger_unavailable``. Neither ever releases anything. An answer that reached the gate but
released nothing (not understood, wrong stage, ...) answers with the refusal's 4xx status and
the full ``AnswerOut``, so the page can show what was heard and what to say instead.
"""

from __future__ import annotations

import hmac
import math
import re
import secrets
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from voicegate import limits
from voicegate.device.auth import device_dependency
from voicegate.device.edge import TIME_HEADER, limited_route, refusal, status_for
from voicegate.device.intake import BUSY_RETRY_AFTER, Intake
from voicegate.device.models import (
    AllOut,
    AnswerOut,
    ApproveAllIn,
    GrantOfferOut,
    MoreTimeIn,
    PairIn,
    PairOut,
    PasskeyAskOut,
    PendingList,
    PendingOut,
    ReceiptOut,
    SetStatusOut,
    TapIn,
)
from voicegate.device.openapi import REFUSALS, SIGNED, VOICE_BODY, voice_description
from voicegate.device.pairing import complete_pairing
from voicegate.device.signing import NONCE_HEADER, PENDING_HEADER
from voicegate.domain import (
    Decision,
    Device,
    DeviceKind,
    Evidence,
    GrantAsk,
    InputKind,
    Modality,
    Passkey,
    PendingSet,
    Stage,
    Status,
)
from voicegate.errors import DeviceRefused, Refused
from voicegate.gate import grant_rules
from voicegate.gate.checks import passkey_challenge
from voicegate.gate.core import MAX_CARDS, Outcome
from voicegate.passkey import TIMEOUT_MS, b64url
from voicegate.reasons import YES_BY_TAP, Kind, Reason
from voicegate.services import Services
from voicegate.text import storable

_WORD = re.compile(r"[^\W\d_]+")
_CARD_NUMBERS = frozenset(str(n) for n in range(1, MAX_CARDS + 1))
# The refusals of an answer the recogniser heard but was not sure enough of.
_UNSURE = frozenset({Reason.UNCLEAR, Reason.NOT_UNDERSTOOD})

__all__ = ["answer_response", "device_router", "new_evidence", "not_anothers"]


def device_router(services: Services) -> APIRouter:
    """The ``/device/*`` routes over ``services``' store, gate and voice pipeline."""
    config = services.config
    clock = services.clock
    gate = services.gate
    events = services.events
    intake = Intake(config.max_voice_in_flight)
    events.queue_depth.set_function(lambda: intake.depth)

    def limit_for(path: str) -> int:
        return config.max_voice_bytes if path.endswith("/voice") else config.max_json_bytes

    router = APIRouter(
        prefix="/device",
        tags=["device"],
        route_class=limited_route(
            limit_for, clock, body_timeout=config.body_timeout, events=events
        ),
        responses=REFUSALS,
    )

    async def within_budget(device: Device, *spent: limits.What) -> None:
        for what in spent:
            await limits.take(services.store.budgets, config.rate_limits, device, what, now=clock())

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
            limits=config.pairing_limits,
        )
        return PairOut.of(device, clock())

    @router.get("/pending", response_model=PendingList, openapi_extra=SIGNED)
    async def pending(device: Device = signed) -> PendingList:
        """This user's waiting sets, with card text, stage, deadline and the nonce."""
        now = clock()
        sets = await gate.open_for(device.user)
        held: list[Passkey] | None = None
        out = []
        for p in sets:
            ask = None
            if p.stage is Stage.PASSKEY and p.chosen is not None:
                if held is None:
                    held = await services.store.passkeys.list(device.user)
                ask = _passkey_ask(services, p, held)
            out.append(
                PendingOut.of(
                    p,
                    now=now,
                    max_extensions=gate.timing.max_extensions,
                    passkey=ask,
                    grant=_grant_offer(services, p),
                )
            )
        pipeline = services.voice
        return PendingList(
            sets=out,
            server_time=now,
            voice=pipeline is not None,
            yes_by_voice=pipeline is not None
            and math.isfinite(pipeline.calibration.need(Stage.CHOOSE, 1)),
        )

    @router.get("/sets/{pending_id}", response_model=SetStatusOut, openapi_extra=SIGNED)
    async def set_status(pending_id: str, device: Device = signed) -> SetStatusOut:
        """Where one of this user's sets stands now (a set that left the waiting list: did its
        time run out, was it withdrawn, or answered elsewhere?); never its nonce."""
        if len(pending_id) > 100 or not storable(pending_id):
            raise Refused(Reason.BAD_REQUEST, "a pending id is at most 100 characters")
        await not_anothers(services, device, pending_id)
        return SetStatusOut.of(await gate.status(pending_id), now=clock())

    @router.post("/tap", response_model=AnswerOut, openapi_extra=SIGNED)
    async def tap(body: TapIn, device: Device = signed) -> JSONResponse:
        """Choose a card, confirm or cancel by touch, key or switch."""
        if body.decision == "choose" and body.card is None:
            raise Refused(Reason.BAD_REQUEST, "choose needs a card number")
        if body.decision == "cancel" and body.grant is not None:
            raise Refused(Reason.BAD_REQUEST, "a grant goes with a yes, never with cancel")
        await within_budget(device, "answer")
        await not_anothers(services, device, body.pending_id)
        decision = Decision(Kind(body.decision), body.card)
        evidence = new_evidence(
            services,
            device,
            body.pending_id,
            body.nonce,
            decision,
            InputKind(body.input),
            shown_in_full=frozenset(body.shown),
            grant=GrantAsk(body.grant.minutes, body.grant.uses) if body.grant else None,
        )
        return answer_response(services, evidence, await gate.answer(evidence), heard=[])

    @router.post("/approve-all", response_model=AllOut, openapi_extra=SIGNED)
    async def approve_all(body: ApproveAllIn, device: Device = signed) -> AllOut:
        """Approve each of several waiting one-card sets this device showed, with one signed
        answer: each is released once, with its own receipt. Refused whole, before any runs,
        where a set is several cards or high-risk."""
        for item in body.sets:
            await not_anothers(services, device, item.pending_id)
        # Each set approved is an answer, and spends one from the answer budgets.
        spent: list[limits.What] = ["answer"] * len(body.sets)
        await within_budget(device, *spent)
        evidences = [
            new_evidence(
                services,
                device,
                item.pending_id,
                item.nonce,
                Decision(Kind.CHOOSE, 1),
                InputKind(body.input),
                shown_in_full=frozenset(item.shown),
            )
            for item in body.sets
        ]
        outcomes = await gate.answer_all(evidences)
        now = clock()
        for evidence, outcome in zip(evidences, outcomes, strict=True):
            _report(services, evidence, outcome)
        return AllOut(answers=[AnswerOut.of(o, now=now, heard=[]) for o in outcomes])

    @router.post(
        "/voice",
        response_model=AnswerOut,
        openapi_extra=VOICE_BODY,
        description=voice_description(config.max_voice_bytes),
    )
    async def voice(request: Request, device: Device = signed) -> JSONResponse:
        """Answer by voice: the server transcribes the recording and decides what it means."""
        if device.kind is not DeviceKind.VOICE:
            raise DeviceRefused(Reason.DEVICE_CANNOT_SPEAK)
        pipeline = services.voice
        if pipeline is None:
            raise Refused(Reason.LANGUAGE_UNAVAILABLE, "this server has no recogniser")
        await within_budget(device, "voice", "answer")
        audio, content_type, fields = await _read_audio(request, config.max_voice_bytes)
        pending_id = _field(request, fields, "pending_id", PENDING_HEADER)
        nonce = _field(request, fields, "nonce", NONCE_HEADER, in_query=False)
        shown = _shown(fields.get("shown") or request.query_params.get("shown", ""))
        uses = _uses(fields.get("grant_uses") or request.query_params.get("grant_uses", ""))
        # Cheap checks before the recogniser spends a second of CPU on the recording.
        pending = await _open_set(services, device, pending_id, nonce)
        # A place is taken only now: the body is whole and signed by a paired device, so an
        # unsigned or stalled upload can never hold one.
        with intake.admit(), events.transcribing():
            result = await pipeline.decide(
                audio,
                user=device.user,
                cards=len(pending.actions),
                stage=_heard_as(pending.stage),
                content_type=content_type,
                card_words=_card_words(pending),
            )
        heard = [str(t) for t in result.transcripts]
        evidence = new_evidence(
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
            shown_in_full=shown,
            grant=_spoken_grant(services, result.grant_minutes, uses),
        )
        # A yes-or-no question the recogniser is never sure enough of on this server (its
        # calibration's yes threshold is infinite): saying it again will not help.
        tap_only = not math.isfinite(
            pipeline.calibration.need(_heard_as(pending.stage), len(pending.actions))
        )
        outcome = await gate.answer(evidence)
        step = YES_BY_TAP if tap_only and outcome.reason in _UNSURE else None
        return answer_response(services, evidence, outcome, heard=heard, next_step=step)

    @router.post("/more-time", response_model=PendingOut, openapi_extra=SIGNED)
    async def more_time(body: MoreTimeIn, device: Device = signed) -> PendingOut:
        """More time to decide (WCAG 2.2.1): the stage's TTL is added to the deadline."""
        await not_anothers(services, device, body.pending_id)
        extended = await gate.extend(body.pending_id, user=device.user)
        return PendingOut.of(extended, now=clock(), max_extensions=gate.timing.max_extensions)

    @router.get("/receipts", response_model=list[ReceiptOut], openapi_extra=SIGNED)
    async def receipts(device: Device = signed) -> list[ReceiptOut]:
        """This user's receipts, newest first."""
        return [ReceiptOut.of(r) for r in reversed(await gate.receipts(device.user))]

    return router


def new_evidence(
    services: Services,
    device: Device,
    pending_id: str,
    nonce: str,
    decision: Decision,
    input_kind: InputKind,
    *,
    modality: Modality | None = None,
    **voice: Any,
) -> Evidence:
    """The evidence of one answer from ``device``: a tap, a recording or a passkey."""
    if modality is None:
        modality = Modality.VOICE if input_kind is InputKind.VOICE else Modality.TAP
    return Evidence(
        id="ev_" + secrets.token_urlsafe(16),
        pending_id=pending_id,
        nonce=nonce,
        device_id=device.id,
        user=device.user,
        modality=modality,
        input=input_kind,
        decision=decision,
        created_at=services.clock(),
        **voice,
    )


def answer_response(
    services: Services,
    evidence: Evidence,
    outcome: Outcome,
    *,
    heard: list[str],
    next_step: str | None = None,
) -> JSONResponse:
    """The device's answer to ``outcome``: the full ``AnswerOut``, in the refusal's status."""
    now = services.clock()
    _report(services, evidence, outcome)
    if outcome.reason in (Reason.WRONG_DEVICE_USER, Reason.UNKNOWN_PENDING):
        # Another user's set, or none: the refusal says so and nothing more (no status, stage,
        # deadline or cards, which an unknown set does not have).
        return refusal(outcome.reason, now=now)
    body = AnswerOut.of(outcome, now=now, heard=heard)
    if next_step is not None:
        body.next_step = next_step
    # A write that ran but failed upstream was still released: that is news, not a refusal.
    status = 200 if outcome.released or outcome.reason is None else status_for(outcome.reason)
    response = JSONResponse(body.model_dump(mode="json"), status_code=status)
    response.headers[TIME_HEADER] = str(int(now))
    if outcome.reason is Reason.BUSY and not outcome.released:
        response.headers["Retry-After"] = str(BUSY_RETRY_AFTER)
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


async def not_anothers(services: Services, device: Device, pending_id: str) -> None:
    """``WRONG_DEVICE_USER`` for another user's set, before any other check can answer with the
    set's status, stage or deadline (a wrong nonce would otherwise say ``wrong_set`` and more)."""
    pending = await services.store.pending.get(pending_id)
    if pending is not None and pending.user != device.user:
        raise DeviceRefused(Reason.WRONG_DEVICE_USER)


async def _open_set(services: Services, device: Device, pending_id: str, nonce: str) -> PendingSet:
    pending = await services.gate.status(pending_id)
    if pending.user != device.user:
        raise DeviceRefused(Reason.WRONG_DEVICE_USER)
    if pending.status is Status.EXPIRED:
        raise Refused(Reason.SET_EXPIRED)
    if pending.status is Status.WITHDRAWN:
        raise Refused(Reason.WITHDRAWN)
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


def _shown(text: str) -> frozenset[int]:
    """The ``shown`` field or query (``"1,3"``): the cards whose full text the device showed.

    It is signed like the rest of the request (the query is in the signed path, a form field in
    the signed body). Anything but card numbers 1 to 5 is a bad request, never ignored.
    """
    if not text:
        return frozenset()
    parts = text.split(",")
    if len(parts) > MAX_CARDS or not all(p in _CARD_NUMBERS for p in parts):
        raise Refused(Reason.BAD_REQUEST, "shown is a list of card numbers such as 1,3")
    return frozenset(int(p) for p in parts)


def _uses(text: str) -> int | None:
    """The ``grant_uses`` field or query: how many times a spoken grant allows the same (the
    count the page shows on the card), signed like ``shown``; absent, None."""
    if not text:
        return None
    # The length first: int() refuses text of more than 4300 digits with a ValueError.
    short = len(text) <= len(str(grant_rules.MOST_USES))
    if not (
        short and text.isascii() and text.isdigit() and 1 <= int(text) <= grant_rules.MOST_USES
    ):
        raise Refused(
            Reason.BAD_REQUEST, f"grant_uses is a whole number 1 to {grant_rules.MOST_USES}"
        )
    return int(text)


def _spoken_grant(services: Services, minutes: int | None, uses: int | None) -> GrantAsk | None:
    """The grant a released spoken yes asked for ("yes, for ten minutes"), or None. The minutes
    are the ones said, never moved into the operator's bound: past it the gate refuses the
    whole answer (``GRANT_BEYOND_LIMIT``) and the user says or taps a shorter one."""
    if minutes is None:
        return None
    return GrantAsk(
        minutes, uses if uses is not None else services.gate.policy.grants.spoken_uses()
    )


def _passkey_ask(services: Services, pending: PendingSet, held: list[Passkey]) -> PasskeyAskOut:
    """What the browser asks the authenticator at ``pending``'s passkey step."""
    assert pending.chosen is not None
    rp = services.gate.relying_party
    challenge = passkey_challenge(pending, pending.actions[pending.chosen - 1])
    return PasskeyAskOut(
        challenge=b64url(challenge),
        rp_id=rp.id if rp else None,
        origin=rp.origins[0] if rp else None,
        credentials=[b64url(p.credential_id) for p in held],
        timeout_ms=TIMEOUT_MS,
    )


def _grant_offer(services: Services, pending: PendingSet) -> GrantOfferOut | None:
    """What a yes to ``pending`` may also allow again, where it may."""
    gate = services.gate
    offered = gate.grant_offer(pending)
    if offered is None:
        return None
    fixed, varying = offered
    return GrantOfferOut(
        fixed=list(fixed),
        varying=list(varying),
        max_minutes=gate.policy.grants.max_minutes,
        max_uses=gate.policy.grants.max_uses,
    )


def _heard_as(stage: Stage) -> Stage:
    """The stage the recogniser hears an answer at: the passkey step is a yes-or-no question
    about the chosen card, as the final one is (its yes still needs the passkey)."""
    return Stage.FINAL if stage is Stage.PASSKEY else stage


def _card_words(pending: PendingSet) -> tuple[str, ...]:
    """On the final card, the words of the chosen action may be said back ("yes, unlock it")."""
    if pending.stage is Stage.CHOOSE or pending.chosen is None:
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
    if not value and not in_query and name in request.query_params:
        raise Refused(
            Reason.BAD_REQUEST, f"{name} goes in a form field or the {header} header, not the URL"
        )
    if not value or not storable(value):
        raise Refused(Reason.BAD_REQUEST, f"voice needs {name}")
    return value
