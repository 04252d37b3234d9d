"""Running the gate on an open store: build the app, start it, listen, hand over to uvicorn.

``voicegate serve`` and ``voicegate demo`` both end here; they differ only in the upstream, the
policy and the banner they print once the gate can really serve. ``default_pipeline`` builds the
voice pipeline a server runs: the recogniser in this process, or on workers (``voicegate.hearing``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn

from voicegate.errors import ConfigError, ModelError
from voicegate.mcp.policy import Policy
from voicegate.mcp.stdio_front import StdioFront, Wire
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.settings import VOICE_IN_FLIGHT, ServerConfig, check_startup
from voicegate.store.base import Store

if TYPE_CHECKING:  # the model runtime loads only when voice is switched on
    from voicegate.store.base import FingerprintStore, TemplateStore
    from voicegate.voice.pipeline import VoicePipeline

# Printed once the socket listens and the upstream is open: (config, store, voice or None).
Banner = Callable[[ServerConfig, Store, "VoicePipeline | None"], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Voice:
    """The recogniser a server runs: ``model`` None picks tiny.en for English alone, else base."""

    model: str | None = None
    languages: tuple[str, ...] = ("en",)
    # A NATS URL: recogniser workers hear the answers (``voicegate worker``); "" hears here.
    hearing: str = ""
    # How long one answer waits for a worker's hearing before it is refused (remote.DEADLINE).
    hearing_timeout: float = 30.0


async def serve(
    config: ServerConfig,
    store: Store,
    upstream: UpstreamSpec,
    policy: Policy,
    *,
    voice: Voice | None,
    banner: Banner,
    wire: Wire | None = None,
) -> bool:
    """Serve on ``store`` (opened and closed by the caller) until Ctrl-C or SIGTERM; False when
    uvicorn never started; ``StoppedBeforeServing`` when SIGTERM came first. With a ``wire``
    the agent also speaks MCP on it (``serve --stdio``), and its closing the wire ends the
    serving too.

    A refusal to start (the start-up checks, a missing model, a tool-name clash, a busy port)
    raises ``ConfigError`` or ``ModelError``, taken out of the task groups start-up runs in.
    """
    from voicegate.web.app import build_app

    term = _Term()
    try:
        check_startup(config, store_durable=bool(getattr(store, "durable", False)))
        # One ring for the app and the demo's pairing code, even when none is configured.
        config = replace(config, keys=config.signing_keys())
        # The port is taken first: a busy one is said at once, before the recogniser loads and
        # before any upstream connection is tried. An agent that connects before the banner
        # waits in the backlog instead of failing.
        with listen(config.host, config.port) as sock, contextlib.ExitStack() as closing:
            # --port 0 listens where the system chose; the banner and the app name that port.
            config = replace(config, port=int(sock.getsockname()[1]))
            # The pipeline's own queue must not refuse what the device routes admitted.
            pipeline = _pipeline(store, voice, max_waiting=config.max_voice_in_flight)
            if pipeline is not None:
                # A recogniser that holds a connection (hearing on workers) lets it go last.
                closing.callback(getattr(pipeline.transcriber, "close", lambda: None))
            app = build_app(config, upstream=upstream, policy=policy, store=store, voice=pipeline)
            # The app's start-up (open the upstream, list it, refuse a tool-name clash) runs
            # here rather than inside uvicorn, so a refusal is one line and the banner, with its
            # token, is printed only once the gate can really serve.
            server = uvicorn.Server(server_config(app))
            async with app.router.lifespan_context(app):
                await banner(config, store, pipeline)
                term.serving(server)
                with _quiet_stop():
                    if wire is None:
                        await server.serve(sockets=[sock])
                    else:
                        await _serve_with_stdio(server, sock, app, wire)
                term.close()  # a SIGTERM during a hung shutdown ends the process
        return bool(server.started)
    except asyncio.CancelledError:
        if not term.stopped:
            raise
        term.uncancel()
        raise StoppedBeforeServing from None
    except BaseExceptionGroup as group:
        if term.stopped:  # whatever else the start-up's task groups raised on the way out
            term.uncancel()
            raise StoppedBeforeServing from group
        # Start-up runs inside task groups, which wrap a refusal such as a tool-name clash.
        refused, rest = group.split((ConfigError, ModelError))
        if refused is None or rest is not None:
            raise
        raise _first_leaf(refused) from None
    finally:
        term.close()


async def _serve_with_stdio(
    server: uvicorn.Server, sock: socket.socket, app: Any, wire: Wire
) -> None:
    """uvicorn for the devices (and HTTP agents) beside the agent's stdio connection; whichever
    ends first ends the other: a closed stdin stops the server, a signal closes the line."""
    assembly = app.state.voicegate
    front = StdioFront(assembly.reads)
    async with anyio.create_task_group() as both:

        async def web() -> None:
            await server.serve(sockets=[sock])
            both.cancel_scope.cancel()

        both.start_soon(web)
        await front.serve(wire)
        server.should_exit = True


def _pipeline(store: Store, voice: Voice | None, *, max_waiting: int) -> VoicePipeline | None:
    """The real recogniser over the store, or None for taps only; a missing model raises."""
    if voice is None:
        return None
    return default_pipeline(
        store.fingerprints,
        model=voice.model,
        languages=voice.languages,
        templates=store.templates,
        hearing=voice.hearing,
        hearing_timeout=voice.hearing_timeout,
        max_waiting=max_waiting,
    )


def server_config(app: Any) -> uvicorn.Config:
    """How uvicorn runs ``app``: the app's lifespan runs outside it, and uvicorn never reads
    ``X-Forwarded-For`` itself (by default it trusts it from 127.0.0.1); the app does, and only
    from ``--trusted-proxy`` addresses. uvicorn's "auto" parser is httptools, a dependency: it
    costs a read about 0.6 ms less CPU than h11, the pure-Python parser uvicorn falls back to
    where httptools is missing (docs/benchmarks.md, P3)."""
    return uvicorn.Config(app, log_level="warning", lifespan="off", proxy_headers=False)


class StoppedBeforeServing(Exception):
    """SIGTERM came before the gate served; what the start-up had opened is closed."""


class _Term:
    """SIGTERM through the event loop while ``serve`` starts and serves.

    Before serving it cancels the start-up, as Ctrl-C does, so what the start-up opened (a
    stdio upstream's process, the listening socket) is closed on the way out; the default
    handler would end the process at once and leave the upstream running. From ``serving`` on
    it asks uvicorn to stop, as uvicorn's own handler does, so a SIGTERM between the banner and
    uvicorn's handlers is not lost either. A signal the loop took before ``serving`` but runs
    after it stops uvicorn the same way.
    """

    def __init__(self) -> None:
        self.stopped = False
        self._server: uvicorn.Server | None = None
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        try:
            self._loop.add_signal_handler(signal.SIGTERM, self._stop)
            self._held = True
        except NotImplementedError:  # a loop without signal handlers: the default stands
            self._held = False

    def _stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        elif not self.stopped and self._task is not None:
            self.stopped = True
            self._task.cancel()

    def serving(self, server: uvicorn.Server) -> None:
        """From now on SIGTERM stops ``server`` gracefully."""
        self._server = server

    def uncancel(self) -> None:
        """The cancel was ours and is handled: the task runs on to close the store."""
        if self._task is not None:
            self._task.uncancel()

    def close(self) -> None:
        """Hand SIGTERM back to its default (once serving is over, and on the way out)."""
        if self._held:
            self._held = False
            self._loop.remove_signal_handler(signal.SIGTERM)


@contextlib.contextmanager
def _quiet_stop() -> Iterator[None]:
    """While uvicorn serves: Ctrl-C and SIGTERM end the serving cleanly, with no traceback.

    uvicorn stops gracefully on either signal and then raises it again for the handler that was
    there before; that handler is this no-op, so the shutdown (and the demo's clean-up of its
    temporary store) runs to the end. Outside serving the usual handlers stand, so Ctrl-C
    during start-up or a signal in a hung shutdown still stops the process (SIGTERM during
    start-up cancels it: ``_Term``).
    """
    stops = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.signal(sig, lambda *_: None) for sig in stops}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception inside ``group`` and any groups nested in it."""
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and already listening; ``ConfigError`` if it cannot be."""
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY) only on connections
    # accepted from a socket that says it is TCP; without it every small answer waits ~40 ms
    # for a delayed acknowledgement.
    sock = socket.socket(_family(host), socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now, as ``listen`` binds it: with ``SO_REUSEADDR``,
    so the connections of a server that just stopped (TIME_WAIT) do not hold the port."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str) -> int:
    """A port on ``host`` that nothing listens on now, chosen by the system."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _family(host: str) -> socket.AddressFamily:
    """IPv6 for an address with a colon in it ("::1"), else IPv4."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def default_pipeline(
    fingerprints: FingerprintStore,
    *,
    model: str | None = None,
    languages: Sequence[str] = ("en",),
    device: str = "auto",
    templates: TemplateStore | None = None,
    hearing: str = "",
    hearing_timeout: float = 30.0,
    max_waiting: int = VOICE_IN_FLIGHT,
) -> VoicePipeline:
    """The real recogniser with a replay guard over ``fingerprints``, and the users' personal
    answers from ``templates`` when given; with ``hearing`` (a NATS URL), the recogniser runs
    on workers (``voicegate.hearing``) and everything else here.

    ``model`` defaults to ``default_model(languages)``.
    Raises ``ModelError`` when the model is not installed or does not verify, ``ConfigError``
    when NATS cannot be reached.
    """
    from voicegate.voice.enrolment import StoreEnrolments
    from voicegate.voice.fingerprint import ReplayGuard
    from voicegate.voice.pipeline import REMOTE_CALLS, VoicePipeline, default_model
    from voicegate.voice.transcribe import Transcriber

    langs = tuple(languages)
    name = model or default_model(langs)
    transcriber: Transcriber
    workers = 1
    if hearing:
        from voicegate.hearing.remote import NatsHearing

        remote = NatsHearing(hearing, name, deadline=hearing_timeout)
        remote.start()
        transcriber = remote
        # Each model call waits on the network, not the CPU: keep several in flight, so
        # several workers hear at once.
        workers = REMOTE_CALLS
    else:
        from voicegate.voice.whisper import FasterWhisperTranscriber

        transcriber = FasterWhisperTranscriber(name, device=device)
    taught = StoreEnrolments(templates, transcriber.model) if templates is not None else None
    return VoicePipeline(
        transcriber,
        ReplayGuard(fingerprints),
        languages=langs,
        enrolments=taught,
        workers=workers,
        max_waiting=max_waiting,
    )
