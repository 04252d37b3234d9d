"""``voicegate serve`` (gate any MCP server) and ``voicegate demo`` (gate the built-in notes).

Both run the same gate (``voicegate.web.serve``). ``demo`` needs no flags and no network: the
notes server runs in-process, the store is SQLite in a temporary folder, and it prints
everything needed to connect an agent and pair a device.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from voicegate.cli.arguments import port_number, user_name
from voicegate.domain import DeviceKind
from voicegate.errors import ConfigError, ConfigFieldError, ModelError, StoreUnavailable
from voicegate.gate.grant_rules import (
    DEFAULT_MAX_MINUTES,
    DEFAULT_MAX_USES,
    MOST_MINUTES,
    MOST_USES,
    GrantRules,
    parse_free,
)
from voicegate.hearing.remote import DEADLINE as HEARING_DEADLINE
from voicegate.limits import BODY_TIMEOUT
from voicegate.mcp.notes import build_notes_server
from voicegate.mcp.policy import Policy, parse_modes, parse_pairs, parse_steps, split_globs
from voicegate.mcp.stdio_front import Wire, process_wire
from voicegate.mcp.upstream import UpstreamSpec
from voicegate.notify.vapid import vapid_for
from voicegate.settings import (
    DEFAULT_PORT,
    MAX_VOICE_IN_FLIGHT,
    TOKEN_ENV,
    VOICE_IN_FLIGHT,
    ServerConfig,
    body_timeout_from,
    keys_for,
    lease_from,
    mail_from,
    metrics_token_from,
    proposal_limits_from,
    push_contact_from,
    rate_limits_from,
    token_from,
    token_ttl_from,
    trusted_proxies_from,
    voice_in_flight_from,
    webhooks_from,
)
from voicegate.store import redact, sqlite_path, store_for
from voicegate.store.base import Store
from voicegate.web.serve import Banner, StoppedBeforeServing, Voice, free_port, port_free

# A process ended by SIGTERM exits 128 + 15, as the shell reports one the signal killed.
STOPPED_BY_SIGTERM = 143
# How long an answer may wait for a recogniser worker (--hearing-timeout): a second is too short
# for any hearing, two minutes past every card's patience.
MIN_HEARING, MAX_HEARING = 1.0, 120.0

if TYPE_CHECKING:
    from voicegate.voice.pipeline import VoicePipeline


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate serve``."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--upstream", metavar="URL", help="the upstream's Streamable HTTP URL")
    where.add_argument("--upstream-cmd", metavar="CMD", help="the command of a stdio upstream")
    parser.add_argument(
        "--env", action="append", metavar="K=V", help="environment for --upstream-cmd"
    )
    parser.add_argument(
        "--header", action="append", metavar="K=V", help="extra header for --upstream"
    )
    parser.add_argument(
        "--strict", action="store_true", help="ignore the upstream's readOnlyHint claims"
    )
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="the agent speaks MCP on this command's stdin and stdout (as an MCP host starts "
        "a server); devices still approve over HTTP",
    )
    parser.add_argument("--reads", action="append", metavar="GLOB", help="tools that only read")
    parser.add_argument("--writes", action="append", metavar="GLOB", help="tools that write")
    parser.add_argument(
        "--high-risk", action="append", metavar="GLOB", help="writes needing a second yes"
    )
    parser.add_argument(
        "--mode",
        action="append",
        metavar="GLOB=MODE",
        help="approval mode per tool glob: device (default), token, reject or delegate",
    )
    parser.add_argument(
        "--hearing",
        metavar="NATS_URL",
        default="",
        help="hear voice answers on recogniser workers (voicegate worker) over NATS JetStream, "
        "e.g. nats://127.0.0.1:4222; default: the recogniser runs in this process",
    )
    parser.add_argument(
        "--hearing-timeout",
        metavar="SECONDS",
        type=float,
        default=HEARING_DEADLINE,
        help="with --hearing, how long an answer waits for a worker before it is refused as "
        f"hearing_unavailable, 1-120 (default {HEARING_DEADLINE:g})",
    )
    parser.add_argument(
        "--high-risk-step",
        action="append",
        metavar="GLOB=STEP",
        help="the second step of a high-risk card per tool glob: yes (default), passkey or both",
    )
    parser.add_argument(
        "--grant-max",
        metavar="MINUTES",
        type=int,
        default=DEFAULT_MAX_MINUTES,
        help="the longest a user may allow the same action again after approving it, 0-"
        f"{MOST_MINUTES} minutes; 0 turns grants off (default {DEFAULT_MAX_MINUTES})",
    )
    parser.add_argument(
        "--grant-max-uses",
        metavar="N",
        type=int,
        default=DEFAULT_MAX_USES,
        help=f"the most repeats one grant may allow, 0-{MOST_USES}; 0 turns grants off "
        f"(default {DEFAULT_MAX_USES})",
    )
    parser.add_argument(
        "--grant-free",
        action="append",
        metavar="GLOB=ARG,ARG",
        help="arguments of matching tools that may vary under a grant, e.g. write_note=text "
        "(default: every argument stays as approved)",
    )
    parser.add_argument(
        "--no-grants",
        action="append",
        metavar="GLOB",
        help="tools whose approvals may never be repeated under a grant",
    )
    _add_common(parser, default_db="voicegate.db")


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate demo`` (all optional)."""
    # No default port: left out, the demo takes 8800 or, when that is busy, any free port;
    # named, a busy port is an error.
    _add_common(parser, default_db="", default_port=None)


