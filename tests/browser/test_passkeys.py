"""Passkeys on the approve page in real Chromium, with the DevTools protocol's virtual
authenticator (``WebAuthn.addVirtualAuthenticator``: ctap2, internal, user verification).

The page registers a passkey and approves a high-risk card's passkey step with it. Assertions
replayed on a second card, made over changed arguments, made without user verification, from
another origin or with the counter gone backwards are each refused by name, and nothing runs.
What the browser cannot do (no WebAuthn, a closed prompt, a page at another address than the
RP id, no passkey registered) is a refusal by name too. axe-core audits every new state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.kit import (
    NOTES,
    Server,
    approve_button,
    expect,
    expect_success,
    open_page,
    pair,
    result_box,
)
from tests.browser.test_accessibility import AXE, NARROW, audit
from tests.conftest import require
from voicegate import passkey
from voicegate.canonical import args_hash
from voicegate.domain import HighRiskStep, PendingSet, Risk
from voicegate.gate.checks import passkey_challenge
from voicegate.reasons import Reason

pytestmark = pytest.mark.browser

AUTHENTICATOR = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
    "automaticPresenceSimulation": True,
}
# An assertion made in the page with a challenge the test picks, as a page's script could.
GET = """async ([challenge, rpId, uv]) => {
  const dec = (t) => Uint8Array.from(
    atob(t.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((t.length + 3) % 4)),
    (c) => c.charCodeAt(0));
  const enc = (b) => btoa(String.fromCharCode(...new Uint8Array(b)))
    .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  const c = await navigator.credentials.get({ publicKey: {
    challenge: dec(challenge), rpId, userVerification: uv } });
  return { id: c.id, rawId: enc(c.rawId), type: c.type, response: {
    clientDataJSON: enc(c.response.clientDataJSON),
    authenticatorData: enc(c.response.authenticatorData),
    signature: enc(c.response.signature) } };
}"""
# A signed answer from this page's own device key, with any body.
POST = """async ([path, body]) => {
  const device = await import("/approve/device.js");
  const response = await device.postJson(path, body);
  return await response.json();
}"""
# Every /device/passkey body the page sends, kept for the test to replay.
KEEP_SENT = """(() => {
  const real = window.fetch.bind(window);
  window.sentPasskeys = [];
  window.fetch = async (input, init) => {
    if (String(input).endsWith("/device/passkey")) {
      window.sentPasskeys.push(JSON.parse(new TextDecoder().decode(init.body)));
    }
    return real(input, init);
  };
})();"""
NO_WEBAUTHN = "delete window.PublicKeyCredential;"


@pytest.fixture
def passkey_step(server: Server) -> Iterator[None]:
    server.step = HighRiskStep.PASSKEY
    yield
    server.step = HighRiskStep.YES


def authenticator(page: Any) -> tuple[Any, str]:
    """A virtual platform authenticator in ``page``'s browser: its CDP session and id."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable", {"enableUI": False})
    found = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})
    return cdp, str(found["authenticatorId"])


def register(page: Any, server: Server, user: str) -> None:
    before = len(server.run(server.store.passkeys.list(user)))
    page.get_by_role("button", name="Add a passkey").click()
    expect(page.locator("#passkey-status")).to_contain_text("Added")
    assert len(server.run(server.store.passkeys.list(user))) == before + 1
    expect(page.locator("#passkeys li")).to_have_count(before + 1)


def at_passkey_step(page: Any, server: Server, user: str) -> PendingSet:
    """A high-risk card for ``user``, chosen on the page: the card at its passkey step."""
    proposed = server.run(server.gate.propose(user, NOTES[:1], risk=Risk.HIGH))
    approve_button(page, proposed).click()
    expect(page.locator(f'[data-pending-id="{proposed.id}"].final')).to_contain_text("passkey")
    stepped = server.run(server.gate.status(proposed.id))
    assert stepped.stage == "passkey"
    return stepped


def refused_on_page(page: Any, reason: Reason, pending: PendingSet) -> None:
    result = result_box(page, pending)
    expect(result).to_have_attribute("data-reason", reason.value)
    expect(result).to_have_attribute("data-released", "false")
    expect(result.locator(".no")).to_have_text("Nothing ran.")


