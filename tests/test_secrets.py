"""Secrets stay masked, compare in constant time, and key rings rotate."""

from __future__ import annotations

import pytest

from voicegate.errors import ConfigError
from voicegate.secrets import KeyRing, Secret, derive_key_id, generate_secret


def test_secret_never_shows_its_value() -> None:
    secret = Secret("hunter2-hunter2-hunter2-hunter2-hunter2")
    for shown in (repr(secret), str(secret), f"{secret}", f"{secret!r}", repr([secret])):
        assert "hunter2" not in shown
    assert repr(secret) == "Secret('**********')"


def test_secret_reveals_bytes_for_str_and_bytes() -> None:
    assert Secret("abc").reveal() == b"abc"
    assert Secret(b"\x00\xff").reveal() == b"\x00\xff"
    assert Secret(Secret("abc")).reveal() == b"abc"


def test_secrets_compare_by_value() -> None:
    assert Secret("same") == Secret(b"same")
    assert Secret("same") != Secret("other")
    assert Secret("same") != "same"


def test_secret_is_not_hashable() -> None:
    with pytest.raises(TypeError):
        hash(Secret("x"))


def test_secret_refuses_other_types() -> None:
    with pytest.raises(TypeError):
        Secret(42)  # type: ignore[arg-type]


def test_generated_secrets_are_long_urlsafe_and_distinct() -> None:
    first, second = generate_secret(), generate_secret()
    assert first != second
    assert len(first.reveal()) == 43
    assert set(first.reveal().decode()) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    )


def test_key_ring_reads_an_env_string_newest_first() -> None:
    new, old = generate_secret(), generate_secret()
    ring = KeyRing(f" k2:{new.reveal().decode()} , k1:{old.reveal().decode()},")
    assert ring.ids == ("k2", "k1")
    assert ring.newest == ("k2", new)
    assert ring.get("k1") == old
    assert ring.get("k3") is None
    assert len(ring) == 2


def test_key_ring_derives_a_stable_id_for_a_bare_secret() -> None:
    secret = generate_secret()
    ring = KeyRing(secret.reveal().decode())
    assert ring.ids == (derive_key_id(secret),)
    assert KeyRing([secret]).ids == ring.ids
    assert KeyRing([generate_secret()]).ids != ring.ids


def test_key_ring_takes_pairs_secrets_and_bytes() -> None:
    a, b, c = generate_secret(), generate_secret(), generate_secret()
    ring = KeyRing([("a", a), b, c.reveal()])
    assert ring.ids[0] == "a"
    assert [secret for _, secret in ring] == [a, b, c]


def test_key_ring_repr_names_ids_only() -> None:
    secret = generate_secret()
    ring = KeyRing([("main", secret)])
    assert secret.reveal().decode() not in repr(ring)
    assert "main" in repr(ring)


@pytest.mark.parametrize(
    "keys",
    [
        "",
        " , ",
        [],
        "short",
        "k1:" + "x" * 31,
        [("bad id!", "x" * 40)],
        [("same", "x" * 40), ("same", "y" * 40)],
    ],
)
def test_unsafe_key_rings_are_refused(keys: str | list[tuple[str, str]]) -> None:
    with pytest.raises(ConfigError):
        KeyRing(keys)


def test_newest_key_signs_and_every_key_verifies() -> None:
    old = KeyRing([("k1", generate_secret())])
    rotated = KeyRing([("k2", generate_secret()), *old])
    key_id, mac = old.sign(b"message")
    assert key_id == "k1"
    assert rotated.verify(b"message", mac, "k1")
    assert rotated.verify(b"message", mac, "renamed")
    assert rotated.verify(b"message", mac)
    assert not rotated.verify(b"message", mac, "k2")
    assert not rotated.verify(b"other", mac, "k1")
    assert rotated.sign(b"message")[0] == "k2"


def test_a_ring_without_the_signing_key_does_not_verify() -> None:
    _, mac = KeyRing.generate().sign(b"message")
    assert not KeyRing.generate().verify(b"message", mac)