def _add_common(
    parser: argparse.ArgumentParser, *, default_db: str, default_port: int | None = DEFAULT_PORT
) -> None:
    parser.add_argument("--token", help="the agent's bearer token (default: $VOICEGATE_TOKEN)")
    parser.add_argument(
        "--db",
        default=default_db,
        help="the store: a SQLite file (PATH, sqlite:///ABSOLUTE/PATH or sqlite:RELATIVE/PATH; "
        "its folder must exist), memory, or postgresql://...",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port",
        type=port_number,
        default=default_port,
        help=f"port to listen on, 0 for any free one (default {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--user", type=user_name, default="owner", help="the user whose device approves"
    )
    parser.add_argument("--public-url", default="", help="the URL devices and agents use")
    parser.add_argument(
        "--voice-model", default=None, help="tiny.en (default for English) or base (for Hindi)"
    )
    parser.add_argument(
        "--lang",
        action="append",
        choices=("en", "hi"),
        help="languages the recogniser listens for (repeat for several; default en)",
    )
    parser.add_argument("--no-voice", action="store_true", help="taps only, no recogniser")
    parser.add_argument(
        "--token-ttl",
        metavar="SECONDS",
        default=None,
        help="how long a token-mode confirmationToken stays valid, up to 3600 "
        "(default: $VOICEGATE_TOKEN_TTL or 300)",
    )
    parser.add_argument(
        "--max-voice-in-flight",
        metavar="N",
        type=int,
        default=VOICE_IN_FLIGHT,
        help="voice answers held at once before the next is told busy, "
        f"1-{MAX_VOICE_IN_FLIGHT} (default {VOICE_IN_FLIGHT})",
    )
    parser.add_argument(
        "--body-timeout",
        metavar="SECONDS",
        type=float,
        default=BODY_TIMEOUT,
        help="how long a device request's body may take to arrive, up to 300 "
        f"(default {BODY_TIMEOUT:g})",
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        metavar="ADDRESS",
        help="a reverse proxy (IP address or network) whose X-Forwarded-For names the client; "
        "repeat for several (default: none, the connection's own address counts)",
    )
    parser.add_argument(
        "--rate-limit",
        action="append",
        metavar="NAME=N",
        help="change one device rate limit, e.g. answers_per_device=120 (names: "
        "voice_per_device, voice_per_user, answers_per_device, answers_per_user, window)",
    )
    parser.add_argument(
        "--no-push",
        action="store_true",
        help="send no Web Push notifications to paired devices (default: offered on the page)",
    )
    parser.add_argument(
        "--push-contact",
        default="",
        metavar="URI",
        help="a mailto: address or https URL push services may use to reach the operator",
    )
    parser.add_argument(
        "--webhook",
        action="append",
        metavar="URL",
        help="POST each notice (new card, about to expire, done) as JSON to URL, e.g. an ntfy "
        "topic; repeat for several",
    )
    parser.add_argument(
        "--mail",
        action="append",
        metavar="USER=ADDRESS",
        help="also mail USER's notices to ADDRESS (a summary and a link to the page, never a "
        "way to approve); repeat for several users",
    )
    parser.add_argument(
        "--smtp",
        metavar="URL",
        help="the mail server: smtp://[login@]host[:port] (STARTTLS; plain only to this "
        "machine) or smtps://...; the password from $VOICEGATE_SMTP_PASSWORD "
        "(default: smtp://localhost:25)",
    )
    parser.add_argument(
        "--mail-from",
        metavar="ADDRESS",
        help="the sender of those mails (default: voicegate@ the mail server's host)",
    )
    parser.add_argument(
        "--proposal-limit",
        action="append",
        metavar="NAME=N",
        help="change one proposal bound, e.g. open_per_user=20 (names: open_per_user, "
        "per_agent, window, argument_bytes; defaults 10, 30 a minute, 60 s, 16384)",
    )


