"""How one ``voicegate serve`` process is configured, and the rule for starting it safely.

The rule: a gate that lets writes through and listens beyond this machine must keep its
promises across a restart, so it needs a persistent signing secret (tokens and receipts stay
verifiable) and a durable store (a spent nonce stays spent). Without them it refuses to start.
Secrets are ``Secret`` values and never appear in a repr or a log line.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from voicegate.errors import ConfigError, ConfigFieldError
from voicegate.gate.quota import ProposalLimits
from voicegate.limits import BODY_TIMEOUT, MAX_BODY_TIMEOUT, PairingLimits, RateLimits
from voicegate.notify.mail import SmtpServer
from voicegate.passkey import RelyingParty
from voicegate.secrets import KEYS_ENV, KeyRing, Secret, keys_from_env
from voicegate.store import key_file, redact
from voicegate.tokens import DEFAULT_TTL

TOKEN_ENV = "VOICEGATE_TOKEN"
METRICS_TOKEN_ENV = "VOICEGATE_METRICS_TOKEN"
TOKEN_TTL_ENV = "VOICEGATE_TOKEN_TTL"
DEFAULT_PORT = 8800
# A confirmation token stands for one "are you sure?" moment; an hour, in seconds, is already
# far longer than any agent needs to re-call, and a longer one only widens the window to misuse it.
MAX_TOKEN_TTL = 3600.0
# An agent token of 16 characters of base64 is 96 bits, beyond guessing over the network; a
# generated one (``token_urlsafe(24)``) has 32 characters.
MIN_TOKEN_CHARS = 16
# Each held voice upload may be 2 MiB, so 256 of them bound the memory they take to 512 MiB.
MAX_VOICE_IN_FLIGHT = 256
# Voice uploads one process holds at once unless the operator says otherwise; the voice
# pipeline's queue is made as long.
VOICE_IN_FLIGHT = 16
# 2 MiB holds far more than the longest answer the audio checks accept (Opus at 32 kbit/s is
# about 4 KiB a second), yet stops a runaway upload before it is read into memory.
MAX_VOICE_BYTES = 2 * 1024 * 1024
# Every other device request is a small JSON object.
MAX_JSON_BYTES = 16 * 1024
# A release still ``executing`` this long after its claim is taken as interrupted and settled
# as ``unknown``. Upstream calls are far shorter; a replica that died mid-call is settled by
# whichever replica sweeps next.
RELEASE_LEASE = 600.0  # 10 minutes, in seconds
LEASE_ENV = "VOICEGATE_RELEASE_LEASE"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Where the gate listens, what it stores, and the secrets it signs and checks with."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    db: str = "memory"
    token: Secret = field(default_factory=lambda: Secret(secrets.token_urlsafe(24)))
    keys: KeyRing | None = None  # None: a fresh random ring that dies with the process
    user: str = "owner"
    public_url: str = ""
    allowed_hosts: tuple[str, ...] = ()
    allows_writes: bool = True
    rate_limits: RateLimits = field(default_factory=RateLimits)
    # Open sets per user, proposals per agent token per window, bytes of one card's arguments.
    proposal_limits: ProposalLimits = field(default_factory=ProposalLimits)
    # Pairing attempts per address and in all per window (``voicegate.device.pairing``).
    pairing_limits: PairingLimits = field(default_factory=PairingLimits)
    # Seconds before a release still ``executing`` is settled as interrupted (``RELEASE_LEASE``).
    release_lease: float = RELEASE_LEASE
    # The bearer token a scraper sends to ``/metrics``; see ``metrics_tokens``.
    metrics_token: Secret | None = None
    # How long a token-mode ``confirmationToken`` stays valid, in seconds.
    token_ttl: float = DEFAULT_TTL
    # Voice uploads this process holds at once; the next is told ``busy``.
    max_voice_in_flight: int = VOICE_IN_FLIGHT
    # Seconds a device request's body may take to arrive; a slower one answers ``too_slow``.
    body_timeout: float = BODY_TIMEOUT
    # The largest body a device's voice upload and its other requests may have, in bytes.
    max_voice_bytes: int = MAX_VOICE_BYTES
    max_json_bytes: int = MAX_JSON_BYTES
    # How far a device's signed timestamp may be from the server clock, in seconds.
    signature_window: float = 60.0
    # Addresses (or networks) of the reverse proxies whose X-Forwarded-For names the client;
    # none by default, so a client's own X-Forwarded-For never moves it to another budget.
    trusted_proxies: tuple[str, ...] = ()
    # ``serve --stdio`` with no token named: the agent speaks on stdin, and the generated token
    # is shown to nobody, so a 401 on ``/mcp`` says how to open it instead of "send a token".
    agent_on_stdio: bool = False
    # Web Push to paired devices that turned notifications on; off with ``serve --no-push``.
    push: bool = True
    # The VAPID private key (PEM; ``voicegate.notify.vapid``); None: a fresh one for this
    # process, whose subscriptions then die with it.
    vapid_key: Secret | None = None
    # The VAPID ``sub`` claim push services may use to reach the operator (mailto: or https:).
    push_contact: str = ""
    # URLs each notice is POSTed to as JSON (``voicegate.notify.webhook``).
    webhooks: tuple[str, ...] = ()
    # Users whose notices are also mailed, each with the address (``voicegate.notify.mail``).
    mail_to: tuple[tuple[str, str], ...] = ()
    # The SMTP server those mails go through, and the sender they come from.
    smtp: SmtpServer | None = None
    mail_from: str = ""

    def __repr__(self) -> str:
        """Every field, the store URL with its password masked (secrets mask themselves)."""
        shown = (
            f"{f.name}={redact(self.db) if f.name == 'db' else getattr(self, f.name)!r}"
            for f in fields(self)
        )
        return f"ServerConfig({', '.join(shown)})"

    @property
    def base_url(self) -> str:
        """The URL clients use to reach this server."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def shared_store(self) -> bool:
        """Whether other replicas may use the same database (PostgreSQL)."""
        return self.db.startswith(("postgresql://", "postgres://"))

    @property
    def loopback(self) -> bool:
        """Whether the server listens only on this machine."""
        return is_loopback(self.host)

    def relying_party(self) -> RelyingParty | None:
        """Whom passkeys are made for: the host of ``base_url`` and its origin, or, for a
        loopback address, ``localhost`` on the same port; None for any other bare address
        (WebAuthn takes names only), where a passkey step refuses."""
        return RelyingParty.for_url(self.base_url)

    def push_subject(self) -> str:
        """The VAPID ``sub`` claim: ``push_contact``, else an https public URL, else a mailto."""
        if self.push_contact:
            return self.push_contact
        if self.public_url.startswith("https://"):
            return self.public_url.rstrip("/")
        return "mailto:voicegate@localhost"

    def metrics_tokens(self) -> tuple[Secret, ...]:
        """The bearer tokens ``/metrics`` accepts; none means it is open.

        Open only on loopback with no public URL and no metrics token: nothing else on the
        network can reach it. Elsewhere it needs the metrics token or, without one, the agent's.
        """
        if self.metrics_token is not None:
            return (self.metrics_token, self.token)
        if self.loopback and not self.public_url:
            return ()
        return (self.token,)

    def signing_keys(self) -> KeyRing:
        """The configured ring, or a fresh one for this process alone."""
        return self.keys if self.keys is not None else KeyRing.generate()

    def host_headers(self) -> list[str]:
        """Host header values the MCP endpoint accepts (DNS-rebinding protection)."""
        hosts = [f"127.0.0.1:{self.port}", f"localhost:{self.port}", f"[::1]:{self.port}"]
        if not self.loopback:
            hosts.append(f"{self.host}:{self.port}")
        hosts.extend(self.allowed_hosts)
        return hosts

    def trusted_hosts(self) -> list[str]:
        """Host names (without port) the app answers to: localhost, the host of ``base_url``
        (``public_url``, else the address it listens on) and ``allowed_hosts``.

        Anything else is refused before any route runs, so a page on another site that
        rebinds its own name to this server's address (DNS rebinding) reaches nothing: its
        requests carry its own name.
        """
        hosts = ["localhost", "127.0.0.1", "::1"]
        for url in (self.base_url, *(f"//{h}" for h in self.allowed_hosts)):
            name = urllib.parse.urlsplit(url).hostname
            if name and name not in hosts:
                hosts.append(name)
        return hosts

    def origins(self) -> list[str]:
        """Origin header values the MCP endpoint accepts."""
        origins = [f"http://{h}" for h in self.host_headers()]
        if self.public_url:
            origins.append(self.public_url.rstrip("/"))
        return origins


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_startup(config: ServerConfig, *, store_durable: bool) -> None:
    """Refuse an unsafe start: writes on a non-loopback address need persistence."""
    if not config.allows_writes or config.loopback:
        return
    missing = []
    if config.keys is None:
        missing.append("a persistent signing secret ({keys_env})")
    if not store_durable:
        missing.append("a durable store ({db} PATH or a PostgreSQL DSN)")
    if missing:
        raise ConfigFieldError(
            "refusing to listen on {address} with writes enabled without " + " and ".join(missing),
            address=config.host,
            keys_env=KEYS_ENV,
        )