def sign_in_page(page: Any, challenge: bytes, uv: str = "required") -> dict[str, Any]:
    made: dict[str, Any] = page.evaluate(GET, [passkey.b64url(challenge), "localhost", uv])
    return made


def answer(page: Any, pending: PendingSet, credential: dict[str, Any]) -> dict[str, Any]:
    body = {"pending_id": pending.id, "nonce": pending.nonce, "credential": credential}
    sent: dict[str, Any] = page.evaluate(POST, ["/device/passkey", body])
    return sent


def ran(server: Server) -> int:
    return len(server.executed.calls)


@contextlib.contextmanager
def local_page(browser: Any, server: Server, scheme: str = "light", **kw: Any) -> Iterator[Any]:
    with open_page(browser, server, scheme, url=kw.pop("url", server.local_url), **kw) as page:
        yield page


def test_a_passkey_registered_on_the_page_approves_a_high_risk_card(
    browser: Any, server: Server, passkey_step: None
) -> None:
    with local_page(browser, server) as page:
        authenticator(page)
        pair(page, server, user="pk-owner")
        expect(page.locator("#passkeys-empty")).to_be_visible()
        page.get_by_label("Name for a new passkey").fill("my phone")
        register(page, server, "pk-owner")
        (stored,) = server.run(server.store.passkeys.list("pk-owner"))
        assert stored.name == "my phone"
        stepped = at_passkey_step(page, server, "pk-owner")
        before = ran(server)
        expect(result_box(page, stepped)).to_contain_text("confirm with your passkey")
        approve_button(page, stepped).click()
        expect_success(page, "write_note 'shopping'")
        assert ran(server) == before + 1
        receipt = server.run(server.gate.receipts("pk-owner"))[-1]
        assert receipt.passkey is not None and receipt.passkey.id == stored.id
        assert receipt.passkey.user_verified and receipt.passkey.origin == server.local_url
        assert [c.name for c in receipt.checks if c.name == "passkey_verified"] == [
            "passkey_verified"
        ]


def test_a_replayed_changed_or_unverified_assertion_is_refused_and_nothing_runs(
    browser: Any, server: Server, passkey_step: None
) -> None:
    with local_page(browser, server) as page:
        page.add_init_script(KEEP_SENT)
        cdp, authenticator_id = authenticator(page)
        pair(page, server, user="pk-replay")
        register(page, server, "pk-replay")
        first = at_passkey_step(page, server, "pk-replay")
        approve_button(page, first).click()
        expect_success(page, "write_note 'shopping'")
        (sent,) = page.evaluate("window.sentPasskeys")
        second = at_passkey_step(page, server, "pk-replay")
        before = ran(server)

        replayed = answer(page, second, sent["credential"])
        assert replayed["reason"] == Reason.PASSKEY_MISMATCH

        action = second.actions[0]
        changed = args_hash({"tool": action.tool, "arguments": {**action.arguments, "text": "gin"}})
        made = sign_in_page(page, passkey.challenge(second.id, second.nonce, changed))
        assert answer(page, second, made)["reason"] == Reason.PASSKEY_MISMATCH

        cdp.send(
            "WebAuthn.setUserVerified",
            {"authenticatorId": authenticator_id, "isUserVerified": False},
        )
        unverified = sign_in_page(page, passkey_challenge(second, action), uv="discouraged")
        assert answer(page, second, unverified)["reason"] == Reason.PASSKEY_NOT_VERIFIED
        assert ran(server) == before
        assert server.run(server.gate.status(second.id)).status == "waiting"


def test_an_assertion_from_another_origin_is_refused(
    browser: Any, server: Server, passkey_step: None
) -> None:
    # The same passkey, in a page of the same RP id on another port: a look-alike copy.
    with (
        local_page(browser, server) as page,
        local_page(browser, server, url=server.other_url) as other,
    ):
        cdp, authenticator_id = authenticator(page)
        copy_cdp, copy_id = authenticator(other)
        pair(other, server, user="pk-origin")
        pair(page, server, user="pk-origin")
        register(page, server, "pk-origin")
        found = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator_id})
        (credential,) = found["credentials"]
        copy_cdp.send(
            "WebAuthn.addCredential", {"authenticatorId": copy_id, "credential": credential}
        )
        stepped = at_passkey_step(page, server, "pk-origin")
        before = ran(server)
        made = sign_in_page(other, passkey_challenge(stepped, stepped.actions[0]))
        assert answer(other, stepped, made)["reason"] == Reason.PASSKEY_WRONG_ORIGIN
        assert ran(server) == before