def run_serve(args: argparse.Namespace) -> int:
    """Run ``voicegate serve``."""
    try:
        if args.upstream:
            upstream = UpstreamSpec.from_url(args.upstream, parse_pairs(args.header, "headers"))
        else:
            upstream = UpstreamSpec.from_command(args.upstream_cmd, parse_pairs(args.env, "env"))
        policy = Policy(
            reads=split_globs(args.reads),
            writes=split_globs(args.writes),
            high_risk=split_globs(args.high_risk),
            modes=parse_modes(args.mode),
            strict=args.strict,
            steps=parse_steps(args.high_risk_step),
            grants=GrantRules(
                max_minutes=args.grant_max,
                max_uses=args.grant_max_uses,
                free=parse_free(args.grant_free),
                off=split_globs(args.no_grants),
            ),
        )
        config = config_from(args)
        voice = voice_from(args)
    except (ConfigError, ModelError, ValueError) as exc:
        print(f"voicegate serve: {said(exc)}", file=sys.stderr)
        return 2
    generated = not (args.token or os.environ.get(TOKEN_ENV))
    if args.stdio:
        config = replace(config, agent_on_stdio=generated)
        # From here on stdout is the agent's: anything printed (the banner) goes to stderr.
        with process_wire() as wire:
            return asyncio.run(_serve(config, upstream, policy, voice, stdio_banner, wire))
    banner = serve_banner_with_token if generated else serve_banner
    return asyncio.run(_serve(config, upstream, policy, voice, banner))


def run_demo(args: argparse.Namespace) -> int:
    """Run ``voicegate demo``; its temporary store is removed on exit unless ``--db`` names one."""
    if args.port is None:
        args.port = DEFAULT_PORT
        if not port_free(args.host, DEFAULT_PORT):
            args.port = free_port(args.host)
            print(
                f"voicegate demo: port {DEFAULT_PORT} on {args.host} is in use, so the demo "
                f"serves on port {args.port} (a page paired at another address pairs again)",
                file=sys.stderr,
            )
    elif not port_free(args.host, args.port):
        print(
            f"voicegate demo: port {args.port} on {args.host} is already in use; name a free "
            "one with --port, or leave --port out to take any free port",
            file=sys.stderr,
        )
        return 2
    folder = None
    if not args.db:
        folder = Path(tempfile.mkdtemp(prefix="voicegate-demo-"))
        args.db = str(folder / "demo.db")
    try:
        config = config_from(args)
        upstream = UpstreamSpec.in_process(build_notes_server())
        policy = Policy(high_risk=("delete_*",))
        voice = voice_from(args)
        # The events go to a file, so the banner (token, pairing code) stays on screen; warnings
        # and errors are still shown. Beside the temporary store, or kept when --db keeps one.
        log = folder / "events.log" if folder is not None else _kept_log()
        banner = functools.partial(demo_banner, temporary=folder is not None, log=log)
        with log.open("a", encoding="utf-8") as events:
            return asyncio.run(_serve(config, upstream, policy, voice, banner, log=events))
    except (ConfigError, ModelError) as exc:
        print(f"voicegate demo: {said(exc)}", file=sys.stderr)
        return 2
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _kept_log() -> Path:
    """A new log file in the temporary folder, for a demo whose store outlives it."""
    handle, name = tempfile.mkstemp(prefix="voicegate-demo-", suffix=".log")
    os.close(handle)
    return Path(name)


