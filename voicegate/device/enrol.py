"""The device API for personal answers: teach a take, list, delete, and the "hard" flag.

    POST   /device/enrol/voice?meaning=choose:2&label=two   the recording as the raw body
    GET    /device/enrol                                   this user's templates and the flag
    DELETE /device/enrol/{template_id}                     forget one
    DELETE /device/enrol                                   forget all, and the flag
    POST   /device/enrol/hard                              {"hard": true}

Every route is signed like every answer (``voicegate.device.signing``; the meaning and label
ride in the signed query). A take is decoded and checked like a voice answer, goes through the
replay guard (so a replay of it, later, is refused as ``audio_reused``, and a replay of an
earlier answer cannot be taught), and is kept as features only (``voicegate.voice.templates``).
A new take that merely sounds like a template is no replay: the guard compares waveforms
sample for sample, the templates compare encoder-frame sequences by DTW, and their thresholds are
apart.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict

from voicegate import limits
from voicegate.device.auth import device_dependency
from voicegate.device.edge import limited_route
from voicegate.device.openapi import AUDIO_TYPES, SIGNED, SIGNED_HEADERS
from voicegate.domain import Device, DeviceKind, StoredTemplate
from voicegate.errors import DeviceRefused, Refused
from voicegate.reasons import Reason
from voicegate.services import Services

__all__ = ["enrol_router"]

# The take is the raw body, in its own (signed) Content-Type, as a voice answer can be.
_TAKE: dict[str, Any] = {
    "parameters": SIGNED_HEADERS,
    "requestBody": {
        "required": True,
        "description": "One take of the answer, as the raw body.",
        "content": {t: {"schema": {"type": "string", "format": "binary"}} for t in AUDIO_TYPES},
    },
}


class TemplateOut(BaseModel):
    """One taught take: what it means, what the user calls it, when, from which device, and
    whether it counts: made by the recogniser the server hears with now (a take taught under
    another model is never matched until taught again; null where the server hears no voice)."""

    id: str
    meaning: str
    label: str
    created_at: float
    device_id: str
    current: bool | None
    # Only in the answer to a take just taught: what the recogniser heard in it, and the answer
    # that reads as (a stored meaning name), when it reads as one; None otherwise. A take that
    # sounds like another answer than it was taught as is still kept: the page says so, and the
    # user keeps it (it may be how they say it) or records it again.
    heard: str | None = None
    heard_as: str | None = None

    @classmethod
    def of(cls, t: StoredTemplate, model: str | None) -> TemplateOut:
        return cls(
            id=t.id,
            meaning=t.meaning,
            label=t.label,
            created_at=t.created_at,
            device_id=t.device_id,
            current=None if model is None else _usable(t.data, model),
        )


def _usable(data: bytes, model: str) -> bool:
    """True when the server's recogniser ``model`` would match these stored features."""
    from voicegate.voice import templates  # the voice stack loads only where voice is used

    try:
        templates.decode(data, model)
    except ValueError:
        return False
    return True


class EnrolmentOut(BaseModel):
    """This user's taught answers, the flag, and the answers one may teach."""

    templates: list[TemplateOut]
    hard: bool
    meanings: list[str]
    takes_per_answer: int = 3


class HardIn(BaseModel):
    """The user says whether their speech is hard for recognisers."""

    model_config = ConfigDict(extra="forbid")
    hard: bool


class DeletedOut(BaseModel):
    """How many templates were forgotten."""

    deleted: int