def lease_from(env: Mapping[str, str] = os.environ) -> float:
    """The release lease in seconds from ``VOICEGATE_RELEASE_LEASE``, else ``RELEASE_LEASE``."""
    raw = env.get(LEASE_ENV, "").strip()
    try:
        return float(raw) if raw else RELEASE_LEASE
    except ValueError as exc:
        raise ConfigError(f"{LEASE_ENV} must be a number of seconds, not {raw!r}") from exc


def keys_for(db: str, env: Mapping[str, str] = os.environ) -> KeyRing | None:
    """The signing ring: ``VOICEGATE_SECRET_KEYS`` if set, else a key file beside a SQLite file.

    The key file (``<db>.keys``, mode 0600) keeps receipts and tokens verifiable across restarts
    of a one-machine gate. Replicas on PostgreSQL share the ring through the environment.
    ``ConfigError`` when the key file can be neither read nor made.
    """
    ring = keys_from_env(env)
    path = key_file(db)
    if ring is not None or path is None:
        return ring
    if path.parent.exists() and not path.parent.is_dir():
        raise ConfigError(f"{path.parent} is a file, not a folder for the store")
    if not path.parent.is_dir():
        # a mistyped path is refused, never made into folders
        raise ConfigError(f"the folder {path.parent} for the store does not exist; make it first")
    try:
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(f"k{secrets.token_hex(4)}:{secrets.token_urlsafe(32)}\n")
        return KeyRing(path.read_text().strip())
    except OSError as exc:
        # a path under a file, a folder not writable: the store there cannot be used either
        raise ConfigError(f"cannot keep the signing keys at {path}: {exc.strerror or exc}") from exc


