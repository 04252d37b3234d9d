"""The edge of the device API: body size and time limits, every refusal as `{reason, next_step}`
(and `detail` where the check said what in the request was wrong).

Routes built with ``limited_route(...)`` read the whole body through ``LimitedRequest`` before
anything else looks at it: an oversized upload is refused after at most ``limit`` bytes, and a
body that has not arrived within ``body_timeout`` seconds answers 408 ``too_slow``. Only then do
the signature check and the route run, so a client that sends headers and then trickles or
stops holds no recogniser place, no budget and no ledger key; one that hangs up mid-body is
dropped quietly (there is no one left to answer). Every ``Refused`` becomes a 4xx answer. A
store outage answers 503 ``ledger_unavailable``, and never a release. Each answer carries the
server's clock in ``X-Voicegate-Time`` so that a device whose own clock is off can still stamp
its signed requests inside the window.

Every refusal answered here is reported to the app's ``Events``. A body FastAPI cannot parse
(such as JSON nested deeper than the parser goes) is a ``bad_request``, never a bare error page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from voicegate.errors import Refused, StoreUnavailable, Throttled
from voicegate.observe import Events
from voicegate.reasons import NEXT_STEP, REQUEST_NEXT_STEP, Reason
from voicegate.text import printable

TIME_HEADER = "X-Voicegate-Time"
# A detail is one short sentence about the request; a longer one is cut, never sent whole.
MAX_DETAIL = 200

_STATUS: dict[Reason, int] = {
    Reason.BAD_REQUEST: 400,
    Reason.MALFORMED: 400,
    Reason.BAD_PAIRING_CODE: 400,
    Reason.UNSIGNED_REQUEST: 401,
    Reason.UNKNOWN_DEVICE: 401,
    Reason.DEVICE_REVOKED: 401,
    Reason.BAD_DEVICE_SIGNATURE: 401,
    Reason.STALE_REQUEST: 401,
    Reason.REQUEST_REPLAYED: 401,
    Reason.WRONG_DEVICE_USER: 403,
    Reason.DEVICE_CANNOT_SPEAK: 403,
    Reason.UNKNOWN_PENDING: 404,
    Reason.UNKNOWN_TEMPLATE: 404,
    Reason.UNKNOWN_PASSKEY: 404,
    Reason.UNKNOWN_GRANT: 404,
    Reason.GRANT_SEVERAL_CARDS: 422,
    Reason.GRANT_HIGH_RISK: 422,
    Reason.GRANT_OFF: 422,
    Reason.GRANT_BEYOND_LIMIT: 422,
    Reason.GRANT_NO_PAUSE: 422,
    Reason.ALL_SEVERAL_CARDS: 422,
    Reason.ALL_HIGH_RISK: 422,
    Reason.PASSKEY_WRONG_RP: 403,
    Reason.PASSKEY_WRONG_ORIGIN: 403,
    Reason.PASSKEY_MISMATCH: 403,
    Reason.PASSKEY_NOT_VERIFIED: 403,
    Reason.PASSKEY_BAD_SIGNATURE: 403,
    Reason.PASSKEY_COUNTER: 403,
    Reason.PASSKEY_REGISTRATION: 422,
    Reason.PUSH_OFF: 404,
    Reason.TOO_SLOW: 408,
    Reason.TOO_LARGE: 413,
    Reason.UNSUPPORTED_FORMAT: 415,
    Reason.CORRUPT: 422,
    Reason.TOO_SHORT: 422,
    Reason.TOO_LONG: 422,
    Reason.SILENT: 422,
    Reason.CLIPPED: 422,
    Reason.TOO_NOISY: 422,
    Reason.AUDIO_REUSED: 422,
    Reason.PAIRING_BUDGET: 429,
    Reason.RATE_LIMITED: 429,
    Reason.BUSY: 429,
    Reason.LEDGER_UNAVAILABLE: 503,
    Reason.HEARING_UNAVAILABLE: 503,
}

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def status_for(reason: Reason) -> int:
    """The HTTP status of a refusal; anything about a set's state is a 409 conflict."""
    return _STATUS.get(reason, 409)


