"""Proposals are bounded: card size, open sets per user, proposals per agent token per window."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from voicegate.canonical import ARGUMENTS_BYTES, MAX_BYTES, canonical_json
from voicegate.clock import ManualClock
from voicegate.domain import Risk
from voicegate.errors import ConfigError, Refused, Throttled
from voicegate.gate.core import ActionRequest, Gate, GatePolicy
from voicegate.gate.quota import ProposalLimits, agent_id
from voicegate.reasons import Reason
from voicegate.secrets import Secret
from voicegate.settings import proposal_limits_from
from voicegate.store import open_store
from voicegate.store.base import Store

from .helpers import Upstream, keys

SMALL = ProposalLimits(open_per_user=3, per_agent=5, window=60.0, argument_bytes=1024)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store("memory" if request.param == "memory" else str(tmp_path / "g.db"))
    yield opened
    await opened.close()


def gate_over(store: Store, clock: ManualClock, limits: ProposalLimits = SMALL) -> Gate:
    return Gate(
        store,
        executor=Upstream(),
        policy=GatePolicy(is_write=lambda tool: True),
        receipt_keys=keys(),
        clock=clock,
        limits=limits,
    )


def note(text: str) -> list[ActionRequest]:
    return [ActionRequest("write_note", {"text": text})]


async def test_a_card_with_arguments_over_the_size_cap_is_refused_and_not_stored(
    store: Store,
) -> None:
    gate = gate_over(store, ManualClock(1000.0))
    with pytest.raises(Refused) as caught:
        await gate.propose("ann", note("x" * 2000), risk=Risk.LOW, agent="a1")
    assert caught.value.reason is Reason.ARGUMENTS_TOO_LARGE
    assert await store.pending.list_for_user("ann", open_only=False) == []
    assert (await gate.propose("ann", note("x" * 900), risk=Risk.LOW, agent="a1")).id


async def test_arguments_that_are_not_plain_json_are_a_bad_request(store: Store) -> None:
    gate = gate_over(store, ManualClock(1000.0))
    with pytest.raises(Refused) as caught:
        await gate.propose("ann", [ActionRequest("w", {"n": float("nan")})], risk=Risk.LOW)
    assert caught.value.reason is Reason.BAD_REQUEST


async def test_an_argument_cap_set_past_the_hashing_bound_still_refuses_what_no_plan_holds(
    store: Store,
) -> None:
    gate = gate_over(store, ManualClock(1000.0), ProposalLimits(argument_bytes=2 * MAX_BYTES))
    for size in (ARGUMENTS_BYTES + 1, MAX_BYTES - 8):  # the latter once failed the plan's hash
        text = "x" * (size - len(canonical_json({"text": ""})))
        with pytest.raises(Refused) as caught:
            await gate.propose("ann", note(text), risk=Risk.LOW)
        assert caught.value.reason is Reason.BAD_REQUEST
    assert await store.pending.list_for_user("ann", open_only=False) == []


async def test_a_user_with_the_cap_of_open_sets_gets_no_more_until_one_closes(
    store: Store,
) -> None:
    clock = ManualClock(1000.0)
    gate = gate_over(store, clock)
    opened = [await gate.propose("ann", note(str(i)), risk=Risk.LOW) for i in range(3)]
    with pytest.raises(Refused) as caught:
        await gate.propose("ann", note("fourth"), risk=Risk.LOW)
    assert caught.value.reason is Reason.TOO_MANY_OPEN
    assert (await gate.propose("bob", note("other user"), risk=Risk.LOW)).user == "bob"
    await gate.withdraw(opened[0].id)
    assert (await gate.propose("ann", note("after a withdraw"), risk=Risk.LOW)).user == "ann"
    assert len(await store.pending.list_for_user("ann")) == 3


async def test_sets_past_their_deadline_do_not_count_as_open(store: Store) -> None:
    clock = ManualClock(1000.0)
    gate = gate_over(store, clock, ProposalLimits(open_per_user=2, per_agent=100))
    for i in range(2):
        await gate.propose("ann", note(str(i)), risk=Risk.LOW)
    clock.now += gate.timing.choose_ttl + 1
    assert (await gate.propose("ann", note("new"), risk=Risk.LOW)).user == "ann"


async def test_an_agent_token_past_its_proposals_per_minute_is_throttled(
    store: Store,
) -> None:
    clock = ManualClock(1200.0)
    gate = gate_over(store, clock, ProposalLimits(open_per_user=100, per_agent=5, window=60.0))
    for i in range(5):
        pending = await gate.propose(f"user{i}", note(str(i)), risk=Risk.LOW, agent="a1")
        await gate.withdraw(pending.id)
    with pytest.raises(Throttled) as caught:
        await gate.propose("fresh", note("sixth"), risk=Risk.LOW, agent="a1")
    assert caught.value.reason is Reason.PROPOSAL_RATE
    assert 1 <= caught.value.retry_after <= 60
    assert (await gate.propose("fresh", note("other token"), risk=Risk.LOW, agent="a2")).id
    clock.now += 60.0
    assert (await gate.propose("fresh", note("next minute"), risk=Risk.LOW, agent="a1")).id


async def test_refused_proposals_spend_no_budget(store: Store) -> None:
    gate = gate_over(store, ManualClock(1200.0), ProposalLimits(per_agent=2, argument_bytes=64))
    for _ in range(5):
        with pytest.raises(Refused):
            await gate.propose("ann", note("x" * 100), risk=Risk.LOW, agent="a1")
    for i in range(2):
        assert (await gate.propose("ann", note(str(i)), risk=Risk.LOW, agent="a1")).id


def test_the_agent_name_is_stable_and_does_not_reveal_the_token() -> None:
    token = Secret("a-long-bearer-token-value")
    assert agent_id(token) == agent_id(Secret("a-long-bearer-token-value"))
    assert agent_id(token) != agent_id(Secret("another-token"))
    assert "bearer" not in agent_id(token)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ProposalLimits(open_per_user=0)


def test_proposal_limit_flags_override_the_defaults_and_refuse_nonsense() -> None:
    limits = proposal_limits_from(["open_per_user=4", "window=30"])
    assert (limits.open_per_user, limits.window, limits.per_agent) == (4, 30.0, 30)
    for bad in (["open_per_user=0"], ["per_agent=x"], ["nonsense=3"], ["window=nan"]):
        with pytest.raises(ConfigError):
            proposal_limits_from(bad)