def rate_limits_from(pairs: Sequence[str] | None) -> RateLimits:
    """The default ``RateLimits`` with ``NAME=N`` overrides (``rate_limits``)."""
    return _with_overrides(RateLimits(), pairs, "rate_limits")


def proposal_limits_from(pairs: Sequence[str] | None) -> ProposalLimits:
    """The default ``ProposalLimits`` with ``NAME=N`` overrides (``proposal_limits``)."""
    return _with_overrides(ProposalLimits(), pairs, "proposal_limits")


_Limits = TypeVar("_Limits", RateLimits, ProposalLimits)


def _with_overrides(base: _Limits, pairs: Sequence[str] | None, field: str) -> _Limits:
    """``base`` with each ``NAME=N`` applied; ``window`` is in seconds, the rest are counts.
    A ``ConfigFieldError`` names ``field``, the config field the limits are for."""
    named = "{" + field + "}"
    names = [f.name for f in fields(base)]
    changes: dict[str, Any] = {}
    for pair in pairs or ():
        name, _, text = pair.partition("=")
        name = name.strip()
        if name not in names:
            raise ConfigFieldError(
                "unknown {" + field + ":bare} {name!r}; one of {names}",
                name=name,
                names=", ".join(names),
            )
        try:
            value = float(text) if name == "window" else int(text)
        except ValueError:
            raise ConfigFieldError(
                named + " {name} needs a number, not {text!r}", name=name, text=text
            ) from None
        if not value > 0:
            raise ConfigFieldError(named + " {name} must be positive", name=name)
        changes[name] = value
    return replace(base, **changes)


def token_ttl_from(value: str | None, env: Mapping[str, str] = os.environ) -> float:
    """Token lifetime in seconds: ``value``, else ``VOICEGATE_TOKEN_TTL``, else 5 minutes."""
    if value is not None:
        source, raw = "{token_ttl}", value
    else:
        source, raw = TOKEN_TTL_ENV, env.get(TOKEN_TTL_ENV, "").strip()
        if not raw:
            return DEFAULT_TTL
    try:
        seconds = float(raw)
    except ValueError:
        raise ConfigFieldError(
            source + " must be a number of seconds, not {raw!r}", raw=raw
        ) from None
    # The negated test also refuses NaN, which compares false with everything.
    if not (0 < seconds <= MAX_TOKEN_TTL):
        raise ConfigFieldError(
            source + " must be more than 0 and at most {most:.0f} seconds", most=MAX_TOKEN_TTL
        )
    return seconds


def voice_in_flight_from(value: int) -> int:
    """``max_voice_in_flight`` checked: at least 1, at most ``MAX_VOICE_IN_FLIGHT``."""
    if not 1 <= value <= MAX_VOICE_IN_FLIGHT:
        raise ConfigFieldError(
            "{max_voice_in_flight} must be between 1 and {most}, not {value}",
            most=MAX_VOICE_IN_FLIGHT,
            value=value,
        )
    return value


def metrics_token_from(env: Mapping[str, str] = os.environ) -> Secret | None:
    """The ``/metrics`` bearer token from ``VOICEGATE_METRICS_TOKEN``, or None."""
    raw = env.get(METRICS_TOKEN_ENV, "").strip()
    return Secret(raw) if raw else None


