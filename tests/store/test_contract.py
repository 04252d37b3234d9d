"""One contract suite, run against every backend in ``STORE_FACTORIES``."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from voicegate.domain import (
    Action,
    Check,
    Device,
    DeviceKind,
    Grant,
    PairingCode,
    Passkey,
    PendingSet,
    PushSubscription,
    Receipt,
    Risk,
    Stage,
    Status,
    StoredFingerprint,
    StoredTemplate,
)
from voicegate.receipts import (
    LEGACY,
    ChainHead,
    ProblemKind,
    seal,
    verify_chain,
    verify_heads,
)
from voicegate.secrets import KeyRing, generate_secret
from voicegate.store import PostgresStore, SqliteStore, open_store
from voicegate.store.base import Store

Factory = Callable[[pytest.FixtureRequest], Awaitable[Store]]

RECEIPT_KEYS = KeyRing([("r1", generate_secret())])


async def memory(request: pytest.FixtureRequest) -> Store:
    return await open_store("memory")


async def sqlite(request: pytest.FixtureRequest) -> Store:
    return await open_store(str(request.getfixturevalue("tmp_path") / "gate.db"))


async def postgres(request: pytest.FixtureRequest) -> Store:
    return await open_store(request.getfixturevalue("pg_url"))


STORE_FACTORIES = [
    pytest.param(memory, id="memory"),
    pytest.param(sqlite, id="sqlite"),
    pytest.param(postgres, id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=STORE_FACTORIES)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    opened = await request.param(request)
    yield opened
    await opened.close()


SqlStore = SqliteStore | PostgresStore


@pytest.fixture(params=[p for p in STORE_FACTORIES if p.id != "memory"])
async def durable(request: pytest.FixtureRequest) -> AsyncIterator[SqlStore]:
    """A store with a database someone else can edit: receipts can go behind its back.

    The memory store has none; what a process does to its own memory no store can guard.
    """
    opened = await request.param(request)
    assert isinstance(opened, SqliteStore | PostgresStore)
    yield opened
    await opened.close()


def pending(
    pending_id: str = "p1", user: str = "ann", created_at: float = 100.0, **changes: object
) -> PendingSet:
    action = Action(
        tool="send_email",
        arguments={"to": "bob@example.org", "amount": 12.5, "tags": ["a", "b"]},
        args_hash="h" * 64,
        card_text="Send an email to bob@example.org",
        target="bob",
    )
    base = PendingSet(
        id=pending_id,
        user=user,
        actions=(action,),
        risk=Risk.HIGH,
        stage=Stage.CHOOSE,
        nonce="n-" + pending_id,
        created_at=created_at,
        deadline=created_at + 120,
        ttl=120.0,
        preview="one email",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def device(device_id: str, user: str = "ann", created_at: float = 1.0) -> Device:
    return Device(device_id, user, DeviceKind.VOICE, "pk-" + device_id, "ed25519", created_at)


def receipt_maker(user: str, pending_id: str = "p1") -> Callable[[int, str], Receipt]:
    """A ``make`` that seals each receipt with ``RECEIPT_KEYS``, so a broken chain shows."""

    def make(seq: int, prev: str) -> Receipt:
        return seal(
            Receipt(
                id=str(uuid.uuid4()),
                user=user,
                seq=seq,
                prev_digest=prev,
                pending_id=pending_id,
                tool="send_email",
                arguments={"to": "bob@example.org"},
                args_hash="h" * 64,
                card_text="Send an email",
                risk=Risk.LOW,
                mode="device",
                outcome="confirmed",
                proposed_at=1.0,
                decided_at=2.0,
                executed_at=3.0,
                checks=(Check("nonce", True),),
            ),
            RECEIPT_KEYS,
        )

    return make


def assert_chain(receipts: list[Receipt]) -> None:
    assert [r.seq for r in receipts] == list(range(1, len(receipts) + 1))
    assert [r.prev_digest for r in receipts] == ["", *(r.digest for r in receipts[:-1])]


async def test_store_says_whether_it_survives_a_restart(store: Store) -> None:
    assert store.durable is (type(store).__name__ != "MemoryStore")


# pending sets


async def test_created_set_reads_back_unchanged(store: Store) -> None:
    created = pending(result={"id": 7, "ok": True})
    await store.pending.create(created)
    assert await store.pending.get("p1") == created


async def test_creating_an_existing_id_raises_value_error(store: Store) -> None:
    await store.pending.create(pending())
    with pytest.raises(ValueError):
        await store.pending.create(pending(user="eve"))


async def test_unknown_set_reads_as_none(store: Store) -> None:
    assert await store.pending.get("nope") is None


async def test_swap_from_the_current_version_stores_the_new_set(store: Store) -> None:
    old = pending()
    await store.pending.create(old)
    new = old.replace(stage=Stage.FINAL, nonce="n2", chosen=1)
    assert await store.pending.swap(old, new) is True
    assert await store.pending.get("p1") == new


async def test_swap_from_a_stale_version_loses(store: Store) -> None:
    old = pending()
    await store.pending.create(old)
    first = old.replace(status=Status.CANCELLED)
    assert await store.pending.swap(old, first)
    assert await store.pending.swap(old, old.replace(status=Status.EXECUTING)) is False
    assert await store.pending.get("p1") == first


async def test_swap_of_an_unknown_set_loses(store: Store) -> None:
    old = pending()
    assert await store.pending.swap(old, old.replace(status=Status.EXECUTING)) is False


async def test_swap_that_does_not_bump_the_version_by_one_is_refused(store: Store) -> None:
    old = pending()
    await store.pending.create(old)
    with pytest.raises(ValueError):
        await store.pending.swap(old, dataclasses.replace(old, version=old.version + 2))


async def test_exactly_one_of_fifty_concurrent_swaps_wins(store: Store) -> None:
    old = pending()
    await store.pending.create(old)
    rivals = [old.replace(result=k) for k in range(50)]
    wins = await asyncio.gather(*(store.pending.swap(old, new) for new in rivals))
    assert wins.count(True) == 1
    stored = await store.pending.get("p1")
    assert stored == rivals[wins.index(True)]


async def test_sets_of_a_user_list_oldest_first_and_only_open_ones_by_default(
    store: Store,
) -> None:
    await store.pending.create(pending("late", created_at=300.0))
    await store.pending.create(pending("early", created_at=100.0))
    await store.pending.create(pending("done", created_at=200.0, status=Status.CONFIRMED))
    await store.pending.create(pending("other", user="bob"))
    assert [p.id for p in await store.pending.list_for_user("ann")] == ["early", "late"]
    everything = await store.pending.list_for_user("ann", open_only=False)
    assert [p.id for p in everything] == ["early", "done", "late"]


async def test_sets_list_by_status(store: Store) -> None:
    await store.pending.create(pending("a", status=Status.EXECUTING, created_at=2.0))
    await store.pending.create(pending("b", user="bob", status=Status.EXECUTING, created_at=1.0))
    await store.pending.create(pending("c"))
    assert [p.id for p in await store.pending.list_by_status(Status.EXECUTING)] == ["b", "a"]
    assert await store.pending.list_by_status(Status.UNKNOWN) == []


async def test_pruning_deletes_old_sets_and_their_cards_but_keeps_executing_ones(
    store: Store,
) -> None:
    await store.pending.create(pending("done", created_at=10.0, status=Status.CONFIRMED))
    await store.pending.create(pending("stale", user="bob", created_at=20.0))
    await store.pending.create(pending("running", created_at=30.0, status=Status.EXECUTING))
    await store.pending.create(pending("new", created_at=200.0, status=Status.CANCELLED))
    assert await store.pending.prune(100.0) == 2
    assert await store.pending.get("done") is None
    assert await store.pending.list_for_user("bob", open_only=False) == []
    kept = await store.pending.list_for_user("ann", open_only=False)
    assert [p.id for p in kept] == ["running", "new"]
    assert await store.pending.prune(100.0) == 0


# ledger


async def test_key_is_consumed_only_the_first_time(store: Store) -> None:
    assert await store.ledger.consume("nonce-1", expires_at=500.0) is True
    assert await store.ledger.consume("nonce-1", expires_at=500.0) is False
    assert await store.ledger.consume("nonce-2", expires_at=500.0) is True


async def test_one_of_a_hundred_concurrent_consumes_succeeds(store: Store) -> None:
    spent = await asyncio.gather(
        *(store.ledger.consume("token-7", expires_at=500.0) for _ in range(100))
    )
    assert spent.count(True) == 1


async def test_pruning_forgets_only_expired_keys(store: Store) -> None:
    await store.ledger.consume("old", expires_at=10.0)
    await store.ledger.consume("live", expires_at=50.0)
    assert await store.ledger.prune(20.0) == 1
    assert await store.ledger.consume("live", expires_at=50.0) is False
    assert await store.ledger.consume("old", expires_at=10.0) is True


# devices


async def test_device_reads_back_and_a_duplicate_id_is_refused(store: Store) -> None:
    phone = device("d1")
    await store.devices.add(phone)
    assert await store.devices.get("d1") == phone
    assert await store.devices.get("d9") is None
    with pytest.raises(ValueError):
        await store.devices.add(device("d1", user="eve"))


async def test_devices_list_per_user_oldest_first(store: Store) -> None:
    await store.devices.add(device("d2", created_at=2.0))
    await store.devices.add(device("d1", created_at=1.0))
    await store.devices.add(device("b1", user="bob", created_at=3.0))
    assert [d.id for d in await store.devices.list("ann")] == ["d1", "d2"]
    assert [d.id for d in await store.devices.list()] == ["d1", "d2", "b1"]
    assert await store.devices.list("nobody") == []


async def test_revoking_marks_a_device_once(store: Store) -> None:
    await store.devices.add(device("d1"))
    assert await store.devices.revoke("d1", 42.0) is True
    assert await store.devices.revoke("d1", 43.0) is False
    assert await store.devices.revoke("d9", 43.0) is False
    revoked = await store.devices.get("d1")
    assert revoked is not None and revoked.revoked_at == 42.0


# pairing codes


async def test_pairing_code_redeems_once(store: Store) -> None:
    code = PairingCode("hash-1", "ann", DeviceKind.TAP, expires_at=100.0)
    await store.pairings.add(code)
    assert await store.pairings.redeem("hash-1", now=50.0) == code
    assert await store.pairings.redeem("hash-1", now=50.0) is None


async def test_expired_pairing_code_does_not_redeem(store: Store) -> None:
    await store.pairings.add(PairingCode("hash-1", "ann", DeviceKind.TAP, expires_at=100.0))
    assert await store.pairings.redeem("hash-1", now=100.0) is None
    assert await store.pairings.redeem("unknown", now=0.0) is None


async def test_one_of_twenty_concurrent_redeems_gets_the_code(store: Store) -> None:
    await store.pairings.add(PairingCode("hash-1", "ann", DeviceKind.VOICE, expires_at=100.0))
    got = await asyncio.gather(*(store.pairings.redeem("hash-1", now=1.0) for _ in range(20)))
    assert sum(code is not None for code in got) == 1


# budgets


async def test_two_hundred_concurrent_takes_never_exceed_the_limit(store: Store) -> None:
    taken = await asyncio.gather(
        *(store.budgets.take("guess:ann", limit=7, window=60.0, now=125.0) for _ in range(200))
    )
    assert taken.count(True) == 7


async def test_a_new_window_refills_the_budget(store: Store) -> None:
    for _ in range(3):
        assert await store.budgets.take("k", limit=3, window=60.0, now=61.0)
    assert await store.budgets.take("k", limit=3, window=60.0, now=119.0) is False
    assert await store.budgets.take("k", limit=3, window=60.0, now=120.0) is True


async def test_a_take_from_an_older_window_counts_against_the_current_one(store: Store) -> None:
    assert await store.budgets.take("k", limit=2, window=60.0, now=130.0)
    assert await store.budgets.take("k", limit=2, window=60.0, now=70.0)
    assert await store.budgets.take("k", limit=2, window=60.0, now=70.0) is False
    assert await store.budgets.take("k", limit=2, window=60.0, now=130.0) is False


async def test_budgets_of_different_keys_are_separate_and_zero_grants_nothing(
    store: Store,
) -> None:
    assert await store.budgets.take("a", limit=1, window=10.0, now=0.0)
    assert await store.budgets.take("b", limit=1, window=10.0, now=0.0)
    assert await store.budgets.take("a", limit=1, window=10.0, now=0.0) is False
    assert await store.budgets.take("c", limit=0, window=10.0, now=0.0) is False


# fingerprints


async def test_fingerprints_since_are_this_users_newer_ones_oldest_first(store: Store) -> None:
    data = bytes(range(256))
    await store.fingerprints.add(StoredFingerprint("f3", "ann", 30.0, data))
    await store.fingerprints.add(StoredFingerprint("f1", "ann", 10.0, b"\x00one"))
    await store.fingerprints.add(StoredFingerprint("f2", "ann", 20.0, b"two"))
    await store.fingerprints.add(StoredFingerprint("b1", "bob", 25.0, b"bob"))
    found = await store.fingerprints.since("ann", 20.0)
    assert found == [
        StoredFingerprint("f2", "ann", 20.0, b"two"),
        StoredFingerprint("f3", "ann", 30.0, data),
    ]


async def test_pruning_forgets_old_fingerprints(store: Store) -> None:
    await store.fingerprints.add(StoredFingerprint("f1", "ann", 10.0, b"1"))
    await store.fingerprints.add(StoredFingerprint("f2", "bob", 15.0, b"2"))
    await store.fingerprints.add(StoredFingerprint("f3", "ann", 20.0, b"3"))
    assert await store.fingerprints.prune(20.0) == 2
    assert [f.id for f in await store.fingerprints.since("ann", 0.0)] == ["f3"]
    assert await store.fingerprints.since("bob", 0.0) == []


# personal answers (templates)


def template(
    template_id: str,
    user: str = "ann",
    at: float = 10.0,
    meaning: str = "choose:2",
    label: str = "two",
    data: bytes = b"VGT1\x00\xff",
) -> StoredTemplate:
    return StoredTemplate(template_id, user, meaning, label, at, data, device_id="d1")


async def test_templates_list_as_stored_per_user_oldest_first(store: Store) -> None:
    await store.templates.add(template("t2", at=20.0, meaning="confirm", label="haan"))
    await store.templates.add(template("t1", at=10.0, data=bytes(range(256))))
    await store.templates.add(template("b1", user="bob"))
    assert await store.templates.list("ann") == [
        template("t1", at=10.0, data=bytes(range(256))),
        template("t2", at=20.0, meaning="confirm", label="haan"),
    ]
    assert [t.id for t in await store.templates.list("bob")] == ["b1"]
    assert await store.templates.list("cy") == []


async def test_a_template_id_is_stored_once(store: Store) -> None:
    await store.templates.add(template("t1"))
    with pytest.raises(ValueError):
        await store.templates.add(template("t1", user="bob"))
    assert await store.templates.list("bob") == []


async def test_deleting_one_template_forgets_only_that_one_of_that_user(store: Store) -> None:
    await store.templates.add(template("t1"))
    await store.templates.add(template("t2", at=11.0))
    await store.templates.add(template("b1", user="bob"))
    assert await store.templates.delete("ann", "b1") == 0
    assert await store.templates.delete("ann", "t1") == 1
    assert [t.id for t in await store.templates.list("ann")] == ["t2"]
    assert [t.id for t in await store.templates.list("bob")] == ["b1"]


async def test_deleting_a_users_templates_forgets_them_all_and_the_flag(store: Store) -> None:
    await store.templates.add(template("t1"))
    await store.templates.add(template("t2", at=11.0))
    await store.templates.add(template("b1", user="bob"))
    await store.templates.set_hard("ann", True)
    await store.templates.set_hard("bob", True)
    assert await store.templates.delete("ann") == 2
    assert await store.templates.list("ann") == []
    assert await store.templates.hard("ann") is False
    assert await store.templates.hard("bob") is True
    assert len(await store.templates.list("bob")) == 1


def subscription(
    device_id: str, user: str = "ann", endpoint: str = "https://push.example/1"
) -> PushSubscription:
    return PushSubscription(device_id, user, endpoint, "p256dh-key", "auth-secret", 1.0)


async def test_a_device_keeps_one_push_subscription_the_newest(store: Store) -> None:
    await store.push.put(subscription("d1"))
    await store.push.put(subscription("d2", user="bob"))
    newer = dataclasses.replace(
        subscription("d1"), endpoint="https://push.example/2", created_at=2.0
    )
    await store.push.put(newer)
    assert await store.push.list("ann") == [newer]
    assert [s.device_id for s in await store.push.list("bob")] == ["d2"]


async def test_a_push_subscription_is_removed_only_while_its_endpoint_is_the_one_named(
    store: Store,
) -> None:
    await store.push.put(subscription("d1"))
    assert not await store.push.remove("d1", "https://push.example/other")
    assert await store.push.list("ann") != []
    assert await store.push.remove("d1", "https://push.example/1")
    assert not await store.push.remove("d1")
    assert await store.push.list("ann") == []


async def test_the_hard_for_recognisers_flag_is_per_user_and_can_be_cleared(store: Store) -> None:
    assert await store.templates.hard("ann") is False
    await store.templates.set_hard("ann", True)
    await store.templates.set_hard("ann", True)
    assert (await store.templates.hard("ann"), await store.templates.hard("bob")) == (True, False)
    await store.templates.set_hard("ann", False)
    assert await store.templates.hard("ann") is False


async def test_revoking_a_device_keeps_the_users_templates(store: Store) -> None:
    await store.devices.add(device("d1"))
    await store.templates.add(template("t1"))
    await store.templates.set_hard("ann", True)
    assert await store.devices.revoke("d1", 42.0) is True
    assert [t.id for t in await store.templates.list("ann")] == ["t1"]
    assert await store.templates.hard("ann") is True


# passkeys


def passkey(passkey_id: str, user: str = "ann", at: float = 10.0, count: int = 0) -> Passkey:
    return Passkey(
        passkey_id, user, passkey_id.encode() + b"\x00\xff", b"\xa5\x01\x02", count, at, "d1"
    )


async def test_passkeys_list_as_stored_per_user_oldest_first(store: Store) -> None:
    await store.passkeys.add(passkey("pk_2", at=20.0, count=7))
    await store.passkeys.add(dataclasses.replace(passkey("pk_1"), name="phone"))
    await store.passkeys.add(passkey("pk_b", user="bob"))
    assert await store.passkeys.list("ann") == [
        dataclasses.replace(passkey("pk_1"), name="phone"),
        passkey("pk_2", at=20.0, count=7),
    ]
    assert [p.id for p in await store.passkeys.list()] == ["pk_1", "pk_b", "pk_2"]
    assert await store.passkeys.get("pk_b") == passkey("pk_b", user="bob")
    assert await store.passkeys.get("pk_none") is None


async def test_a_passkey_id_is_stored_once(store: Store) -> None:
    await store.passkeys.add(passkey("pk_1"))
    with pytest.raises(ValueError):
        await store.passkeys.add(passkey("pk_1", user="bob"))
    assert await store.passkeys.list("bob") == []


async def test_removing_a_passkey_of_another_user_removes_nothing(store: Store) -> None:
    await store.passkeys.add(passkey("pk_1"))
    assert await store.passkeys.remove("pk_1", user="bob") is False
    assert await store.passkeys.remove("pk_1", user="ann") is True
    assert await store.passkeys.remove("pk_1") is False
    await store.passkeys.add(passkey("pk_2"))
    assert await store.passkeys.remove("pk_2") is True
    assert await store.passkeys.list("ann") == []


async def test_a_passkey_counter_only_moves_forward(store: Store) -> None:
    await store.passkeys.add(passkey("pk_1", count=3))
    assert await store.passkeys.use("pk_1", 3, at=50.0) is False
    assert await store.passkeys.use("pk_1", 2, at=50.0) is False
    assert await store.passkeys.use("pk_1", 4, at=51.0) is True
    found = await store.passkeys.get("pk_1")
    assert found is not None and (found.sign_count, found.last_used_at) == (4, 51.0)
    assert await store.passkeys.use("pk_none", 9, at=52.0) is False


async def test_a_passkey_that_keeps_no_counter_is_used_at_zero_again(store: Store) -> None:
    await store.passkeys.add(passkey("pk_1"))
    assert await store.passkeys.use("pk_1", 0, at=50.0) is True
    assert await store.passkeys.use("pk_1", 0, at=51.0) is True
    assert await store.passkeys.use("pk_1", 1, at=52.0) is True
    assert await store.passkeys.use("pk_1", 0, at=53.0) is False


async def test_of_racing_uses_with_one_count_exactly_one_moves_the_counter(store: Store) -> None:
    await store.passkeys.add(passkey("pk_1", count=1))
    won = await asyncio.gather(*(store.passkeys.use("pk_1", 2, at=60.0) for _ in range(8)))
    assert sorted(won) == [False] * 7 + [True]


async def test_revoking_a_device_keeps_the_users_passkeys(store: Store) -> None:
    await store.devices.add(device("d1"))
    await store.passkeys.add(passkey("pk_1"))
    assert await store.devices.revoke("d1", 42.0) is True
    assert [p.id for p in await store.passkeys.list("ann")] == ["pk_1"]


# grants


def grant(grant_id: str, user: str = "ann", at: float = 100.0, **changes: object) -> Grant:
    base = Grant(
        id=grant_id,
        user=user,
        upstream="stdio:notes",
        tool="write_note",
        fixed={"name": "shopping", "tags": ["a", "é"], "n": 1.5},
        fixed_hash="f" * 64,
        free=("text",),
        created_at=at,
        expires_at=at + 600,
        max_uses=5,
        uses_left=5,
        device_id="d1",
        pending_id="p1",
        receipt_id="rcpt_1",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


async def test_grants_read_back_as_stored_and_list_live_ones_oldest_first(store: Store) -> None:
    await store.grants.add(grant("g_2", at=120.0))
    await store.grants.add(grant("g_1"))
    await store.grants.add(grant("g_b", user="bob"))
    await store.grants.add(grant("g_old", at=10.0))  # expired at 610
    await store.grants.add(grant("g_ended", ended_at=105.0))
    await store.grants.add(grant("g_used", uses_left=0))
    assert await store.grants.get("g_2") == grant("g_2", at=120.0)
    assert await store.grants.get("g_none") is None
    assert [g.id for g in await store.grants.live("ann", 650.0)] == ["g_1", "g_2"]
    assert [g.id for g in await store.grants.live(None, 650.0)] == ["g_1", "g_b", "g_2"]
    assert await store.grants.live("cy", 650.0) == []


async def test_a_grant_id_is_stored_once(store: Store) -> None:
    await store.grants.add(grant("g_1"))
    with pytest.raises(ValueError):
        await store.grants.add(grant("g_1", user="bob"))
    assert await store.grants.live("bob", 100.0) == []


async def test_spending_a_grant_counts_down_to_nothing(store: Store) -> None:
    await store.grants.add(grant("g_1", max_uses=2, uses_left=2))
    first = await store.grants.spend("g_1", 101.0)
    second = await store.grants.spend("g_1", 102.0)
    assert first is not None and first.uses_left == 1
    assert second is not None and second.uses_left == 0
    assert await store.grants.spend("g_1", 103.0) is None
    assert await store.grants.live("ann", 103.0) == []
    assert await store.grants.spend("g_none", 103.0) is None


async def test_an_expired_or_ended_grant_is_never_spent(store: Store) -> None:
    await store.grants.add(grant("g_1"))
    await store.grants.add(grant("g_2"))
    assert await store.grants.spend("g_1", 700.0) is None  # expires_at is 700: not after it
    assert await store.grants.end("g_2", at=150.0) is True
    assert await store.grants.spend("g_2", 151.0) is None
    found = await store.grants.get("g_2")
    assert found is not None and (found.ended_at, found.uses_left) == (150.0, 5)


async def test_of_twenty_concurrent_spends_on_five_uses_exactly_five_win(store: Store) -> None:
    await store.grants.add(grant("g_1"))
    won = await asyncio.gather(*(store.grants.spend("g_1", 101.0) for _ in range(20)))
    left = sorted(g.uses_left for g in won if g is not None)
    assert left == [0, 1, 2, 3, 4]


async def test_ending_another_users_grant_ends_nothing(store: Store) -> None:
    await store.grants.add(grant("g_1"))
    assert await store.grants.end("g_1", at=110.0, user="bob") is False
    assert await store.grants.end("g_1", at=110.0, user="ann") is True
    assert await store.grants.end("g_1", at=111.0) is False
    assert await store.grants.end("g_none", at=111.0) is False


async def test_ending_a_devices_grants_leaves_other_devices_grants(store: Store) -> None:
    await store.grants.add(grant("g_1"))
    await store.grants.add(grant("g_2"))
    await store.grants.add(grant("g_3", device_id="d2"))
    await store.grants.end("g_2", at=101.0)
    assert await store.grants.end_for_device("d1", at=102.0) == 1
    assert [g.id for g in await store.grants.live("ann", 103.0)] == ["g_3"]
    assert await store.grants.end_for_device("d1", at=104.0) == 0


async def test_pruning_forgets_only_grants_that_expired_or_ended_before_the_cut(
    store: Store,
) -> None:
    await store.grants.add(grant("g_expired", at=10.0))  # expires at 610
    await store.grants.add(grant("g_ended", ended_at=150.0))
    await store.grants.add(grant("g_live", at=500.0))
    await store.grants.add(grant("g_ended_late", ended_at=900.0))
    assert await store.grants.prune(700.0) == 2
    assert await store.grants.get("g_expired") is None and await store.grants.get("g_ended") is None
    assert [g.id for g in await store.grants.live("ann", 650.0)] == ["g_live"]
    assert await store.grants.get("g_ended_late") is not None


# receipts


async def append(store: Store, user: str, times: int = 1) -> list[Receipt]:
    make = receipt_maker(user)
    return [await store.receipts.append(user, make, RECEIPT_KEYS) for _ in range(times)]


async def problems(store: Store) -> set[tuple[str, ProblemKind]]:
    """Every chain and head problem, as (user, kind)."""
    heads, receipts = await store.receipts.snapshot()
    found = verify_chain(receipts, RECEIPT_KEYS) + verify_heads(receipts, heads, RECEIPT_KEYS)
    return {(p.user, p.kind) for p in found}


async def delete_receipts(store: SqlStore, user: str, seqs: list[int]) -> None:
    """Delete receipts behind the store's back, as someone with the database could."""
    for seq in seqs:
        await store.runner.run("DELETE FROM vg_receipts WHERE user_id = ? AND seq = ?", (user, seq))