def test_a_counter_gone_backwards_is_refused(
    browser: Any, server: Server, passkey_step: None
) -> None:
    with local_page(browser, server) as page:
        cdp, authenticator_id = authenticator(page)
        pair(page, server, user="pk-clone")
        register(page, server, "pk-clone")
        first = at_passkey_step(page, server, "pk-clone")
        approve_button(page, first).click()
        expect_success(page, "write_note 'shopping'")
        (stored,) = server.run(server.store.passkeys.list("pk-clone"))
        assert stored.sign_count >= 1
        found = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator_id})
        (credential,) = found["credentials"]
        cdp.send(
            "WebAuthn.removeCredential",
            {"authenticatorId": authenticator_id, "credentialId": credential["credentialId"]},
        )
        behind = {**credential, "signCount": 0}
        cdp.send(
            "WebAuthn.addCredential", {"authenticatorId": authenticator_id, "credential": behind}
        )
        second = at_passkey_step(page, server, "pk-clone")
        before = ran(server)
        approve_button(page, second).click()
        refused_on_page(page, Reason.PASSKEY_COUNTER, second)
        assert ran(server) == before


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("no passkey", Reason.NO_PASSKEY),
        ("no webauthn", Reason.PASSKEY_UNSUPPORTED),
        ("prompt closed", Reason.PASSKEY_CANCELLED),
        ("page at 127.0.0.1", Reason.PASSKEY_WRONG_RP),
    ],
)
def test_a_step_that_cannot_be_taken_says_why_and_runs_nothing(
    browser: Any, server: Server, passkey_step: None, case: str, reason: Reason
) -> None:
    user = "pk-" + case.replace(" ", "-").replace(".", "")
    url = server.url if case == "page at 127.0.0.1" else server.local_url
    with contextlib.ExitStack() as pages:
        page = pages.enter_context(local_page(browser, server, url=url))
        if case == "no webauthn":
            page.add_init_script(NO_WEBAUTHN)
        cdp, authenticator_id = authenticator(page)
        if case != "no passkey":
            # Registered on the passkeys' own address, so that only the case differs.
            home = pages.enter_context(local_page(browser, server))
            authenticator(home)
            pair(home, server, user=user)
            register(home, server, user)
        pair(page, server, user=user)
        if case == "prompt closed":
            cdp.send("WebAuthn.clearCredentials", {"authenticatorId": authenticator_id})
        stepped = at_passkey_step(page, server, user)
        before = ran(server)
        approve_button(page, stepped).click()
        refused_on_page(page, reason, stepped)
        assert ran(server) == before


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_in_the_passkey_states(
    browser: Any, server: Server, passkey_step: None, scheme: str
) -> None:
    require(AXE.exists(), "axe-core from npm (npm install, as scripts/setup-dev does)")
    axe_source = AXE.read_text(encoding="utf-8")
    found: dict[str, list[dict[str, Any]]] = {}
    user = f"pk-axe-{scheme}"
    with local_page(browser, server, scheme, width=NARROW) as page:

        def check(state: str) -> None:
            found[state] = audit(page, axe_source, state, scheme)

        cdp, authenticator_id = authenticator(page)
        pair(page, server, user=user)
        expect(page.locator("#passkeys-empty")).to_be_visible()
        check("15-passkeys-none")
        register(page, server, user)
        check("16-passkey-added")
        stepped = at_passkey_step(page, server, user)
        check("17-passkey-step")
        cdp.send("WebAuthn.clearCredentials", {"authenticatorId": authenticator_id})
        approve_button(page, stepped).click()
        refused_on_page(page, Reason.PASSKEY_CANCELLED, stepped)
        check("18-passkey-refused")
        server.run(server.gate.cancel(stepped.id, user=user))
    assert found == {state: [] for state in found}
