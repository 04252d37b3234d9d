"""E-mail: each notice for a user the operator gave an address, sent over SMTP.

The mail carries what a push carries, the set's plain summary (each argument value cut at 40
characters), its deadline and a link to the approve page: never the nonce, a token or the whole
arguments, and never a link that answers. Mail
servers are third parties, and a mailbox is not a paired device: the user answers on the page.

The server is named by a URL: ``smtp://host:port`` speaks STARTTLS when the server offers it,
and must (no login, no mail in the clear) unless the host is this machine; ``smtps://`` speaks
TLS from the first byte. ``smtp://user@host`` logs in with the password from
``VOICEGATE_SMTP_PASSWORD``, only over TLS.
"""

from __future__ import annotations

import asyncio
import ipaddress
import smtplib
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from voicegate.errors import ConfigFieldError
from voicegate.notify.notice import Notice
from voicegate.secrets import Secret

# Seconds a connection, a command or a reply may take; a slow server costs only its notice.
TIMEOUT = 10.0
# Seconds one mail may take in all (connect, EHLO, STARTTLS, login, the message: a few replies).
DEADLINE = 6 * TIMEOUT
# Mails sent at once; a notice past them waits its turn.
SENDERS = 2
# Ports when the URL names none: submission with STARTTLS (RFC 6409) and implicit TLS (RFC 8314).
PORTS = {"smtp": 587, "smtps": 465}

__all__ = ["Mail", "SmtpServer"]


@dataclass(frozen=True, slots=True)
class SmtpServer:
    """Where mail goes and how: host, port, implicit TLS or not, and the login if any."""

    host: str
    port: int
    tls: bool
    login: str = ""
    password: Secret | None = None

    @classmethod
    def parse(cls, url: str, password: Secret | None = None) -> SmtpServer:
        """``smtp://[user@]host[:port]`` or ``smtps://...``; else a ``ConfigFieldError``."""
        parts = urllib.parse.urlsplit(url.strip())
        if parts.scheme not in PORTS or not parts.hostname:
            raise ConfigFieldError(
                "{smtp} needs smtp://host[:port] or smtps://..., not {url!r}", url=url
            )
        if parts.password is not None:
            raise ConfigFieldError(
                "{smtp} takes no password in the URL: set VOICEGATE_SMTP_PASSWORD"
            )
        try:
            port = parts.port or PORTS[parts.scheme]
        except ValueError:
            raise ConfigFieldError(
                "{smtp} has a port that is not a number: {url!r}", url=url
            ) from None
        login = urllib.parse.unquote(parts.username or "")
        if login and password is None:
            raise ConfigFieldError(
                "{smtp} logs in as {login!r}: set VOICEGATE_SMTP_PASSWORD", login=login
            )
        return cls(parts.hostname, port, parts.scheme == "smtps", login, password)

    @property
    def local(self) -> bool:
        """Whether the server is this machine, where mail may go without TLS."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


class Mail:
    """Sends each notice whose user has an address in ``to``; others are not mailed."""

    name = "mail"

    def __init__(
        self,
        server: SmtpServer,
        to: Mapping[str, str],
        *,
        sender: str,
        approve_url: str = "",
    ) -> None:
        self.server = server
        self.to = dict(to)
        self.sender = sender
        self.approve_url = approve_url
        self._pool = ThreadPoolExecutor(SENDERS, thread_name_prefix="voicegate-mail")

    async def send(self, notice: Notice) -> None:
        """Mail ``notice`` to its user's address, if the operator gave one."""
        address = self.to.get(notice.user)
        if address is None:
            return
        # Its own threads, not the default pool the voice work shares: a mail server that
        # hangs holds up only mail, and for at most DEADLINE.
        loop = asyncio.get_running_loop()
        delivery = loop.run_in_executor(self._pool, self._deliver, self.message(notice, address))
        await asyncio.wait_for(delivery, DEADLINE)

    def message(self, notice: Notice, address: str) -> EmailMessage:
        """The mail of ``notice`` to ``address``."""
        message = EmailMessage()
        message["From"] = self.sender
        message["To"] = address
        message["Subject"] = _one_line(f"{notice.title()}: {notice.summary}")
        message["Date"] = formatdate(localtime=False)
        message["Message-ID"] = make_msgid(domain="voicegate.invalid")
        deadline = time.strftime("%H:%M:%S UTC", time.gmtime(notice.deadline))
        lines = [notice.title() + ".", "", notice.summary, ""]
        if not notice.outcome:
            lines.append(f"It waits until {deadline}. Answer on your paired device:")
            lines.append(self.approve_url)
            lines.append("")
        lines.append("This mail cannot approve anything; only your paired device can.")
        message.set_content("\n".join(lines) + "\n")
        return message

    async def close(self) -> None:
        """Stop the threads: mails not yet begun are dropped, one under way ends by itself."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _deliver(self, message: EmailMessage) -> None:
        server = self.server
        context = ssl.create_default_context()
        if server.local and not server.login:
            # This machine's own mail server often offers STARTTLS with a self-signed
            # certificate; with nothing to log in and no network between, encrypting without
            # checking it is no worse than not encrypting.
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        client: smtplib.SMTP
        if server.tls:
            client = smtplib.SMTP_SSL(server.host, server.port, timeout=TIMEOUT, context=context)
        else:
            client = smtplib.SMTP(server.host, server.port, timeout=TIMEOUT)
        with client:
            client.ehlo()
            if not server.tls:
                if client.has_extn("starttls"):
                    client.starttls(context=context)
                    client.ehlo()
                elif server.login or not server.local:
                    raise ConnectionError("the SMTP server offers no STARTTLS: nothing sent")
            if server.login and server.password is not None:
                client.login(server.login, server.password.reveal().decode())
            client.send_message(message)


def _one_line(text: str) -> str:
    """``text`` with line breaks as spaces: a header is one line."""
    return " ".join(text.split())