def token_from(value: str | None, env: Mapping[str, str] = os.environ) -> Secret:
    """The agent's bearer token: ``value``, else ``VOICEGATE_TOKEN``, else a fresh one.

    ``ConfigError`` for one shorter than ``MIN_TOKEN_CHARS``: whoever can reach ``/mcp`` could
    guess it.
    """
    source = "{token}" if value else TOKEN_ENV
    chosen = value or env.get(TOKEN_ENV, "")
    if not chosen:
        return Secret(secrets.token_urlsafe(24))
    if len(chosen) < MIN_TOKEN_CHARS:
        raise ConfigFieldError(
            source + " is {length} characters; an agent token needs at least "
            "{least} (leave it out for a generated one)",
            length=len(chosen),
            least=MIN_TOKEN_CHARS,
        )
    return Secret(chosen)


def body_timeout_from(value: float) -> float:
    """``body_timeout`` checked: more than 0, at most ``MAX_BODY_TIMEOUT`` seconds."""
    # The negated test also refuses NaN, which compares false with everything.
    if not (0 < value <= MAX_BODY_TIMEOUT):
        raise ConfigFieldError(
            "{body_timeout} must be more than 0 and at most {most:.0f} seconds",
            most=MAX_BODY_TIMEOUT,
        )
    return value


def trusted_proxies_from(values: Sequence[str] | None) -> tuple[str, ...]:
    """``trusted_proxies`` checked: each an IP address or network, never a wildcard."""
    checked = []
    for value in values or ():
        try:
            network = ipaddress.ip_network(value.strip(), strict=False)
        except ValueError:
            raise ConfigFieldError(
                "{trusted_proxies} needs an IP address or network, not {value!r}", value=value
            ) from None
        if network.prefixlen == 0:
            raise ConfigFieldError("{trusted_proxies} must not trust every address")
        checked.append(str(network) if network.num_addresses > 1 else str(network.network_address))
    return tuple(checked)


def webhooks_from(values: Sequence[str] | None) -> tuple[str, ...]:
    """``webhooks`` checked: each an http or https URL with a host."""
    checked = []
    for value in values or ():
        url = urllib.parse.urlsplit(value.strip())
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ConfigFieldError(
                "{webhooks} needs an http or https URL, not {value!r}", value=value
            )
        checked.append(value.strip())
    return tuple(checked)


SMTP_PASSWORD_ENV = "VOICEGATE_SMTP_PASSWORD"
# Where mail goes when ``mail_to`` names users and ``smtp`` no server: this machine's own
# mail server, as cron and other daemons use.
DEFAULT_SMTP = "smtp://localhost:25"


def address_from(value: str, field: str) -> str:
    """One plain e-mail address (``name@domain``, no display name, no spaces) or a
    ``ConfigFieldError`` naming ``field``."""
    value = value.strip()
    named = "{" + field + "}"
    local, at, domain = value.rpartition("@")
    if not at or not local or "." not in domain.strip(".") or any(c.isspace() for c in value):
        raise ConfigFieldError(
            named + " needs an e-mail address such as ana@example.org, not {value!r}", value=value
        )
    if any(c in value for c in '<>,;"\\()[]'):
        raise ConfigFieldError(named + " takes a plain address, not {value!r}", value=value)
    return value


def mail_from(
    to: Sequence[str] | None,
    smtp: str | None,
    sender: str | None,
    env: Mapping[str, str] = os.environ,
) -> tuple[tuple[tuple[str, str], ...], SmtpServer | None, str]:
    """``mail_to`` as ``USER=ADDRESS`` values, ``smtp`` and ``mail_from`` checked: the users and
    their addresses, the server (None when no user is mailed) and the sender."""
    pairs: dict[str, str] = {}
    for value in to or ():
        user, eq, address = value.partition("=")
        if not eq or not user.strip():
            raise ConfigFieldError("{mail_to} needs USER=ADDRESS, not {value!r}", value=value)
        pairs[user.strip()] = address_from(address, "mail_to")
    if not pairs:
        if smtp or sender:
            raise ConfigFieldError(
                "{smtp} and {mail_from} need {mail_to} USER=ADDRESS: nobody to mail"
            )
        return (), None, ""
    password = env.get(SMTP_PASSWORD_ENV)
    server = SmtpServer.parse(smtp or DEFAULT_SMTP, Secret(password) if password else None)
    checked_sender = address_from(sender, "mail_from") if sender else f"voicegate@{server.host}"
    return tuple(sorted(pairs.items())), server, checked_sender


def push_contact_from(value: str) -> str:
    """``push_contact`` checked: a ``mailto:`` address or an ``https:`` URL (RFC 8292)."""
    value = value.strip()
    if value and not value.startswith(("mailto:", "https://")):
        raise ConfigFieldError(
            "{push_contact} is a mailto: address or an https URL, not {value!r}", value=value
        )
    return value
