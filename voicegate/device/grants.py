"""The device API for grants: list this user's live grants and end one now.

    GET    /device/grants              this user's live grants, and the operator's bounds
    DELETE /device/grants/{grant_id}   end one now ("End now")

A grant is made only with a signed yes (``POST /device/tap`` with ``grant``); these routes are
signed by the paired device's key like every answer, so nobody but the user's own devices can
see or end one. Any paired device of the user may end any of the user's grants.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from voicegate.device.auth import signed_json_router
from voicegate.device.models import GrantOut
from voicegate.device.openapi import SIGNED
from voicegate.domain import Device
from voicegate.errors import Refused
from voicegate.reasons import Reason
from voicegate.services import Services
from voicegate.text import storable

__all__ = ["grant_router"]


class GrantList(BaseModel):
    """This user's live grants, oldest first, and the longest and most a new one may allow."""

    grants: list[GrantOut]
    max_minutes: int
    max_uses: int


class EndedOut(BaseModel):
    """The grant that was ended."""

    ended: str


def grant_router(services: Services) -> APIRouter:
    """The ``/device/grants`` routes over ``services``."""
    clock = services.clock
    gate = services.gate
    router, signed = signed_json_router(services, "/device", "grants")

    @router.get("/grants", response_model=GrantList, openapi_extra=SIGNED)
    async def listed(device: Device = signed) -> GrantList:
        """This user's live grants: what each allows, until when, and how many times more."""
        now = clock()
        return GrantList(
            grants=[GrantOut.of(g, now=now) for g in await gate.grants(device.user)],
            max_minutes=gate.policy.grants.max_minutes,
            max_uses=gate.policy.grants.max_uses,
        )

    @router.delete("/grants/{grant_id}", response_model=EndedOut, openapi_extra=SIGNED)
    async def end(grant_id: str, device: Device = signed) -> EndedOut:
        """End one of this user's grants now; nothing more runs under it."""
        if len(grant_id) > 100 or not storable(grant_id):
            raise Refused(Reason.BAD_REQUEST, "a grant id is at most 100 characters")
        if not await gate.end_grant(grant_id, user=device.user):
            raise Refused(Reason.UNKNOWN_GRANT)
        return EndedOut(ended=grant_id)

    return router
