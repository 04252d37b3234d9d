"""An upstream's identity: told apart where its description is alike, with no secret shown."""

from __future__ import annotations

from voicegate.mcp.upstream import UpstreamSpec


def test_two_upstreams_that_describe_alike_have_different_identities() -> None:
    one = UpstreamSpec.from_command("npx -y @acme/notes-server")
    two = UpstreamSpec.from_command("npx -y @acme/payments-server")
    assert one.describe() == two.describe() == "stdio:npx"
    assert one.identity() != two.identity()
    assert one.identity().startswith("stdio:npx#")
    assert UpstreamSpec.from_command("npx -y @acme/notes-server").identity() == one.identity()


def test_an_identity_shows_no_query_or_argument_value() -> None:
    a = UpstreamSpec.from_url("https://mcp.example/api?key=s3cret")
    b = UpstreamSpec.from_url("https://mcp.example/api?key=other")
    assert a.identity() != b.identity()
    assert "s3cret" not in a.identity() and a.identity().startswith("http:https://mcp.example/api#")
    assert "tok3n" not in UpstreamSpec.from_command(["srv", "--token", "tok3n"]).identity()