def refusal(
    reason: Reason,
    *,
    now: float,
    retry_after: int | None = None,
    recording: bool = True,
    detail: str = "",
    **extra: Any,
) -> JSONResponse:
    """The JSON answer to a refusal: the reason code, what the user can do instead and, where
    the check said more, a ``detail`` naming what in the request was wrong.

    ``recording``: whether the refused body was a recording; a JSON request too large is told
    to send a smaller request, not to record a shorter answer. ``detail`` speaks only of the
    request itself (a missing field, a value out of range), never of another user's data.
    """
    step = NEXT_STEP.get(reason, "")
    if not recording:
        step = REQUEST_NEXT_STEP.get(reason, step)
    body: dict[str, Any] = {"reason": reason.value, "next_step": step}
    if detail:
        body["detail"] = printable(detail[:MAX_DETAIL])
    body.update(extra)
    response = JSONResponse(body, status_code=status_for(reason))
    response.headers[TIME_HEADER] = str(int(now))
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    if reason is Reason.TOO_SLOW:
        # The rest of a late body may still arrive; the connection is not reused for it.
        response.headers["Connection"] = "close"
    return response


def validation_detail(exc: RequestValidationError) -> str:
    """What a request that does not fit the route's schema got wrong: the field and the rule
    (``card: Input should be less than or equal to 5``), never the value sent."""
    errors = exc.errors()
    if not errors:
        return ""
    first = errors[0]
    # The first part of a location says where the field rode (body, query, header).
    place = ".".join(str(part) for part in first.get("loc", ())[1:])
    message = str(first.get("msg", ""))
    return f"{place}: {message}" if place else message


class LimitedRequest(Request):
    """A request whose body is read at most ``limit`` bytes far, then kept for every reader."""

    limit: int = 0

    async def body(self) -> bytes:
        """The whole body; ``Refused(TOO_LARGE)`` as soon as it passes ``limit``."""
        if not hasattr(self, "_body"):
            declared = self.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.limit:
                raise Refused(Reason.TOO_LARGE)
            chunks: list[bytes] = []
            size = 0
            async for chunk in super().stream():
                size += len(chunk)
                if size > self.limit:
                    raise Refused(Reason.TOO_LARGE)
                chunks.append(chunk)
            self._body = b"".join(chunks)
        return self._body

    async def body_within(self, seconds: float) -> bytes:
        """The whole body; ``Refused(TOO_SLOW)`` if it has not all arrived within ``seconds``."""
        try:
            async with asyncio.timeout(seconds):
                return await self.body()
        except TimeoutError:
            raise Refused(Reason.TOO_SLOW) from None


def limited_route(
    limit_for: Callable[[str], int],
    clock: Callable[[], float],
    *,
    body_timeout: float,
    events: Events | None = None,
) -> type[APIRoute]:
    """An ``APIRoute`` class whose routes read whole bodies under ``limit_for(path)`` bytes and
    ``body_timeout`` seconds before anything else runs, and answer refusals as JSON."""

    class DeviceRoute(APIRoute):
        def get_route_handler(self) -> Handler:
            original = super().get_route_handler()
            limit = limit_for(self.path)
            route = self.path
            recording = route.endswith("/voice")

            def refuse(
                reason: Reason, retry_after: int | None = None, detail: str = ""
            ) -> JSONResponse:
                if events is not None:
                    events.refused(reason, edge="device", route=route)
                return refusal(
                    reason,
                    now=clock(),
                    retry_after=retry_after,
                    recording=recording,
                    detail=detail,
                )

            async def handle(request: Request) -> Response:
                limited = LimitedRequest(request.scope, request.receive)
                limited.limit = limit
                try:
                    await limited.body_within(body_timeout)
                    response = await original(limited)
                except ClientDisconnect:
                    # Gone mid-body: nothing was held for it, and no one is left to answer.
                    return Response(status_code=400)
                except Throttled as throttled:
                    return refuse(throttled.reason, throttled.retry_after)
                except Refused as refused:
                    return refuse(refused.reason, detail=refused.detail)
                except StoreUnavailable:
                    return refuse(Reason.LEDGER_UNAVAILABLE)
                except RequestValidationError as exc:
                    return refuse(Reason.BAD_REQUEST, detail=validation_detail(exc))
                except HTTPException as exc:
                    # FastAPI's own answer to a body it could not parse at all.
                    return refuse(
                        Reason.TOO_LARGE if exc.status_code == 413 else Reason.BAD_REQUEST
                    )
                response.headers[TIME_HEADER] = str(int(clock()))
                return response

            return handle

    return DeviceRoute