async def _serve(
    config: ServerConfig,
    upstream: UpstreamSpec,
    policy: Policy,
    voice: Voice | None,
    banner: Banner,
    wire: Wire | None = None,
    log: TextIO | None = None,
) -> int:
    """Open the store and serve on it; a refusal to start is one line and exit 2. Events go to
    stderr, or to ``log`` with warnings and errors also on stderr."""
    from voicegate.observe import configure_logging
    from voicegate.store import open_store
    from voicegate.web.serve import serve

    if log is None:
        configure_logging()
    else:
        configure_logging(stream=log, echo=sys.stderr)
    try:
        store = await open_store(config.db)
    except (ConfigError, StoreUnavailable) as exc:
        # a bad path or a database that is down: the reason, never a traceback
        print(f"voicegate: cannot open the store {redact(config.db)}: {said(exc)}", file=sys.stderr)
        return 2
    try:
        served = await serve(config, store, upstream, policy, voice=voice, banner=banner, wire=wire)
    except (ConfigError, ModelError) as exc:
        print(f"voicegate: {said(exc)}", file=sys.stderr)
        return 2
    except StoppedBeforeServing:
        print("voicegate: stopped by SIGTERM before it served", file=sys.stderr)
        return STOPPED_BY_SIGTERM
    finally:
        await store.close()
    return 0 if served else 2


# The flag that sets each configuration field a refusal may name (``ConfigFieldError``): the
# configuration names its fields, and the command line says them as the flags the user typed.
FLAGS = {
    # ``ServerConfig``
    "db": "--db",
    "token": "--token",
    "rate_limits": "--rate-limit",
    "proposal_limits": "--proposal-limit",
    "token_ttl": "--token-ttl",
    "max_voice_in_flight": "--max-voice-in-flight",
    "body_timeout": "--body-timeout",
    "trusted_proxies": "--trusted-proxy",
    "push_contact": "--push-contact",
    "webhooks": "--webhook",
    "mail_to": "--mail",
    "smtp": "--smtp",
    "mail_from": "--mail-from",
    # the operator's tool ``Policy`` and its ``GrantRules``
    "modes": "--mode",
    "steps": "--high-risk-step",
    "max_minutes": "--grant-max",
    "max_uses": "--grant-max-uses",
    "free": "--grant-free",
    # the ``UpstreamSpec``
    "env": "--env",
    "headers": "--header",
}


def said(exc: Exception) -> str:
    """``exc`` as the command line reports it: a refused config field called by its flag."""
    return exc.said(FLAGS) if isinstance(exc, ConfigFieldError) else str(exc)


def config_from(args: argparse.Namespace) -> ServerConfig:
    """The server configuration the parsed flags and the environment describe."""
    # Said before anything starts: a store URL it cannot use, or one whose driver is missing.
    store_for(args.db)
    mail_to, smtp, sender = mail_from(args.mail, args.smtp, args.mail_from)
    return ServerConfig(
        host=args.host,
        port=args.port,
        db=args.db,
        token=token_from(args.token),
        keys=keys_for(args.db),
        release_lease=lease_from(),
        metrics_token=metrics_token_from(),
        user=args.user,
        public_url=args.public_url,
        rate_limits=rate_limits_from(args.rate_limit),
        proposal_limits=proposal_limits_from(args.proposal_limit),
        token_ttl=token_ttl_from(args.token_ttl),
        max_voice_in_flight=voice_in_flight_from(args.max_voice_in_flight),
        body_timeout=body_timeout_from(args.body_timeout),
        trusted_proxies=trusted_proxies_from(args.trusted_proxy),
        push=not args.no_push,
        vapid_key=None if args.no_push else vapid_for(args.db),
        push_contact=push_contact_from(args.push_contact),
        webhooks=webhooks_from(args.webhook),
        mail_to=mail_to,
        smtp=smtp,
        mail_from=sender,
    )


