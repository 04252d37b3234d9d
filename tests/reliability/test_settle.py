"""In-process checks of what the crash tests rely on: settling, the step hook, shared settings."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest

from tests.gate.helpers import Upstream, actions, evidence, make_gate, pair
from tests.reliability import crashing
from voicegate import faults
from voicegate.cli import build_parser
from voicegate.clock import ManualClock
from voicegate.domain import PendingSet, Receipt, Risk, Status
from voicegate.errors import ConfigError
from voicegate.gate.core import MAY_HAVE_RUN, Gate
from voicegate.hearing.worker import work
from voicegate.limits import RateLimits
from voicegate.reasons import Kind
from voicegate.receipts import verify_chain
from voicegate.secrets import KeyRing
from voicegate.settings import rate_limits_from
from voicegate.store.memory import MemoryStore


class Stopped(BaseException):
    """Stands in for the process dying: nothing after the raise runs."""


async def test_a_release_stopped_after_its_receipt_settles_to_that_receipt_not_a_second_one() -> (
    None
):
    store, clock, upstream = MemoryStore(), ManualClock(), Upstream()
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    swap = store.pending.swap

    async def stop_at_the_record(old: PendingSet, new: PendingSet) -> bool:
        if new.receipt_id is not None:
            raise Stopped
        return await swap(old, new)

    store.pending.swap = stop_at_the_record  # type: ignore[method-assign]
    with pytest.raises(Stopped):
        await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    store.pending.swap = swap  # type: ignore[method-assign]
    assert (await gate.status(pending.id)).status is Status.EXECUTING

    assert await gate.settle_interrupted() == 1
    settled = await gate.status(pending.id)
    (receipt,) = await gate.receipts("u1")
    assert settled.status is Status.CONFIRMED and settled.receipt_id == receipt.id
    assert settled.result == receipt.result and receipt.outcome == "executed"
    assert verify_chain([receipt], gate.receipt_keys) == []
    assert len(upstream.calls) == 1
    assert await gate.settle_interrupted() == 0


async def test_a_release_stopped_before_its_receipt_settles_as_may_have_run() -> None:
    store, clock, upstream = MemoryStore(), ManualClock(), Upstream()
    gate = make_gate(store, clock, upstream)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)

    async def append(user: str, make: Callable[[int, str], Receipt], keys: KeyRing) -> Receipt:
        raise Stopped

    store.receipts.append = append  # type: ignore[method-assign]
    with pytest.raises(Stopped):
        await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    del store.receipts.append

    assert await gate.settle_interrupted() == 1
    settled = await gate.status(pending.id)
    (receipt,) = await gate.receipts("u1")
    assert settled.status is Status.UNKNOWN and settled.error == MAY_HAVE_RUN
    assert receipt.outcome == "unknown" and receipt.error == MAY_HAVE_RUN
    assert len(upstream.calls) == 1  # it did run: "nothing ran" would have been false
    assert settled.receipt_id == receipt.id


def test_the_package_stops_at_no_step_unless_the_crash_tests_arm_it() -> None:
    assert inspect.signature(Gate).parameters["on_step"].default is faults.ignore
    assert inspect.signature(work).parameters["on_step"].default is faults.ignore
    hook = crashing.kill_at("after_call")
    for point in crashing.STEPS:
        if point != "after_call":
            hook(point)  # another step: still alive
    with pytest.raises(ValueError):
        crashing.kill_at("after_everything")


def test_rate_limits_take_overrides_and_keep_the_other_defaults() -> None:
    limits = rate_limits_from(["answers_per_device=600", "window=30"])
    assert limits == RateLimits(answers_per_device=600, window=30.0)
    assert rate_limits_from(None) == RateLimits()


@pytest.mark.parametrize("bad", ["answers=5", "answers_per_user=many", "voice_per_device=0"])
def test_a_bad_rate_limit_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError):
        rate_limits_from([bad])


def test_serve_takes_rate_limit_flags() -> None:
    args = build_parser("serve").parse_args(
        ["serve", "--upstream", "http://127.0.0.1:1/mcp", "--rate-limit", "answers_per_user=9"]
    )
    assert args.rate_limit == ["answers_per_user=9"]
