"""The steps of a release, as a step hook hears them."""

from __future__ import annotations

from tests.gate.helpers import Upstream
from voicegate import faults
from voicegate.clock import ManualClock
from voicegate.domain import Risk
from voicegate.gate.core import Gate, GatePolicy
from voicegate.reasons import Kind
from voicegate.store.memory import MemoryStore

from .helpers import actions, evidence, keys, pair


def gate_hearing(
    store: MemoryStore, clock: ManualClock, upstream: Upstream, steps: list[str]
) -> Gate:
    return Gate(
        store,
        executor=upstream,
        policy=GatePolicy(is_write=lambda tool: tool.startswith("write_")),
        receipt_keys=keys(),
        clock=clock,
        on_step=steps.append,
    )


async def test_a_release_passes_every_fault_point_in_order(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    steps: list[str] = []
    gate = gate_hearing(store, clock, upstream, steps)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM))
    assert outcome.released
    assert steps == ["after_claim", "after_nonce", "after_call", "after_receipt", "after_record"]
    assert tuple(steps) == faults.POINTS


async def test_a_refused_answer_passes_no_step(
    store: MemoryStore, clock: ManualClock, upstream: Upstream
) -> None:
    steps: list[str] = []
    gate = gate_hearing(store, clock, upstream, steps)
    device = await pair(store)
    pending = await gate.propose("u1", actions(1), risk=Risk.LOW)
    outcome = await gate.answer(evidence(pending, device, clock, Kind.CONFIRM, nonce="guess"))
    assert not outcome.released and steps == []