def voice_from(args: argparse.Namespace) -> Voice | None:
    """The recogniser the flags ask for; None with ``--no-voice``."""
    if args.no_voice:
        return None
    languages = tuple(args.lang or ("en",))
    if args.voice_model is not None:
        # Said before anything starts, as a usage error: the model cannot hear what was asked.
        from voicegate.voice.models import check_languages

        check_languages(args.voice_model, languages)
    hearing = getattr(args, "hearing", "")
    timeout = getattr(args, "hearing_timeout", HEARING_DEADLINE)
    if hearing:
        if not hearing.startswith(("nats://", "tls://")):
            raise ConfigError(f"--hearing takes a NATS URL (nats://HOST:PORT), not {hearing!r}")
        if not MIN_HEARING <= timeout <= MAX_HEARING:
            raise ConfigError(
                f"--hearing-timeout is {MIN_HEARING:g} to {MAX_HEARING:g} seconds, not {timeout:g}"
            )
    return Voice(
        model=args.voice_model, languages=languages, hearing=hearing, hearing_timeout=timeout
    )


async def serve_banner(config: ServerConfig, store: Store, voice: VoicePipeline | None) -> None:
    """What ``voicegate serve`` prints once it serves: where agents and devices connect."""
    print(f"Agent MCP endpoint: {config.base_url}/mcp  (Authorization: Bearer <token>)")
    print(f"Approve on your device: {config.base_url}/approve")
    print(f"Pair a device with: {pair_command(config)}")
    sys.stdout.flush()


async def stdio_banner(config: ServerConfig, store: Store, voice: VoicePipeline | None) -> None:
    """What ``voicegate serve --stdio`` says, on stderr (stdout is the agent's): no token, since
    the agent needs none on stdin, and a generated one is shown to nobody."""
    print("Agent MCP: this command's stdin and stdout", file=sys.stderr)
    print(f"Approve on your device: {config.base_url}/approve", file=sys.stderr)
    if not store.durable:
        # No pairing code is printed here: the host may keep this stream where the agent reads.
        print(
            "No device can pair: voicegate pair cannot reach a memory store (use --db FILE)",
            file=sys.stderr,
        )
    else:
        print(f"Pair a device with: {pair_command(config)}", file=sys.stderr)
    sys.stderr.flush()


def pair_command(config: ServerConfig) -> str:
    """The ``voicegate pair`` command for this server's own store (a password masked) and its
    own address, so the code it prints sends the device to this server."""
    # A SQLite file by its absolute path: the command may be run from another folder than the
    # one the server (or the MCP host that started it) runs in.
    path = sqlite_path(config.db)
    db = str(Path(path).resolve()) if path else redact(config.db)
    return (
        f"voicegate pair --user {shlex.quote(config.user)} --db {shlex.quote(db)}"
        f" --url {shlex.quote(config.base_url)}"
    )


def _voice_line(voice: VoicePipeline | None) -> str:
    if voice is None:
        return "off (taps only)"
    model = getattr(voice.transcriber, "model", "")
    return f"on ({model}, {' and '.join(voice.languages)})" if model else "on"


async def serve_banner_with_token(
    config: ServerConfig, store: Store, voice: VoicePipeline | None
) -> None:
    """The serve banner and the bearer token, when the token was generated for this run."""
    await serve_banner(config, store, voice)
    # A generated token exists nowhere else; the operator needs it once to configure the agent.
    print(f"Bearer token (generated; pass --token to keep one): {config.token.reveal().decode()}")
    sys.stdout.flush()


async def demo_banner(
    config: ServerConfig,
    store: Store,
    voice: VoicePipeline | None,
    *,
    temporary: bool = False,
    log: Path | None = None,
) -> None:
    """What ``voicegate demo`` prints: the endpoint, its token, a pairing code, the store (and,
    when the demo made it, that it goes when the demo stops)."""
    from voicegate.device.pairing import start_pairing

    code = await start_pairing(store, config.user, DeviceKind.VOICE, keys=config.signing_keys())
    print(
        "voicegate demo: the notes server (reads list_notes, read_note, stats; writes "
        "write_note, delete_note) behind the gate"
    )
    print(f"  Agent MCP endpoint: {config.base_url}/mcp")
    print(f"  Bearer token:       {config.token.reveal().decode()}")
    print(f"  Approve page:       {config.base_url}/approve")
    print(f"  Pairing code:       {code}  (one use, 10 minutes)")
    print(f"  Voice:              {_voice_line(voice)}")
    print(f"  Another device:     {pair_command(config)}")
    kept = " (removed when the demo stops, taught answers too; --db PATH keeps it)"
    print(f"  Store:              {redact(config.db)}{kept if temporary else ''}")
    if log is not None:
        print(f"  Events log:         {log}  (warnings and errors are shown here too)")
    sys.stdout.flush()
