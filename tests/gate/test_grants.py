"""Grants: made only with a device's yes to one low-risk card, spent exactly as often as allowed."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import PG_DSN
from tests.gate.helpers import Upstream, evidence, keys, pair
from tests.store.conftest import with_schema
from voicegate import faults
from voicegate.canonical import canonical_json
from voicegate.clock import ManualClock
from voicegate.domain import Device, Grant, GrantAsk, Risk, Status
from voicegate.errors import StoreUnavailable
from voicegate.gate import grants
from voicegate.gate.core import ActionRequest, Gate, GatePolicy, Outcome
from voicegate.gate.grant_rules import GrantRules
from voicegate.reasons import Kind, Reason
from voicegate.receipts import verify_chain
from voicegate.secrets import KeyRing
from voicegate.store import open_store
from voicegate.store.base import Store

NOTE = {"name": "shopping", "text": "eggs"}
ONE_NOTE = [ActionRequest("write_note", NOTE)]
RULES = GrantRules(free=(("write_*", ("text",)),), off=("send_*",))


def grant_gate(
    store: Store,
    clock: ManualClock,
    upstream: Upstream,
    *,
    rules: GrantRules = RULES,
    receipt_keys: KeyRing | None = None,
    on_step: Callable[[str], None] = faults.ignore,
) -> Gate:
    return Gate(
        store,
        executor=upstream,
        policy=GatePolicy(
            is_write=lambda tool: tool.startswith(("write_", "delete_", "send_")),
            risk_of=lambda tool: Risk.HIGH if tool.startswith("delete_") else Risk.LOW,
            upstream="stdio:notes",
            grants=rules,
        ),
        receipt_keys=receipt_keys or keys(),
        clock=clock,
        on_step=on_step,
    )


async def approve_with_grant(
    gate: Gate,
    device: Device,
    clock: ManualClock,
    requests: list[ActionRequest],
    *,
    minutes: int = 10,
    uses: int = 5,
    risk: Risk = Risk.LOW,
) -> Outcome:
    pending = await gate.propose(device.user, requests, risk=risk)
    asked = dataclasses.replace(
        evidence(pending, device, clock, Kind.CHOOSE, 1), grant=GrantAsk(minutes, uses)
    )
    return await gate.answer(asked)


@pytest.fixture
async def gate(store: Store, clock: ManualClock, upstream: Upstream) -> Gate:
    return grant_gate(store, clock, upstream)


async def test_a_yes_with_a_grant_releases_the_card_and_makes_the_grant(
    gate: Gate, store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    outcome = await approve_with_grant(gate, device, clock, [ActionRequest("write_note", NOTE)])
    assert outcome.released and outcome.receipt is not None and outcome.grant is not None
    made = outcome.grant
    assert (made.user, made.upstream, made.tool) == ("u1", "stdio:notes", "write_note")
    assert made.fixed == {"name": "shopping"} and made.free == ("text",)
    assert (made.uses_left, made.expires_at - made.created_at) == (5, 600.0)
    assert (made.pending_id, made.receipt_id) == (outcome.pending.id, outcome.receipt.id)
    assert made.device_id == device.id
    assert [c.name for c in outcome.checks if c.name.startswith("grant")] == ["grant_allowed"]
    assert await gate.grants("u1") == [made]


async def test_the_receipt_of_the_card_that_made_a_grant_carries_its_terms_and_verifies(
    gate: Gate, store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    outcome = await approve_with_grant(gate, device, clock, ONE_NOTE, minutes=7, uses=3)
    assert outcome.receipt is not None and outcome.grant is not None
    made = outcome.grant
    (stored,) = [r for r in await gate.receipts("u1") if r.id == outcome.receipt.id]
    assert stored.granted is not None
    terms = stored.granted
    assert (terms.grant_id, terms.tool) == (made.id, "write_note")
    assert (tuple(terms.fixed), tuple(terms.free)) == (("name",), ("text",))
    assert (terms.minutes, terms.uses, terms.expires_at) == (7, 3, made.expires_at)
    assert verify_chain(await gate.receipts("u1"), gate.receipt_keys) == []


async def test_changing_a_grants_terms_in_its_receipt_breaks_the_chain(
    gate: Gate, store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    outcome = await approve_with_grant(gate, device, clock, ONE_NOTE, minutes=7, uses=3)
    assert outcome.receipt is not None and outcome.receipt.granted is not None
    longer = dataclasses.replace(outcome.receipt.granted, minutes=70, uses=30)
    edited = dataclasses.replace(outcome.receipt, granted=longer)
    assert verify_chain([edited], gate.receipt_keys) != []


async def test_voicegate_receipts_verify_accepts_a_chain_with_a_grants_terms(
    tmp_path: Path, clock: ManualClock, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voicegate.cli import main
    from voicegate.settings import keys_for

    monkeypatch.delenv("VOICEGATE_SECRET_KEYS", raising=False)
    db = tmp_path / "gate.db"
    store = await open_store(str(db))
    ring = keys_for(str(db), env={})
    assert ring is not None
    device = await pair(store)
    gate = grant_gate(store, clock, upstream, receipt_keys=ring)
    outcome = await approve_with_grant(gate, device, clock, ONE_NOTE)
    assert outcome.receipt is not None and outcome.receipt.granted is not None
    await store.close()
    assert await asyncio.to_thread(main, ["receipts", "verify", "--db", str(db)]) == 0


async def test_a_grant_the_store_cannot_keep_leaves_its_terms_in_the_receipt_and_runs_nothing(
    gate: Gate,
    store: Store,
    clock: ManualClock,
    upstream: Upstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    device = await pair(store)

    async def unreachable(grant: Grant) -> None:
        raise StoreUnavailable("the store went away")

    monkeypatch.setattr(store.grants, "add", unreachable)
    outcome = await approve_with_grant(gate, device, clock, ONE_NOTE)
    # The write the user approved ran; the repeat is not there, and the answer says so.
    assert outcome.released and outcome.grant is None
    assert outcome.receipt is not None and outcome.receipt.granted is not None
    monkeypatch.undo()
    assert await gate.grants("u1") == []
    assert await gate.use_grant("u1", ActionRequest("write_note", NOTE)) is None
    assert verify_chain(await gate.receipts("u1"), gate.receipt_keys) == []


async def test_a_fitting_call_runs_at_once_and_its_receipt_names_the_grant_and_card(
    gate: Gate, store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    made = await approve_with_grant(gate, device, clock, [ActionRequest("write_note", NOTE)])
    assert made.grant is not None and made.receipt is not None
    clock.advance(30)
    ran = await gate.use_grant("u1", ActionRequest("write_note", {**NOTE, "text": "milk"}))
    assert ran is not None
    spent, receipt = ran
    assert upstream.calls[-1] == ("write_note", {"name": "shopping", "text": "milk"})
    assert spent.uses_left == 4
    assert receipt.mode == "grant" and receipt.grant is not None
    assert receipt.grant.grant_id == made.grant.id
    assert (receipt.grant.made_by, receipt.grant.made_receipt) == (
        made.pending.id,
        made.receipt.id,
    )
    assert receipt.grant.uses_left == 4
    assert (receipt.grant.max_uses, tuple(receipt.grant.free)) == (5, ("text",))
    (stored,) = [r for r in await gate.receipts("u1") if r.id == receipt.id]
    assert stored.grant is not None and stored.grant.max_uses == 5
    assert tuple(stored.grant.free) == ("text",)
    names = [c.name for c in receipt.checks]
    assert names == ["grant_fits", "grant_spent_once", "approval_consumed_once"]
    assert verify_chain(await gate.receipts("u1"), gate.receipt_keys) == []


async def test_a_call_differing_in_a_fixed_argument_fits_no_grant(
    gate: Gate, store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    await approve_with_grant(gate, device, clock, [ActionRequest("write_note", NOTE)])
    for arguments in (
        {"name": "work", "text": "eggs"},  # a fixed value changed
        {"text": "eggs"},  # a fixed argument left out
        {**NOTE, "pin": True},  # an argument added
    ):
        assert await gate.use_grant("u1", ActionRequest("write_note", arguments)) is None
    assert await gate.use_grant("u1", ActionRequest("write_other", NOTE)) is None
    assert len(upstream.calls) == 1


async def test_after_expiry_past_the_count_or_for_another_user_no_grant_fits(
    gate: Gate, store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    call = ActionRequest("write_note", NOTE)
    await approve_with_grant(gate, device, clock, [call], minutes=2, uses=2)
    assert await gate.use_grant("u2", call) is None
    assert await gate.use_grant("u1", call) is not None
    assert await gate.use_grant("u1", call) is not None
    assert await gate.use_grant("u1", call) is None  # its two uses are spent
    await approve_with_grant(gate, device, clock, [call], minutes=2, uses=2)
    clock.advance(120)
    assert await gate.use_grant("u1", call) is None  # past its two minutes
    assert len(upstream.calls) == 4
    assert await gate.grants("u1") == []


async def test_a_grant_the_user_ended_fits_nothing(
    gate: Gate, store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    made = await approve_with_grant(gate, device, clock, [ActionRequest("write_note", NOTE)])
    assert made.grant is not None
    assert await gate.end_grant(made.grant.id, user="u2") is False
    assert await gate.end_grant(made.grant.id, user="u1") is True
    assert await gate.use_grant("u1", ActionRequest("write_note", NOTE)) is None


async def test_revoking_the_device_that_made_a_grant_ends_it(
    gate: Gate, store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    await approve_with_grant(gate, device, clock, [ActionRequest("write_note", NOTE)])
    assert await store.grants.end_for_device(device.id, at=clock()) == 1
    assert await gate.use_grant("u1", ActionRequest("write_note", NOTE)) is None


async def test_a_grant_of_a_revoked_device_runs_nothing_even_before_it_is_ended(
    gate: Gate, store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    await approve_with_grant(gate, device, clock, [ActionRequest("write_note", NOTE)])
    assert await store.devices.revoke(device.id, clock())
    assert await gate.use_grant("u1", ActionRequest("write_note", NOTE)) is None
    assert len(upstream.calls) == 1


@pytest.mark.parametrize(
    ("requests", "risk", "ask", "reason"),
    [
        (
            [ActionRequest("write_note", NOTE), ActionRequest("write_note", {"name": "b"})],
            Risk.LOW,
            GrantAsk(10, 5),
            Reason.GRANT_SEVERAL_CARDS,
        ),
        ([ActionRequest("write_note", NOTE)], Risk.HIGH, GrantAsk(10, 5), Reason.GRANT_HIGH_RISK),
        ([ActionRequest("delete_note", NOTE)], Risk.LOW, GrantAsk(10, 5), Reason.GRANT_HIGH_RISK),
        ([ActionRequest("send_note", NOTE)], Risk.LOW, GrantAsk(10, 5), Reason.GRANT_OFF),
        (ONE_NOTE, Risk.LOW, GrantAsk(11, 5), Reason.GRANT_BEYOND_LIMIT),
        (
            [ActionRequest("write_note", NOTE)],
            Risk.LOW,
            GrantAsk(10, 11),
            Reason.GRANT_BEYOND_LIMIT,
        ),
        (ONE_NOTE, Risk.LOW, GrantAsk(0, 5), Reason.GRANT_BEYOND_LIMIT),
    ],
)
async def test_a_yes_whose_grant_may_not_be_had_releases_nothing(
    gate: Gate,
    store: Store,
    clock: ManualClock,
    upstream: Upstream,
    requests: list[ActionRequest],
    risk: Risk,
    ask: GrantAsk,
    reason: Reason,
) -> None:
    device = await pair(store)
    pending = await gate.propose("u1", requests, risk=risk)
    asked = dataclasses.replace(evidence(pending, device, clock, Kind.CHOOSE, 1), grant=ask)
    outcome = await gate.answer(asked)
    assert outcome.reason is reason and not outcome.released and outcome.grant is None
    assert (await gate.status(pending.id)).status is Status.WAITING
    assert upstream.calls == [] and await gate.grants("u1") == []


async def test_grants_turned_off_since_they_were_made_are_not_spent(
    store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    made_by = grant_gate(store, clock, upstream)
    await approve_with_grant(made_by, device, clock, [ActionRequest("write_note", NOTE)])
    later = grant_gate(store, clock, upstream, rules=GrantRules(off=("write_*",)))
    assert await later.use_grant("u1", ActionRequest("write_note", NOTE)) is None


async def test_a_free_argument_the_approved_call_did_not_have_stays_fixed_as_absent(
    store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    rules = GrantRules(free=(("write_*", ("text", "overwrite")),))
    gate = grant_gate(store, clock, upstream, rules=rules)
    await approve_with_grant(gate, device, clock, [ActionRequest("write_note", NOTE)])
    (made,) = await gate.grants("u1")
    assert made.free == ("text",)
    added = {**NOTE, "text": "milk", "overwrite": True}
    assert await gate.use_grant("u1", ActionRequest("write_note", added)) is None
    assert await gate.use_grant("u1", ActionRequest("write_note", {**NOTE, "text": "milk"}))


@pytest.mark.parametrize(
    "narrower",
    [
        GrantRules(free=()),
        GrantRules(free=RULES.free, max_minutes=5),
        GrantRules(free=RULES.free, max_uses=4),
    ],
    ids=["free", "minutes", "uses"],
)
async def test_narrower_operator_bounds_narrow_grants_already_made(
    store: Store, clock: ManualClock, upstream: Upstream, narrower: GrantRules
) -> None:
    device = await pair(store)
    made_by = grant_gate(store, clock, upstream)
    await approve_with_grant(made_by, device, clock, ONE_NOTE, minutes=10, uses=5)
    later = grant_gate(store, clock, upstream, rules=narrower)
    assert await later.use_grant("u1", ActionRequest("write_note", {**NOTE, "text": "x"})) is None
    assert await later.use_grant("u1", ActionRequest("write_note", NOTE)) is None
    again = grant_gate(store, clock, upstream)
    assert await again.use_grant("u1", ActionRequest("write_note", NOTE))


async def test_a_grant_binds_the_upstream_it_was_made_in_front_of(
    store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    device = await pair(store)
    made_by = grant_gate(store, clock, upstream)
    await approve_with_grant(made_by, device, clock, [ActionRequest("write_note", NOTE)])
    other = grant_gate(store, clock, upstream)
    other.policy = dataclasses.replace(other.policy, upstream="http:https://elsewhere.example/mcp")
    assert await other.use_grant("u1", ActionRequest("write_note", NOTE)) is None


# 20 concurrent fitting calls on a grant of 5, by two gates sharing one database


async def sqlite_store(tmp_path: Path) -> Store:
    return await open_store(str(tmp_path / "gate.db"))


SHARED = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=SHARED)
async def opener(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], Awaitable[Store]]]:
    if request.param == "sqlite":
        url = str(tmp_path / "gate.db")
    else:
        url = with_schema(PG_DSN, request.getfixturevalue("pg_schema"))
    opened: list[Store] = []

    async def open_one() -> Store:
        opened.append(await open_store(url))
        return opened[-1]

    yield open_one
    for each in opened:
        await each.close()


async def test_twenty_concurrent_fitting_calls_on_a_grant_of_five_run_exactly_five(
    opener: Callable[[], Awaitable[Store]], clock: ManualClock, upstream: Upstream
) -> None:
    ring = keys()
    one, two = await opener(), await opener()
    first = grant_gate(one, clock, upstream, receipt_keys=ring)
    second = grant_gate(two, clock, upstream, receipt_keys=ring)
    device = await pair(one)
    call = ActionRequest("write_note", NOTE)
    made = await approve_with_grant(first, device, clock, [call], uses=5)
    assert made.grant is not None
    ran = await asyncio.gather(*(g.use_grant("u1", call) for g in [first, second] * 10))
    used = [r for r in ran if r is not None]
    assert len(used) == 5 and len(upstream.calls) == 6
    assert sorted(spent.uses_left for spent, _ in used) == [0, 1, 2, 3, 4]
    receipts = await first.receipts("u1")
    assert len(receipts) == 6 and verify_chain(receipts, ring) == []
    assert sum(1 for r in receipts if r.grant is not None) == 5


async def test_a_granted_call_reaches_its_fault_point_after_the_spend_and_before_the_write(
    store: Store, clock: ManualClock, upstream: Upstream
) -> None:
    # Where the crash tests kill: the use spent, the write neither claimed nor run; after it the
    # granted write passes the steps it shares with a card's release.
    steps: list[tuple[str, int]] = []
    gate = grant_gate(
        store, clock, upstream, on_step=lambda step: steps.append((step, len(upstream.calls)))
    )
    device = await pair(store)
    made = await approve_with_grant(gate, device, clock, ONE_NOTE, uses=2)
    assert made.grant is not None
    steps.clear()
    assert await gate.use_grant("u1", ONE_NOTE[0]) is not None
    # One write before the spend, the approved card's; the granted one after it.
    assert steps == [(faults.GRANT_SPENT, 1), ("after_receipt", 2)]
    assert len(upstream.calls) == 2


async def test_a_grant_outlives_a_restart_of_the_gate(
    tmp_path: Path, clock: ManualClock, upstream: Upstream
) -> None:
    before = await sqlite_store(tmp_path)
    device = await pair(before)
    call = ActionRequest("write_note", NOTE)
    await approve_with_grant(grant_gate(before, clock, upstream), device, clock, [call])
    await before.close()
    after = await sqlite_store(tmp_path)
    try:
        assert await grant_gate(after, clock, upstream).use_grant("u1", call) is not None
    finally:
        await after.close()


# what a call must match, as a property


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(max_size=4),
    st.lists(st.integers(0, 3), max_size=2),
)
ARGUMENTS = st.dictionaries(st.sampled_from("abcde"), VALUES, max_size=5)


def made(arguments: dict[str, Any], free: tuple[str, ...]) -> Grant:
    fixed, _ = grants.split(arguments, free)
    return Grant(
        id="g_1",
        user="u1",
        upstream="stdio:notes",
        tool="write_note",
        fixed=fixed,
        fixed_hash=grants.fixed_hash("write_note", fixed),
        free=free,
        created_at=0.0,
        expires_at=600.0,
        max_uses=5,
        uses_left=5,
        device_id="d1",
        pending_id="p1",
        receipt_id="r1",
    )


@settings(max_examples=300, deadline=None)
@given(
    approved=ARGUMENTS,
    call=ARGUMENTS,
    free=st.lists(st.sampled_from("abcde"), max_size=2, unique=True).map(tuple),
)
def test_a_call_fits_exactly_when_every_argument_but_the_free_ones_is_as_approved(
    approved: dict[str, Any], call: dict[str, Any], free: tuple[str, ...]
) -> None:
    grant = made(approved, free)
    # Equal as JSON: True and 1 are different values to the upstream, as to the hash.
    same = canonical_json({k: v for k, v in approved.items() if k not in free}) == canonical_json(
        {k: v for k, v in call.items() if k not in free}
    )
    assert grants.fits(grant, upstream="stdio:notes", tool="write_note", arguments=call) is same
    reordered = dict(reversed(list(call.items())))
    assert (
        grants.fits(grant, upstream="stdio:notes", tool="write_note", arguments=reordered) is same
    )
    assert not grants.fits(grant, upstream="stdio:other", tool="write_note", arguments=approved)
    assert not grants.fits(grant, upstream="stdio:notes", tool="write_other", arguments=approved)
