"""The VAPID key is made once and kept like the other server keys."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from voicegate.errors import ConfigError
from voicegate.notify import vapid
from voicegate.settings import push_contact_from


def test_a_sqlite_stores_vapid_key_is_made_once_beside_it_and_kept_private(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "gate.db")
    first = vapid.vapid_for(db, env={})
    path = tmp_path / "gate.db.vapid"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert vapid.public_key(vapid.vapid_for(db, env={})) == vapid.public_key(first)


def test_replicas_share_the_key_named_in_the_environment(tmp_path: Path) -> None:
    key = vapid.generate()
    env = {vapid.VAPID_ENV: key.reveal().decode()}
    assert vapid.public_key(vapid.vapid_for("memory", env)) == vapid.public_key(key)
    assert not (tmp_path / "gate.db.vapid").exists()


def test_a_memory_store_gets_a_fresh_key_each_start() -> None:
    one, two = vapid.vapid_for("memory", env={}), vapid.vapid_for("memory", env={})
    assert vapid.public_key(one) != vapid.public_key(two)
    assert len(vapid.public_key(one)) == 87  # 65 bytes, base64url without padding


def test_a_key_that_is_not_p256_is_refused_at_start() -> None:
    with pytest.raises(ConfigError):
        vapid.vapid_for("memory", env={vapid.VAPID_ENV: "not a key"})


@pytest.mark.parametrize("contact", ["ops@example.org", "http://example.org"])
def test_a_push_contact_is_a_mailto_or_https_uri(contact: str) -> None:
    with pytest.raises(ConfigError):
        push_contact_from(contact)
    assert push_contact_from("mailto:ops@example.org") == "mailto:ops@example.org"
