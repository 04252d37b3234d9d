"""The gate's policy is one frozen value: without the operator's rules, a registered write may be
released from a device, at low risk, with another yes as a high-risk card's second step."""

from __future__ import annotations

import dataclasses

import pytest

from voicegate.domain import HighRiskStep, Risk
from voicegate.gate.grant_rules import GrantRules
from voicegate.gate.wiring import GatePolicy
from voicegate.reasons import Reason


def test_without_a_refusal_only_a_write_may_be_released_from_a_device() -> None:
    policy = GatePolicy(is_write=lambda tool: tool.startswith("write_"))
    assert policy.device_refusal("write_note") is None
    assert policy.device_refusal("read_note") is Reason.NOT_A_WRITE


def test_the_operators_refusal_is_asked_instead() -> None:
    policy = GatePolicy(is_write=lambda tool: True, refusal=lambda tool: Reason.OPERATOR_DISABLED)
    assert policy.device_refusal("write_note") is Reason.OPERATOR_DISABLED


def test_without_rules_a_tool_is_low_risk_with_another_yes_and_default_grant_bounds() -> None:
    policy = GatePolicy(is_write=lambda tool: True)
    assert policy.risk_of("delete_note") is Risk.LOW
    assert policy.step_of("delete_note") is HighRiskStep.YES
    assert (policy.upstream, policy.grants) == ("", GrantRules())


def test_a_gate_policy_is_frozen() -> None:
    policy = GatePolicy(is_write=lambda tool: True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.upstream = "stdio:other"  # type: ignore[misc]
