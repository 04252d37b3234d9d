"""The configuration names its own fields when it refuses a value, and knows no flag."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from voicegate.errors import ConfigFieldError
from voicegate.settings import (
    ServerConfig,
    body_timeout_from,
    check_startup,
    push_contact_from,
    rate_limits_from,
    token_from,
    token_ttl_from,
    voice_in_flight_from,
)


@pytest.mark.parametrize(
    ("refuse", "field"),
    [
        (lambda: token_ttl_from("0", {}), "token_ttl"),
        (lambda: token_from("short", {}), "token"),
        (lambda: voice_in_flight_from(0), "max_voice_in_flight"),
        (lambda: body_timeout_from(0.0), "body_timeout"),
        (lambda: rate_limits_from(["window=x"]), "rate_limits"),
        (lambda: push_contact_from("ops"), "push_contact"),
        (lambda: check_startup(ServerConfig(host="0.0.0.0"), store_durable=False), "db"),
    ],
)
def test_a_refused_value_names_its_config_field_and_no_flag(
    refuse: Callable[[], object], field: str
) -> None:
    with pytest.raises(ConfigFieldError) as refused:
        refuse()
    assert field in refused.value.fields
    assert "--" not in str(refused.value)
    assert refused.value.said({field: "--flag"}) != str(refused.value)


def test_a_refused_value_from_the_environment_names_the_variable() -> None:
    with pytest.raises(ConfigFieldError) as refused:
        token_ttl_from(None, {"VOICEGATE_TOKEN_TTL": "soon"})
    assert refused.value.said({"token_ttl": "--token-ttl"}).startswith("VOICEGATE_TOKEN_TTL ")


def test_a_refused_value_the_user_typed_with_braces_is_said_as_typed() -> None:
    with pytest.raises(ConfigFieldError) as refused:
        push_contact_from("{token}")
    assert "'{token}'" in refused.value.said({"token": "--token"})
