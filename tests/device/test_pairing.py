"""Pairing: one-time codes, stored as hashes, guessed no faster than two atomic budgets allow."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from voicegate import limits
from voicegate.clock import ManualClock
from voicegate.device import pairing, signing
from voicegate.device.pairing import complete_pairing, start_pairing
from voicegate.domain import DeviceKind, PairingCode
from voicegate.errors import DeviceRefused
from voicegate.reasons import Reason
from voicegate.secrets import KeyRing
from voicegate.store.base import PairingStore, Store

OWNER = "198.51.100.7"
GUESSER = "203.0.113.66"


def public_key() -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    pem = key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()
    jwk: dict[str, Any] = json.loads(signing.normalise_public_key(pem))
    return jwk


class CountingPairings:
    """The store's pairing codes, counting how often a code is actually checked."""

    def __init__(self, inner: PairingStore) -> None:
        self.inner = inner
        self.checks = 0

    async def add(self, code: PairingCode) -> None:
        await self.inner.add(code)

    async def redeem(self, code_hash: str, now: float) -> PairingCode | None:
        self.checks += 1
        return await self.inner.redeem(code_hash, now)


@pytest.fixture
def counted(store: Store) -> CountingPairings:
    counting = CountingPairings(store.pairings)
    store.pairings = counting
    return counting


def wrong_codes(code: str, n: int) -> list[str]:
    return [f"{(int(code) + 1 + i) % 10**8:08d}" for i in range(n)]


GUESS_KEY = public_key()
KEYS = KeyRing.generate()


async def guess(store: Store, code: str, address: str, clock: ManualClock) -> Reason | None:
    try:
        await complete_pairing(
            store, code, GUESS_KEY, source_address=address, keys=KEYS, clock=clock
        )
    except DeviceRefused as refused:
        return refused.reason
    return None


async def test_code_is_eight_digits_and_stored_only_as_its_hash(
    store: Store, clock: ManualClock
) -> None:
    code = await start_pairing(store, "asha", DeviceKind.TAP, keys=KEYS, clock=clock)
    assert len(code) == 8 and code.isdigit()
    redeemed = await store.pairings.redeem(pairing.hash_code(code, KEYS), clock())
    assert redeemed is not None and redeemed.user == "asha" and redeemed.kind is DeviceKind.TAP
    assert code not in redeemed.code_hash


async def test_right_code_pairs_once_and_stores_only_the_public_key(
    store: Store, clock: ManualClock
) -> None:
    code = await start_pairing(store, "asha", keys=KEYS, clock=clock)
    key = public_key()
    device = await complete_pairing(
        store,
        f"{code[:4]} {code[4:]}",
        key,
        source_address=OWNER,
        keys=KEYS,
        name="  my   phone ",
        clock=clock,
    )
    assert device.user == "asha" and device.kind is DeviceKind.VOICE and device.name == "my phone"
    assert json.loads(device.public_key) == key
    assert await store.devices.get(device.id) == device
    assert await guess(store, code, OWNER, clock) is Reason.BAD_PAIRING_CODE


async def test_expired_code_is_refused(store: Store, clock: ManualClock) -> None:
    code = await start_pairing(store, "asha", keys=KEYS, clock=clock)
    clock.advance(pairing.CODE_TTL + 1)
    assert await guess(store, code, OWNER, clock) is Reason.BAD_PAIRING_CODE


async def test_malformed_key_does_not_burn_the_code(store: Store, clock: ManualClock) -> None:
    code = await start_pairing(store, "asha", keys=KEYS, clock=clock)
    with pytest.raises(DeviceRefused) as caught:
        await complete_pairing(
            store, code, {"kty": "EC"}, source_address=OWNER, keys=KEYS, clock=clock
        )
    assert caught.value.reason is Reason.BAD_REQUEST
    assert await guess(store, code, OWNER, clock) is None


async def test_1000_parallel_guesses_from_one_address_get_five_checks_and_owner_still_pairs(
    store: Store, clock: ManualClock, counted: CountingPairings
) -> None:
    code = await start_pairing(store, "asha", keys=KEYS, clock=clock)
    reasons = await asyncio.gather(
        *(guess(store, c, GUESSER, clock) for c in wrong_codes(code, 1000))
    )
    assert counted.checks == limits.ADDRESS_LIMIT
    assert reasons.count(Reason.BAD_PAIRING_CODE) == limits.ADDRESS_LIMIT
    assert reasons.count(Reason.PAIRING_BUDGET) == 1000 - limits.ADDRESS_LIMIT
    # One guesser never reaches the global budget's last units: the owner pairs at once.
    assert await guess(store, code, OWNER, clock) is None