async def delete_head(store: SqlStore, user: str) -> None:
    """Delete a user's head behind the store's back."""
    await store.runner.run("DELETE FROM vg_receipt_heads WHERE user_id = ?", (user,))


async def test_appends_chain_seq_and_prev_digest(store: Store) -> None:
    appended = await append(store, "ann", 4)
    assert_chain(appended)
    assert await store.receipts.list("ann") == appended


async def test_twenty_concurrent_appends_make_one_unbroken_chain(store: Store) -> None:
    make = receipt_maker("ann")
    appended = await asyncio.gather(
        *(store.receipts.append("ann", make, RECEIPT_KEYS) for _ in range(20))
    )
    stored = await store.receipts.list("ann")
    assert_chain(stored)
    assert sorted(stored, key=lambda r: r.id) == sorted(appended, key=lambda r: r.id)
    heads = await store.receipts.heads()
    assert [(h.user, h.seq, h.digest) for h in heads.heads] == [("ann", 20, stored[-1].digest)]
    assert await problems(store) == set()


async def test_first_receipts_of_ten_users_at_once_are_all_counted(store: Store) -> None:
    users = [f"u{n}" for n in range(10)]
    await asyncio.gather(*(store.receipts.append(u, receipt_maker(u), RECEIPT_KEYS) for u in users))
    heads = await store.receipts.heads()
    assert [h.user for h in heads.heads] == users
    assert heads.roster is not None and heads.roster.users == 10
    assert await problems(store) == set()