def enrol_router(services: Services) -> APIRouter:
    """The ``/device/enrol`` routes over ``services``' store and replay guard."""
    config = services.config
    clock = services.clock

    def limit_for(path: str) -> int:
        return config.max_voice_bytes if path.endswith("/voice") else config.max_json_bytes

    router = APIRouter(
        prefix="/device/enrol",
        tags=["enrolment"],
        route_class=limited_route(
            limit_for, clock, body_timeout=config.body_timeout, events=services.events
        ),
    )
    signed = Depends(device_dependency(services))

    async def listed(user: str) -> EnrolmentOut:
        from voicegate.voice.enrolment import MEANINGS

        store = services.store.templates
        rows = await store.list(user)
        model = services.voice.transcriber.model if services.voice is not None else None
        return EnrolmentOut(
            templates=[TemplateOut.of(t, model) for t in rows],
            hard=await store.hard(user),
            meanings=list(MEANINGS),
        )

    @router.post("/voice", response_model=TemplateOut, openapi_extra=_TAKE)
    async def teach(
        request: Request, meaning: str, label: str = "", device: Device = signed
    ) -> TemplateOut:
        """Teach one take of an answer; the server keeps its features, never the audio."""
        # The audio stack loads only where voice is used, as for the answer route.
        from voicegate.voice import audio, enrolment

        if device.kind is not DeviceKind.VOICE:
            raise DeviceRefused(Reason.DEVICE_CANNOT_SPEAK)
        pipeline = services.voice
        if pipeline is None:
            raise Refused(Reason.LANGUAGE_UNAVAILABLE, "this server has no voice pipeline")
        try:
            enrolment.meaning_of(meaning)
            enrolment.label_of(label)
        except ValueError as exc:
            raise Refused(Reason.BAD_REQUEST, str(exc)) from exc
        await limits.take(services.store.budgets, config.rate_limits, device, "voice", now=clock())
        # A soft bound: two takes racing at the limit may both land, one over it.
        if len(await services.store.templates.list(device.user)) >= enrolment.MAX_TEMPLATES:
            raise Refused(Reason.TEMPLATE_LIMIT)
        body = await request.body()
        clip = await asyncio.to_thread(audio.decode, body, request.headers.get("content-type"))
        taken = await pipeline.take(clip)
        features = taken.features
        if not len(features):
            raise Refused(Reason.TOO_SHORT, "no speech to learn from")
        try:
            row = enrolment.stored(
                device.user,
                meaning,
                label,
                features,
                kind=pipeline.transcriber.model,
                now=clock(),
                device=device.id,
            )
        except ValueError as exc:
            raise Refused(Reason.BAD_REQUEST, str(exc)) from exc
        if pipeline.guard is not None:
            # Raises AUDIO_REUSED for a replay; otherwise this take joins the user's history.
            await pipeline.guard.check_and_remember(device.user, clip)
        await services.store.templates.add(row)
        out = TemplateOut.of(row, pipeline.transcriber.model)
        if taken.heard:
            out.heard, out.heard_as = taken.heard, enrolment.heard_as(taken.heard)
        return out

    @router.get("", response_model=EnrolmentOut, openapi_extra=SIGNED)
    async def list_templates(device: Device = signed) -> EnrolmentOut:
        """This user's taught answers and the "hard for recognisers" flag."""
        return await listed(device.user)

    @router.delete("/{template_id}", response_model=DeletedOut, openapi_extra=SIGNED)
    async def delete_one(template_id: str, device: Device = signed) -> DeletedOut:
        """Forget one taught take of this user."""
        if not await services.store.templates.delete(device.user, template_id):
            raise Refused(Reason.UNKNOWN_TEMPLATE)
        return DeletedOut(deleted=1)

    @router.delete("", response_model=DeletedOut, openapi_extra=SIGNED)
    async def delete_all(device: Device = signed) -> DeletedOut:
        """Forget every taught take of this user, and the flag."""
        return DeletedOut(deleted=await services.store.templates.delete(device.user))

    @router.post("/hard", response_model=EnrolmentOut, openapi_extra=SIGNED)
    async def set_hard(body: HardIn, device: Device = signed) -> EnrolmentOut:
        """Say whether this user's speech is hard for recognisers."""
        await services.store.templates.set_hard(device.user, body.hard)
        return await listed(device.user)

    return router
