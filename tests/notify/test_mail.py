"""Mail: each notice of a user the operator gave an address, to a real local SMTP server
(aiosmtpd), holding the plain summary and a link to the page, never the nonce, a token or a
way to approve."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from tests.security.kit import TOKEN, held, world
from voicegate.domain import Risk
from voicegate.errors import ConfigError
from voicegate.gate.core import ActionRequest
from voicegate.notify.mail import Mail, SmtpServer
from voicegate.notify.notice import Event, Notice
from voicegate.secrets import Secret
from voicegate.settings import SMTP_PASSWORD_ENV, mail_from
from voicegate.web.serve import free_port


@dataclass
class Inbox:
    """What the SMTP server accepted, and the reply it gives each DATA."""

    reply: str = "250 OK"
    mails: list[tuple[list[str], EmailMessage]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.reply.startswith("250"):
            parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
            assert isinstance(parsed, EmailMessage)
            self.mails.append((list(envelope.rcpt_tos), parsed))
        return self.reply


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    handler = Inbox()
    port = free_port("127.0.0.1")
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()


def mail_config(port: int) -> dict[str, Any]:
    return {
        "mail_to": (("owner", "owner@example.org"),),
        "smtp": SmtpServer("127.0.0.1", port, tls=False),
        "mail_from": "gate@example.org",
    }


async def test_each_notice_reaches_the_users_mailbox_without_secrets(
    inbox: tuple[Inbox, int],
) -> None:
    box, port = inbox
    async with held(world(**mail_config(port))) as w:
        pending = await w.services.gate.propose(
            "owner",
            [ActionRequest("write_note", {"name": "bank", "text": "pin 4921"})],
            risk=Risk.LOW,
        )
        await w.assembly.dispatcher.drain()
        body = {"pending_id": pending.id, "nonce": pending.nonce, "decision": "choose", "card": 1}
        assert (await w.device.post_json("/device/tap", body)).json()["released"] is True
        await w.assembly.dispatcher.drain()
    assert [to for to, _ in box.mails] == [["owner@example.org"], ["owner@example.org"]]
    (_, new), (_, done) = box.mails
    summary = "Write note with name “bank” and text “pin 4921”."
    assert new["Subject"] == f"Waiting for your answer: {summary}"
    assert new["From"] == "gate@example.org" and done["Subject"] == f"Done: {summary}"
    text = new.get_content()
    assert summary in text and text.count("/approve") == 1
    assert "only your paired device" in text and "/approve" not in done.get_content()
    for _, mail in box.mails:
        raw = mail.as_string()
        assert pending.nonce not in raw and TOKEN not in raw
        assert "4921" not in raw.replace(summary, "").replace("pin 4921", "")


async def test_a_user_without_an_address_gets_no_mail(inbox: tuple[Inbox, int]) -> None:
    box, port = inbox
    async with held(world(**mail_config(port))) as w:
        await w.services.gate.propose(
            "someone-else", [ActionRequest("write_note", {"name": "a", "text": "b"})], risk=Risk.LOW
        )
        await w.assembly.dispatcher.drain()
    assert box.mails == []


async def test_a_mail_server_that_refuses_costs_the_card_nothing(
    inbox: tuple[Inbox, int],
) -> None:
    box, port = inbox
    box.reply = "554 Transaction failed"
    async with held(world(**mail_config(port))) as w:
        pending = await w.services.gate.propose(
            "owner", [ActionRequest("write_note", {"name": "a", "text": "b"})], risk=Risk.LOW
        )
        await w.assembly.dispatcher.drain()
        (waiting,) = (await w.device.get("/device/pending")).json()["sets"]
        assert waiting["id"] == pending.id
    assert box.mails == []


def test_the_flags_name_users_addresses_server_and_sender() -> None:
    to, server, sender = mail_from(
        ["owner=ana@example.org", "bo=bo@example.org"], "smtp://relay.example.org", None, {}
    )
    assert to == (("bo", "bo@example.org"), ("owner", "ana@example.org"))
    assert server == SmtpServer("relay.example.org", 587, tls=False)
    assert sender == "voicegate@relay.example.org"
    assert mail_from(None, None, None, {}) == ((), None, "")
    _, local, _ = mail_from(["owner=ana@example.org"], None, "gate@example.org", {})
    assert local is not None and local.local and (local.host, local.port) == ("localhost", 25)
    _, login, _ = mail_from(
        ["owner=ana@example.org"], "smtps://gate%40example.org@mail.example.org", None,
        {SMTP_PASSWORD_ENV: "s3cret"},
    )  # fmt: skip
    assert login is not None and login.tls and login.port == 465
    assert login.login == "gate@example.org" and login.password == Secret("s3cret")
    assert not login.local


@pytest.mark.parametrize(
    ("to", "smtp", "sender", "says"),
    [
        (["owner"], None, None, "USER=ADDRESS"),
        (["owner=not-an-address"], None, None, "e-mail address"),
        (["owner=a b@example.org"], None, None, "e-mail address"),
        (["owner=Ana <ana@example.org>"], None, None, "e-mail address"),
        (["owner=ana@example.org\nBcc: x@example.org"], None, None, "e-mail address"),
        (None, "smtp://relay.example.org", None, "nobody to mail"),
        (["owner=ana@example.org"], "http://relay.example.org", None, "smtp://"),
        (["owner=ana@example.org"], "smtp://u:pw@relay.example.org", None, "no password"),
        (["owner=ana@example.org"], "smtp://u@relay.example.org", None, "SMTP_PASSWORD"),
        (["owner=ana@example.org"], "smtp://relay.example.org:x", None, "port"),
        (["owner=ana@example.org"], None, "gate", "mail_from"),
    ],
)
def test_a_mail_flag_that_cannot_work_is_refused_at_start(
    to: list[str] | None, smtp: str | None, sender: str | None, says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        mail_from(to, smtp, sender, {})


async def test_a_login_is_never_sent_in_the_clear(inbox: tuple[Inbox, int]) -> None:
    box, port = inbox
    server = SmtpServer("127.0.0.1", port, tls=False, login="gate", password=Secret("pw"))
    mail = Mail(server, {"owner": "owner@example.org"}, sender="gate@example.org")
    notice = Notice(Event.NEW, "owner", "p1", "Write note.", deadline=0.0, tap=True)
    with pytest.raises(ConnectionError, match="STARTTLS"):
        await mail.send(notice)
    assert box.mails == []