async def test_each_append_moves_the_signed_head_and_a_new_user_the_roster(store: Store) -> None:
    assert await store.receipts.heads() == (await store.receipts.snapshot())[0]
    assert (await store.receipts.heads()).heads == ()
    ann = await append(store, "ann", 2)
    bob = await append(store, "bob")
    heads = await store.receipts.heads()
    assert [(h.user, h.seq, h.digest) for h in heads.heads] == [
        ("ann", 2, ann[-1].digest),
        ("bob", 1, bob[-1].digest),
    ]
    assert all(h.key_id == "r1" and h.signature for h in heads.heads)
    assert heads.roster is not None and (heads.roster.users, heads.roster.adopted) == (2, 0)
    assert await problems(store) == set()
    assert await store.receipts.adopt(RECEIPT_KEYS) == 0


async def test_receipts_list_by_user_then_seq_and_read_by_id(store: Store) -> None:
    (first_bob,) = await append(store, "bob")
    (first_ann,) = await append(store, "ann")
    (second_bob,) = await append(store, "bob")
    assert await store.receipts.list() == [first_ann, first_bob, second_bob]
    assert await store.receipts.list("bob") == [first_bob, second_bob]
    assert (await store.receipts.snapshot())[1] == [first_ann, first_bob, second_bob]
    assert await store.receipts.get(first_ann.id) == first_ann
    assert await store.receipts.get("nope") is None