async def test_1000_parallel_guesses_from_1000_addresses_get_thirty_checks(
    store: Store, clock: ManualClock, counted: CountingPairings
) -> None:
    code = await start_pairing(store, "asha", keys=KEYS, clock=clock)
    guesses = [
        guess(store, c, f"10.{i // 250}.{i % 250}.1", clock)
        for i, c in enumerate(wrong_codes(code, 1000))
    ]
    reasons = await asyncio.gather(*guesses)
    assert counted.checks == limits.GLOBAL_LIMIT
    assert reasons.count(Reason.PAIRING_BUDGET) == 1000 - limits.GLOBAL_LIMIT
    # The owner is held up only until the window turns over, and a fresh code does not help
    # the guessers: it does not reset the budgets.
    assert await guess(store, code, OWNER, clock) is Reason.PAIRING_BUDGET
    fresh = await start_pairing(store, "asha", keys=KEYS, clock=clock)
    assert await guess(store, wrong_codes(fresh, 1)[0], "10.9.9.9", clock) is Reason.PAIRING_BUDGET
    assert counted.checks == limits.GLOBAL_LIMIT
    clock.advance(limits.BUDGET_WINDOW)
    owners_code = await start_pairing(store, "asha", keys=KEYS, clock=clock)
    assert await guess(store, owners_code, OWNER, clock) is None


async def test_new_code_does_not_reset_an_address_budget(
    store: Store, clock: ManualClock, counted: CountingPairings
) -> None:
    code = await start_pairing(store, "asha", keys=KEYS, clock=clock)
    for c in wrong_codes(code, limits.ADDRESS_LIMIT):
        assert await guess(store, c, GUESSER, clock) is Reason.BAD_PAIRING_CODE
    fresh = await start_pairing(store, "asha", keys=KEYS, clock=clock)
    assert await guess(store, fresh, GUESSER, clock) is Reason.PAIRING_BUDGET
    assert counted.checks == limits.ADDRESS_LIMIT


async def test_chosen_pairing_limits_bound_the_checks_in_place_of_the_defaults(
    store: Store, clock: ManualClock, counted: CountingPairings
) -> None:
    tight = limits.PairingLimits(per_address=2, in_all=3, window=60.0)
    code = await start_pairing(store, "asha", keys=KEYS, clock=clock)

    async def attempt(c: str, address: str) -> Reason | None:
        try:
            await complete_pairing(
                store, c, GUESS_KEY, source_address=address, keys=KEYS, clock=clock, limits=tight
            )
        except DeviceRefused as refused:
            return refused.reason
        return None

    wrong = wrong_codes(code, 4)
    assert [await attempt(c, GUESSER) for c in wrong[:3]] == [
        Reason.BAD_PAIRING_CODE,
        Reason.BAD_PAIRING_CODE,
        Reason.PAIRING_BUDGET,
    ]
    assert await attempt(wrong[3], "10.0.0.1") is Reason.BAD_PAIRING_CODE
    assert await attempt(code, OWNER) is Reason.PAIRING_BUDGET
    assert counted.checks == tight.in_all
    clock.advance(tight.window)
    assert await attempt(code, OWNER) is None


def test_pairing_limits_must_be_positive() -> None:
    for bad in ({"per_address": 0}, {"in_all": -1}, {"window": 0.0}):
        with pytest.raises(ValueError):
            limits.PairingLimits(**bad)


def test_ipv6_addresses_share_a_budget_per_64_network() -> None:
    a = pairing.address_key("2001:db8:1:2::1")
    b = pairing.address_key("2001:db8:1:2:ffff::9")
    c = pairing.address_key("2001:db8:1:3::1")
    assert a == b != c
    assert pairing.address_key("::ffff:192.0.2.1") == "192.0.2.1"


async def test_a_code_hashed_under_another_install_s_keys_does_not_pair(
    store: Store, clock: ManualClock
) -> None:
    code = await start_pairing(store, "asha", keys=KeyRing.generate(), clock=clock)
    with pytest.raises(DeviceRefused) as caught:
        await complete_pairing(
            store, code, public_key(), source_address=OWNER, keys=KEYS, clock=clock
        )
    assert caught.value.reason is Reason.BAD_PAIRING_CODE


def test_the_stored_hash_depends_on_the_install_s_key() -> None:
    other = KeyRing.generate()
    assert pairing.hash_code("12345678", KEYS) != pairing.hash_code("12345678", other)
    assert pairing.hash_code("1234 5678", KEYS) == pairing.hash_code("12345678", KEYS)
    # The pairing key is derived, never the key that signs receipts and tokens itself.
    _, newest = KEYS.newest
    assert pairing.pairing_key(KEYS).reveal() != newest.reveal()
