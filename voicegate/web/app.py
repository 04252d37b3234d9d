"""The one HTTP application: the agent's ``/mcp``, the device API, the ``/approve`` page, health.

Every route answers only to this server's own names (``ServerConfig.trusted_hosts``, Starlette's
``TrustedHostMiddleware``): a request with any other Host is refused before a route runs, so a
rebound DNS name reaches nothing. The client address (which pairing budgets count by) is the
connection's own; ``X-Forwarded-For`` replaces it only on connections from a proxy the operator
named (``--trusted-proxy``).

``/mcp`` is the MCP SDK's Streamable HTTP endpoint, behind a bearer token compared in constant
time and the SDK's DNS-rebinding protection (only this server's own Host and Origin values
pass). The app's lifespan opens the upstream pool, lists the upstream once (refusing a tool
name collision), settles writes a crash interrupted, and runs the MCP session manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from voicegate.device.edge import MAX_DETAIL, validation_detail
from voicegate.device.enrol import enrol_router
from voicegate.device.grants import grant_router
from voicegate.device.passkeys import passkey_router
from voicegate.device.push import push_router
from voicegate.device.routes import device_router
from voicegate.errors import ConfigError
from voicegate.gate.core import Gate
from voicegate.gate.quota import agent_id
from voicegate.housekeeping import keep_tidy
from voicegate.mcp.catalog import Catalog
from voicegate.mcp.policy import Policy
from voicegate.mcp.read_pass import ReadPass
from voicegate.mcp.server import GatedTools, GateOptions, build_server
from voicegate.mcp.upstream import UpstreamError, UpstreamPool, UpstreamSpec
from voicegate.mcp.upstream_failures import Failure
from voicegate.notify import vapid
from voicegate.notify.dispatch import Dispatcher
from voicegate.notify.mail import Mail
from voicegate.notify.notice import Notifier
from voicegate.notify.webhook import Webhook
from voicegate.notify.webpush import WebPush
from voicegate.observe import CONTENT_TYPE, Events
from voicegate.reasons import NEXT_STEP, Reason
from voicegate.secrets import Secret
from voicegate.services import Services
from voicegate.settings import ServerConfig
from voicegate.store.base import Store
from voicegate.text import printable
from voicegate.tokens import TokenCodec
from voicegate.web.approve import approve_router
from voicegate.web.body_limit import BodyLimit
from voicegate.web.read_route import ReadRoute

logger = logging.getLogger(__name__)


@runtime_checkable
class Watched(Protocol):
    """A recogniser whose hearing happens elsewhere (``voicegate.hearing.remote.NatsHearing``),
    reported on /healthz and /metrics."""

    on_heard: Callable[[float], None] | None

    def workers(self) -> int: ...

    def depth(self) -> int: ...


# Upstream failures that retrying cannot mend: the gate refuses to start on them.
_NEVER_STARTS = frozenset({Failure.NOT_FOUND, Failure.NOT_STARTED})
# Seconds a stopping server spends on a last try at outcomes the store did not take.
SHUTDOWN_FLUSH_S = 5.0

# About twice the largest arguments a write takes (canonical.ARGUMENTS_BYTES, 1 MiB less 1 KiB):
# a bigger tools/call could never be approved, and the MCP SDK would otherwise read any body
# whole into memory.
MAX_MCP_BYTES = 2 * 1024 * 1024

if TYPE_CHECKING:  # the model runtime is imported only by whoever builds a pipeline
    from voicegate.voice.pipeline import VoicePipeline


@dataclass(slots=True)
class Assembly:
    """The running parts behind one app, kept on ``app.state.voicegate`` for tests and the CLI."""

    services: Services
    pool: UpstreamPool
    catalog: Catalog
    tools: GatedTools
    config: ServerConfig
    reads: ReadPass
    # Sends notices (Web Push, webhooks, mail) as the gate proposes and releases.
    dispatcher: Dispatcher


def build_app(
    config: ServerConfig,
    *,
    upstream: UpstreamSpec,
    policy: Policy,
    store: Store,
    voice: VoicePipeline | None = None,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """The FastAPI app gating ``upstream`` with ``policy`` over ``store``."""
    keys = config.signing_keys()
    events = Events()
    pool = UpstreamPool(upstream)
    catalog = Catalog(pool, policy)
    notifiers: list[Notifier] = []
    push_key = ""
    if config.push:
        vapid_key = config.vapid_key or vapid.generate()
        push_key = vapid.public_key(vapid_key)
        notifiers.append(WebPush(store, vapid_key, subject=config.push_subject(), clock=clock))
    approve_url = config.base_url + "/approve"
    notifiers.extend(Webhook(url, approve_url=approve_url) for url in config.webhooks)
    if config.smtp is not None and config.mail_to:
        to = dict(config.mail_to)
        notifiers.append(Mail(config.smtp, to, sender=config.mail_from, approve_url=approve_url))
    dispatcher = Dispatcher(notifiers, store, clock=clock)
    gate = Gate(
        store,
        executor=events.timed(catalog.execute),
        policy=catalog.gate_policy(upstream.identity()),
        receipt_keys=keys,
        relying_party=config.relying_party(),
        clock=clock,
        limits=config.proposal_limits,
        on_news=dispatcher.news,
    )
    options = GateOptions(user=config.user, approve_url=approve_url, agent=agent_id(config.token))
    tools = GatedTools(
        gate,
        catalog,
        tokens=TokenCodec(keys, ttl=config.token_ttl, clock=clock),
        options=options,
        clock=clock,
        events=events,
    )
    server = build_server(tools)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=config.host_headers(),
        allowed_origins=config.origins(),
    )
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)
    # Agent reads at 2026-07-28 are answered by the gate itself, with the SDK's checks.
    reads = ReadPass(tools, server, security)
    services = Services(
        store=store,
        gate=gate,
        voice=voice,
        clock=clock,
        config=config,
        events=events,
        push_key=push_key,
    )
    assembly = Assembly(services, pool, catalog, tools, config, reads, dispatcher)
    # A pipeline whose recogniser hears on workers reports them (the eval's scripted one has none).
    heard_on = getattr(voice, "transcriber", None)
    if isinstance(heard_on, Watched):
        heard_on.on_heard = events.watch_hearing(heard_on.workers, heard_on.depth)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with pool:
            try:
                await catalog.start()
                # Said once, so the operator sees which tools run without any yes, and why.
                logger.info("%s", catalog.reads_line())
                for warn, line in catalog.policy_lines():
                    logger.log(logging.WARNING if warn else logging.INFO, "%s", line)
                if policy.steps and gate.relying_party is None:
                    logger.warning(
                        "--high-risk-step asks for passkeys, but %s is an address, not a name: "
                        "every passkey step will be refused; give --public-url a domain name",
                        config.base_url,
                    )
            except UpstreamError as exc:
                if exc.failure in _NEVER_STARTS:
                    # A command that is not there, or cannot be run, will not be there on the
                    # first call either: refuse to start rather than serve a gate with nothing
                    # behind it.
                    raise ConfigError(f"the upstream cannot start: {exc.detail}") from None
                # Not fatal: the pool reconnects on first use; the collision check runs then.
                logger.warning("upstream not reachable at start: %s", exc.detail)
            # A lone process settles its own interrupted releases at once; replicas sharing a
            # database wait out the lease, since another replica may still be mid-release.
            grace = config.release_lease if config.shared_store else 0.0
            settled = await gate.settle_interrupted(grace=grace)
            if settled:
                logger.warning("%d interrupted writes settled", settled)
            tidy = asyncio.create_task(keep_tidy(gate, lease=config.release_lease))
            watch = asyncio.create_task(dispatcher.watch())
            try:
                async with manager.run():
                    yield
            finally:
                tidy.cancel()
                watch.cancel()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(dispatcher.drain(), timeout=SHUTDOWN_FLUSH_S)
                await dispatcher.close()
                # One last try at outcomes still unrecorded; what the store still refuses stays
                # ``executing`` and the next start settles it.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gate.backlog.flush(), timeout=SHUTDOWN_FLUSH_S)
                gate.backlog.close()

    app = FastAPI(title="voicegate", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.voicegate = assembly
    app.add_exception_handler(HTTPException, _http_refusal)
    app.add_exception_handler(RequestValidationError, _validation_refusal)
    app.router.routes.append(
        Route(
            "/mcp",
            endpoint=BearerGate(
                BodyLimit(
                    ReadRoute(StreamableHTTPASGIApp(manager), reads),
                    MAX_MCP_BYTES,
                ),
                config.token,
                STDIO_ONLY if config.agent_on_stdio else SEND_TOKEN,
            ),
        )
    )
    app.include_router(_health(assembly))
    app.include_router(_metrics(events, config.metrics_tokens()))
    app.include_router(device_router(services))
    app.include_router(enrol_router(services))
    app.include_router(passkey_router(services))
    app.include_router(grant_router(services))
    app.include_router(push_router(services))
    app.include_router(approve_router(services))
    if config.trusted_proxies:
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=list(config.trusted_proxies))
    app.add_middleware(
        TrustedHostMiddleware, allowed_hosts=config.trusted_hosts(), www_redirect=False
    )
    return app


class BearerGate:
    """ASGI wrapper: only requests carrying the bearer token reach the wrapped app."""

    def __init__(self, app: ASGIApp, token: Secret, refusal: str) -> None:
        self.app = app
        self._tokens = (token,)
        self._refusal = refusal  # the 401's message

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorised(scope):
            await _unauthorised(self._refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        given = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                given = value
                break
        return _bearer_ok(given, self._tokens)


def _bearer_ok(given: bytes, tokens: tuple[Secret, ...]) -> bool:
    """Whether ``given`` (an Authorization header) carries one of ``tokens``.

    Every token is compared in constant time, so the time taken says nothing about which one
    came close.
    """
    matches = [hmac.compare_digest(given, b"Bearer " + token.reveal()) for token in tokens]
    return any(matches)


SEND_TOKEN = "send Authorization: Bearer <token>"
STDIO_ONLY = (
    "this gate's agent speaks MCP on its stdin and stdout (serve --stdio); /mcp over HTTP opens "
    "only with a token named by --token or $VOICEGATE_TOKEN, sent as Authorization: Bearer <token>"
)


def _unauthorised(message: str = SEND_TOKEN) -> JSONResponse:
    return JSONResponse(
        {"error": "unauthorized", "message": message},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="voicegate"'},
    )


async def _http_refusal(request: Request, exc: Exception) -> Response:
    """Unknown paths and wrong methods answer with a reason code like every other refusal."""
    assert isinstance(exc, HTTPException)
    body = {"reason": Reason.BAD_REQUEST.value, "next_step": NEXT_STEP[Reason.BAD_REQUEST]}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def _validation_refusal(request: Request, exc: Exception) -> Response:
    """A body that does not fit the route's schema is a ``bad_request``, never a bare 422; its
    ``detail`` names the field and the rule, never the value sent."""
    assert isinstance(exc, RequestValidationError)
    body = {"reason": Reason.BAD_REQUEST.value, "next_step": NEXT_STEP[Reason.BAD_REQUEST]}
    if detail := validation_detail(exc):
        body["detail"] = printable(detail[:MAX_DETAIL])
    return JSONResponse(body, status_code=400)


def _health(assembly: Assembly) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, Any]:
        """Liveness, how many upstream sessions this process has opened, and how many agent
        reads the gate's own read path answered (HTTP and stdio fronts together)."""
        health: dict[str, Any] = {
            "status": "ok",
            "upstream_sessions": assembly.pool.connects,
            "reads_answered": assembly.reads.answered,
        }
        heard_on = getattr(assembly.services.voice, "transcriber", None)
        if isinstance(heard_on, Watched):
            # Hearing on workers: how many this gate hears from, and what waits for them.
            health["hearing"] = {"workers": heard_on.workers(), "queue_depth": heard_on.depth()}
        return health

    return router


def _metrics(events: Events, tokens: tuple[Secret, ...]) -> APIRouter:
    router = APIRouter()

    # Aggregate counts only: every label is a reason code, a kind or an edge name, never an id.
    @router.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        """This app's metrics in the Prometheus text format (``tokens``: who may read them)."""
        given = request.headers.get("authorization", "").encode("latin-1")
        if tokens and not _bearer_ok(given, tokens):
            return _unauthorised()
        return Response(events.render(), media_type=CONTENT_TYPE)

    return router