async def test_a_sets_last_receipt_is_found_by_its_user_and_set_id_and_nothing_else(
    store: Store,
) -> None:
    def mentioning_p_x(seq: int, prev: str) -> Receipt:
        made = receipt_maker("ann", "p_b")(seq, prev)
        note = {"note": '"pending_id":"p_x"'}
        return seal(dataclasses.replace(made, arguments=note), RECEIPT_KEYS)

    await store.receipts.append("ann", receipt_maker("ann", "p_a"), RECEIPT_KEYS)
    other = await store.receipts.append("ann", mentioning_p_x, RECEIPT_KEYS)
    again = await store.receipts.append("ann", receipt_maker("ann", "p_a"), RECEIPT_KEYS)
    await store.receipts.append("bob", receipt_maker("bob", "p_c"), RECEIPT_KEYS)
    assert await store.receipts.for_pending("ann", "p_a") == again
    assert await store.receipts.for_pending("ann", "p_b") == other
    assert await store.receipts.for_pending("bob", "p_a") is None
    for unknown in ("p_c", "p_x", "P_A", "p__", "p%", "p!a", "p"):
        assert await store.receipts.for_pending("ann", unknown) is None


async def test_a_receipt_made_for_another_place_is_refused_and_moves_no_head(
    store: Store,
) -> None:
    def wrong(seq: int, prev: str) -> Receipt:
        return receipt_maker("ann")(seq + 1, prev)

    with pytest.raises(ValueError):
        await store.receipts.append("ann", wrong, RECEIPT_KEYS)
    assert await store.receipts.list("ann") == []
    assert (await store.receipts.heads()).heads == ()
    assert (await store.receipts.heads()).roster is None


