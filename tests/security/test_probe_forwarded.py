"""F2: a client's own X-Forwarded-For never moves it to another pairing budget, and only this
server's own names reach a route (DNS rebinding).

A real uvicorn on 127.0.0.1, run as ``voicegate serve`` runs it; uvicorn on its own would trust
X-Forwarded-For from 127.0.0.1, which is exactly where this probe connects from.
"""

from __future__ import annotations

import httpx
import pytest

from tests.device.kit import SigningDevice
from tests.mcp.test_cli_serve import serve_args
from tests.security.probe import PATIENCE, Probe, served
from voicegate.device.pairing import start_pairing
from voicegate.errors import ConfigError
from voicegate.limits import ADDRESS_LIMIT, BODY_TIMEOUT
from voicegate.reasons import Reason
from voicegate.settings import ServerConfig, trusted_proxies_from

WRONG = "0000 0000"
# Another address on this machine's loopback network: the owner's own device.
OWNER_ADDRESS = "127.0.0.2"


async def wrong_code(probe: Probe, forwarded_for: str) -> str:
    device = SigningDevice(probe.http, probe.clock)
    response = await probe.http.post(
        "/device/pair",
        json={"code": WRONG, "public_key": device.public_jwk()},
        headers={"X-Forwarded-For": forwarded_for},
    )
    reason: str = response.json()["reason"]
    return reason


async def owner_pairs(probe: Probe) -> int:
    keys = probe.services.gate.receipt_keys
    code = await start_pairing(
        probe.services.store, probe.config.user, keys=keys, clock=probe.clock
    )
    transport = httpx.AsyncHTTPTransport(local_address=OWNER_ADDRESS)
    base = f"http://127.0.0.1:{probe.port}"
    async with httpx.AsyncClient(transport=transport, base_url=base, timeout=PATIENCE) as http:
        return (await SigningDevice(http, probe.clock).pair(code)).status_code


async def test_the_sixth_wrong_code_from_one_address_is_refused_whatever_it_forwards() -> None:
    async with served() as probe:
        reasons = [await wrong_code(probe, f"198.51.100.{i}") for i in range(1, 31)]
        assert reasons[:ADDRESS_LIMIT] == [Reason.BAD_PAIRING_CODE] * ADDRESS_LIMIT
        assert reasons[ADDRESS_LIMIT:] == [Reason.PAIRING_BUDGET] * (30 - ADDRESS_LIMIT)
        # The thirty claimed addresses spent one address budget, not the global one.
        assert await owner_pairs(probe) == 200


async def test_a_named_proxy_is_trusted_to_say_who_the_client_is() -> None:
    async with served(trusted_proxies=("127.0.0.1",)) as probe:
        # Behind the proxy, six clients on six addresses each have a budget of their own.
        reasons = [await wrong_code(probe, f"198.51.100.{i}") for i in range(1, 7)]
        assert reasons == [Reason.BAD_PAIRING_CODE] * 6
        # and one client behind it runs out of its own.
        again = [await wrong_code(probe, "198.51.100.1") for _ in range(ADDRESS_LIMIT)]
        assert again[-1] == Reason.PAIRING_BUDGET


@pytest.mark.slow
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8800", "192.0.2.1", ""])
async def test_a_foreign_host_reaches_no_route(host: str) -> None:
    async with served() as probe:
        for path in ("/device/pending", "/approve", "/healthz"):
            response = await probe.http.get(path, headers={"Host": host})
            assert response.status_code == 400, (path, host)
        assert (await probe.http.get("/approve")).status_code == 200
        assert (await probe.http.get("/approve", headers={"Host": "localhost"})).status_code == 200


async def test_the_public_urls_host_is_allowed() -> None:
    async with served(public_url="https://gate.example/") as probe:
        allowed = await probe.http.get("/approve", headers={"Host": "gate.example"})
        assert allowed.status_code == 200
        refused = await probe.http.get("/approve", headers={"Host": "other.example"})
        assert refused.status_code == 400


def test_trusted_hosts_are_localhost_and_the_host_clients_are_told_to_use() -> None:
    assert ServerConfig().trusted_hosts() == ["localhost", "127.0.0.1", "::1"]
    public = ServerConfig(host="0.0.0.0", public_url="https://gate.example:8443")
    assert public.trusted_hosts() == ["localhost", "127.0.0.1", "::1", "gate.example"]
    assert ServerConfig(host="192.168.1.5").trusted_hosts()[-1] == "192.168.1.5"
    assert ServerConfig(host="fd00::5").trusted_hosts()[-1] == "fd00::5"
    assert ServerConfig(allowed_hosts=("gate.lan:8800",)).trusted_hosts()[-1] == "gate.lan"


@pytest.mark.parametrize("value", ["*", "0.0.0.0/0", "::/0", "proxy.example", ""])
def test_trusted_proxy_refuses_wildcards_and_names(value: str) -> None:
    with pytest.raises(ConfigError):
        trusted_proxies_from([value])


def test_trusted_proxies_are_addresses_or_networks() -> None:
    assert trusted_proxies_from(None) == ()
    assert trusted_proxies_from(["10.0.0.1", "10.1.0.0/16", "fd00::1"]) == (
        "10.0.0.1",
        "10.1.0.0/16",
        "fd00::1",
    )


def test_serve_flags_name_the_trusted_proxies_and_the_body_deadline() -> None:
    assert serve_args().trusted_proxies == ()
    assert serve_args().body_timeout == BODY_TIMEOUT
    config = serve_args(
        "--trusted-proxy", "10.0.0.1", "--trusted-proxy", "10.1.0.0/16", "--body-timeout", "5"
    )
    assert config.trusted_proxies == ("10.0.0.1", "10.1.0.0/16")
    assert config.body_timeout == 5.0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "301"])
def test_a_body_deadline_outside_its_bounds_is_refused(value: str) -> None:
    with pytest.raises(ConfigError):
        serve_args("--body-timeout", value)
