"""Eval phones pair as a person's do: over ``POST /device/pair``, waiting out a spent budget."""

from __future__ import annotations

import pytest

from voicegate.clock import ManualClock
from voicegate.errors import ConfigError
from voicegate.limits import GLOBAL_LIMIT, PairingLimits
from voicegate.settings import ServerConfig
from voicegate_lab.eval import harness, local

WINDOW = 600.0
# One pairing in all per window: the second user's phone finds the budget spent.
ONE_A_WINDOW = PairingLimits(per_address=5, in_all=1, window=WINDOW)


def no_voice(_: object) -> None:
    return None


@pytest.mark.slow
async def test_past_a_spent_pairing_budget_the_next_phone_waits_and_pairs_over_the_route() -> None:
    clock = ManualClock()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)

    config = ServerConfig(pairing_limits=ONE_A_WINDOW)
    async with local.in_process(no_voice, config=config, clock=clock, sleep=sleep) as rig:
        first = await rig.device("u1")
        second = await rig.device("u2")
        listed = [await rig.signed(d, "GET", "/device/pending") for d in (first, second)]
        stored = {d.id: d.user for d in await rig.store.devices.list(None)}
    assert [answer.status_code for answer in listed] == [200, 200]
    assert stored == {first.id: "u1", second.id: "u2"}
    assert waits and set(waits) == {harness.PAIRING_RETRY}
    assert sum(waits) <= WINDOW + harness.PAIRING_RETRY


async def test_a_pairing_budget_that_never_turns_over_is_a_config_error_and_pairs_nothing() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    config = ServerConfig(pairing_limits=ONE_A_WINDOW)
    # The clock stands still, so the window never turns over.
    clock = ManualClock()
    async with local.in_process(no_voice, config=config, clock=clock, sleep=sleep) as rig:
        await rig.device("u1")
        with pytest.raises(ConfigError):
            await rig.device("u2")
        users = [d.user for d in await rig.store.devices.list(None)]
    assert users == ["u1"]
    assert len(waits) == harness.PAIRING_TRIES - 1


@pytest.mark.slow
async def test_the_eval_app_pairs_more_phones_than_the_servers_budget_allows() -> None:
    async with local.in_process(no_voice) as rig:
        for n in range(GLOBAL_LIMIT + 1):
            await rig.device(f"u{n}")
        stored = await rig.store.devices.list(None)
    assert len(stored) == GLOBAL_LIMIT + 1