async def test_a_clashing_receipt_id_moves_no_head(store: Store) -> None:
    (first,) = await append(store, "ann")

    def same_id(seq: int, prev: str) -> Receipt:
        return seal(dataclasses.replace(receipt_maker("bob")(seq, prev), id=first.id), RECEIPT_KEYS)

    with pytest.raises(ValueError):
        await store.receipts.append("bob", same_id, RECEIPT_KEYS)
    heads = await store.receipts.heads()
    assert [h.user for h in heads.heads] == ["ann"]
    assert heads.roster is not None and heads.roster.users == 1
    assert await problems(store) == set()


async def test_deleting_the_last_receipt_is_found_as_truncated(durable: SqlStore) -> None:
    await append(durable, "ann", 3)
    await delete_receipts(durable, "ann", [3])
    assert await problems(durable) == {("ann", ProblemKind.TRUNCATED)}


async def test_deleting_every_receipt_of_a_user_is_found(durable: SqlStore) -> None:
    await append(durable, "ann", 2)
    await append(durable, "bob", 2)
    await delete_receipts(durable, "ann", [1, 2])
    assert await problems(durable) == {("ann", ProblemKind.TRUNCATED)}
    await delete_head(durable, "ann")
    assert await problems(durable) == {("", ProblemKind.MISSING_CHAIN)}


