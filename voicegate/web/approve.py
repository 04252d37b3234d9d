"""The ``/approve`` page: a paired device's window onto its user's waiting cards.

Static files (the HTML, a few ES modules and a stylesheet) served from the package, with no CDN
and no build step. The page makes its own ECDSA P-256 key pair in the browser (the private key
never leaves it), pairs with the operator's code, then signs every request to ``/device/*``.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from voicegate.services import Services

_MEDIA = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# The page needs nothing from elsewhere: a script injected into card text could not load more
# code or send the nonce anywhere but this server.
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; media-src 'self' blob:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'",
    "Permissions-Policy": "microphone=(self), camera=(), geolocation=()",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}

__all__ = ["approve_router"]


def _read(name: str) -> bytes:
    return resources.files("voicegate.web").joinpath("static", name).read_bytes()


def _assets() -> dict[str, tuple[bytes, str]]:
    """Every script and stylesheet in ``static/``, by file name, with its media type."""
    found = {}
    for entry in resources.files("voicegate.web").joinpath("static").iterdir():
        media = _MEDIA.get("." + entry.name.rpartition(".")[2])
        if media is not None and entry.is_file():
            found[entry.name] = (entry.read_bytes(), media)
    return found


def approve_router(services: Services | None = None) -> APIRouter:
    """``GET /approve`` and its assets, and ``GET /`` leading to it; not part of the API schema.

    The page needs nothing from ``services``; the parameter keeps one factory shape for routers.
    """
    page = _read("approve.html")
    assets = _assets()
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    async def root() -> RedirectResponse:
        # Someone who types the server's address should land on the page, not on a 404.
        return RedirectResponse("/approve", status_code=307)

    @router.get("/approve")
    async def approve() -> HTMLResponse:
        return HTMLResponse(page, headers=_HEADERS)

    @router.get("/approve/{name}")
    async def asset(name: str) -> Response:
        if name not in assets:
            return Response(status_code=404, headers=_HEADERS)
        content, media = assets[name]
        return Response(content, media_type=media, headers=_HEADERS)

    return router
