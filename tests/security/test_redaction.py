"""A database password never shows in a configuration's repr or in the banner the demo prints."""

from __future__ import annotations

import pytest

from voicegate.cli.serve import demo_banner
from voicegate.secrets import Secret
from voicegate.settings import ServerConfig
from voicegate.store import open_store

DSN = "postgresql://vg:hunter2@db.internal:5432/gate"
TOKEN = "server-config-bearer-token-0123456789"


def test_server_config_repr_masks_the_database_password_and_the_token() -> None:
    shown = repr(ServerConfig(db=DSN, token=Secret(TOKEN)))
    assert "hunter2" not in shown and TOKEN not in shown
    assert "db='postgresql://vg:***@db.internal:5432/gate'" in shown


def test_server_config_repr_keeps_a_path_without_a_password_as_it_is() -> None:
    assert "db='/var/lib/vg/gate.db'" in repr(ServerConfig(db="/var/lib/vg/gate.db"))


async def test_demo_banner_masks_the_database_password(capsys: pytest.CaptureFixture[str]) -> None:
    store = await open_store("memory")
    try:
        await demo_banner(ServerConfig(db=DSN, token=Secret(TOKEN)), store, None)
    finally:
        await store.close()
    printed = capsys.readouterr().out
    assert "hunter2" not in printed
    assert "postgresql://vg:***@db.internal:5432/gate" in printed