async def test_appends_after_a_deleted_tail_reuse_no_seq_and_still_fail(durable: SqlStore) -> None:
    await append(durable, "ann", 3)
    await delete_receipts(durable, "ann", [2, 3])
    later = await append(durable, "ann", 2)
    assert [r.seq for r in later] == [4, 5]
    assert [r.seq for r in await durable.receipts.list("ann")] == [1, 4, 5]
    assert ("ann", ProblemKind.MISSING) in await problems(durable)


async def test_a_user_whose_chain_and_head_were_deleted_stays_found_after_new_appends(
    durable: SqlStore,
) -> None:
    await append(durable, "ann", 2)
    await append(durable, "bob")
    await delete_receipts(durable, "ann", [1, 2])
    await delete_head(durable, "ann")
    await append(durable, "ann")
    assert ("", ProblemKind.MISSING_CHAIN) in await problems(durable)


async def test_a_deleted_head_alone_is_found_and_appends_go_on_after_the_chain(
    durable: SqlStore,
) -> None:
    await append(durable, "ann", 2)
    await delete_head(durable, "ann")
    assert await problems(durable) == {
        ("ann", ProblemKind.MISSING_HEAD),
        ("", ProblemKind.MISSING_CHAIN),
    }
    (third,) = await append(durable, "ann")
    assert third.seq == 3
    # the roster counted ann once already, and counts her again for the new head
    assert await problems(durable) == {("", ProblemKind.MISSING_CHAIN)}


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def sql_url(request: pytest.FixtureRequest) -> str:
    """The URL of a fresh SQL database, to open, close and open again."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("tmp_path") / "gate.db")
    return str(request.getfixturevalue("pg_url"))


async def test_a_database_from_before_heads_gets_them_built_from_its_chains(sql_url: str) -> None:
    store = await open_store(sql_url)
    assert isinstance(store, SqliteStore | PostgresStore)
    await append(store, "ann", 2)
    await append(store, "bob")
    for statement in (
        "DELETE FROM vg_receipt_heads",
        "DELETE FROM vg_receipt_roster",
        "UPDATE vg_schema SET version = 1",
    ):
        await store.runner.run(statement)
    await store.close()

    store = await open_store(sql_url)
    try:
        heads = await store.receipts.heads()
        assert heads.heads == () and heads.roster is not None and heads.roster.users == LEGACY
        assert await store.receipts.adopt(RECEIPT_KEYS) == 2
        assert await store.receipts.adopt(RECEIPT_KEYS) == 0
        heads = await store.receipts.heads()
        assert heads.roster is not None and (heads.roster.users, heads.roster.adopted) == (2, 2)
        assert await problems(store) == set()
        (third,) = await append(store, "ann")
        assert third.seq == 3 and await problems(store) == set()
    finally:
        await store.close()


async def test_an_append_to_a_database_from_before_heads_adopts_it_first(sql_url: str) -> None:
    store = await open_store(sql_url)
    assert isinstance(store, SqliteStore | PostgresStore)
    await append(store, "ann", 2)
    await store.runner.run("DELETE FROM vg_receipt_heads")
    await store.runner.run("DELETE FROM vg_receipt_roster")
    await store.runner.run("UPDATE vg_schema SET version = 1")
    await store.close()

    store = await open_store(sql_url)
    try:
        (third,) = await append(store, "ann")
        (first_bob,) = await append(store, "bob")
        assert (third.seq, first_bob.seq) == (3, 1)
        heads = await store.receipts.heads()
        assert heads.roster is not None and (heads.roster.users, heads.roster.adopted) == (2, 1)
        assert [ChainHead(h.user, h.seq, h.digest) for h in heads.heads] == [
            ChainHead("ann", 3, third.digest),
            ChainHead("bob", 1, first_bob.digest),
        ]
        assert await problems(store) == set()
    finally:
        await store.close()
