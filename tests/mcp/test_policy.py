"""Classification is the operator's: globs first, upstream hints only when not strict."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from voicegate.domain import HighRiskStep, Risk
from voicegate.errors import ConfigError, ConfigFieldError
from voicegate.gate.grant_rules import GrantRules, parse_free
from voicegate.mcp.policy import (
    OWN_TOOLS,
    Mode,
    Policy,
    check_collisions,
    parse_modes,
    parse_pairs,
    parse_steps,
    policy_lines,
    read_reasons,
    reads_line,
    split_globs,
)
from voicegate.mcp.tool_list import OWN_TOOL_LIST


def test_unknown_tool_without_hints_is_a_low_risk_device_write() -> None:
    kind = Policy().classify("frobnicate")
    assert (kind.write, kind.risk, kind.mode) == (True, Risk.LOW, Mode.DEVICE)


def test_read_only_hint_is_trusted_only_without_strict() -> None:
    assert not Policy().classify("list_x", read_only_hint=True).write
    assert Policy(strict=True).classify("list_x", read_only_hint=True).write


def test_strict_reads_globs_pass_through() -> None:
    policy = Policy(strict=True, reads=("read_*", "list_*"))
    assert not policy.classify("read_file").write
    assert policy.classify("write_file").write


def test_writes_and_high_risk_globs_beat_a_read_only_hint_and_reads() -> None:
    policy = Policy(reads=("*",), writes=("send_*",), high_risk=("move_*",))
    assert policy.classify("send_mail", read_only_hint=True).write
    moved = policy.classify("move_file", read_only_hint=True)
    assert moved.write and moved.risk is Risk.HIGH
    assert not policy.classify("get_thing").write


def test_false_read_only_hint_is_a_write() -> None:
    assert Policy().classify("x", read_only_hint=False).write


def test_last_matching_mode_glob_wins() -> None:
    policy = Policy(modes=parse_modes(["*=token", "delete_*=reject", "write_note=delegate"]))
    assert policy.mode_for("create") is Mode.TOKEN
    assert policy.mode_for("delete_all") is Mode.REJECT
    assert policy.mode_for("write_note") is Mode.DELEGATE


@pytest.mark.parametrize("bad", ["token", "=token", "x=maybe"])
def test_a_bad_mode_is_refused_naming_the_modes_field(bad: str) -> None:
    with pytest.raises(ConfigFieldError) as refused:
        parse_modes([bad])
    assert refused.value.fields == {"modes"}


def test_globs_split_on_commas_across_flags() -> None:
    assert split_globs(["a_*, b", "c"]) == ("a_*", "b", "c")
    assert split_globs(None) == ()


def test_pairs_keep_equals_signs_in_values_and_refuse_a_missing_one() -> None:
    assert parse_pairs(["A=b=c"], "env") == {"A": "b=c"}
    with pytest.raises(ConfigFieldError) as refused:
        parse_pairs(["novalue"], "headers")
    assert refused.value.fields == {"headers"}


@pytest.mark.parametrize("name", ["pending_status", "withdraw", "list_pending", "choose_one"])
def test_an_upstream_tool_named_like_a_gate_tool_is_refused(name: str) -> None:
    with pytest.raises(ConfigError):
        check_collisions(["list_notes", name])
    check_collisions(["list_notes", "write_note"])


def test_every_tool_the_gate_lists_as_its_own_is_guarded_against_shadowing() -> None:
    assert {t.name for t in OWN_TOOL_LIST} == OWN_TOOLS


HINTS = {"list_notes": True, "search": None, "write_note": False, "peek": True}


def test_reads_are_named_with_why_they_pass_straight_through() -> None:
    reasons = read_reasons(Policy(reads=("search",)), HINTS)
    assert reasons == {"list_notes": "readOnlyHint", "peek": "readOnlyHint", "search": "--reads"}


def test_strict_passes_only_the_reads_the_operator_named() -> None:
    assert read_reasons(Policy(strict=True, reads=("search",)), HINTS) == {"search": "--reads"}
    assert "readOnlyHint" not in reads_line(Policy(strict=True, reads=("search",)), HINTS)


def test_the_reads_line_names_every_read_and_the_reason_for_it() -> None:
    line = reads_line(Policy(writes=("peek",)), HINTS)
    assert "list_notes (readOnlyHint)" in line and "peek" not in line
    assert "--strict" in line  # a claim of the upstream's own is said to be one
    assert "none" in reads_line(Policy(strict=True), HINTS)


def test_the_start_lines_name_high_risk_tools_unnamed_destructive_claims_and_dead_globs() -> None:
    policy = Policy(
        reads=("get_*", "lookup_*"),
        high_risk=("delete_*", "delet_*"),
        modes=(("send_*", Mode.REJECT),),
    )
    tools = {"get_balance": False, "delete_note": True, "close_account": True, "send_x": False}
    assert policy_lines(policy, tools) == [
        (False, "high-risk writes (a second yes): delete_note"),
        (True, "marked destructiveHint by the upstream, not named by --high-risk (one yes): "
               "close_account"),
        (True, "globs that match no listed tool: --reads 'lookup_*', --high-risk 'delet_*'"),
    ]  # fmt: skip
    # A claim alone never changes a tool's risk: only --high-risk does.
    assert policy.classify("close_account").risk is Risk.LOW


def test_the_high_risk_step_is_another_yes_unless_the_last_matching_glob_says_otherwise() -> None:
    policy = Policy(
        high_risk=("delete_*", "send_*"),
        steps=parse_steps(["*=passkey", "delete_note=both", "send_*=yes"]),
    )
    assert Policy().step_for("delete_note") is HighRiskStep.YES
    assert policy.step_for("delete_all") is HighRiskStep.PASSKEY
    assert policy.step_for("delete_note") is HighRiskStep.BOTH
    assert policy.step_for("send_money") is HighRiskStep.YES
    tools = {"delete_note": True, "delete_all": True, "send_money": False}
    assert policy_lines(policy, tools)[:2] == [
        (False, "high-risk writes (a second yes): delete_all, delete_note, send_money"),
        (False, "high-risk writes whose second step needs a passkey: delete_all (passkey), "
                "delete_note (both)"),
    ]  # fmt: skip


@pytest.mark.parametrize("bad", ["passkey", "=passkey", "x=fingerprint"])
def test_a_bad_high_risk_step_is_refused_naming_the_steps_field(bad: str) -> None:
    with pytest.raises(ConfigFieldError) as refused:
        parse_steps([bad])
    assert refused.value.fields == {"steps"}


@pytest.mark.parametrize(
    ("refuse", "field"),
    [
        (lambda: GrantRules(max_minutes=1441), "max_minutes"),
        (lambda: GrantRules(max_minutes=-1), "max_minutes"),
        (lambda: GrantRules(max_uses=1001), "max_uses"),
        (lambda: parse_free(["write_note"]), "free"),
        (lambda: parse_free(["write_note="]), "free"),
        (lambda: parse_modes(["x=maybe"]), "modes"),
        (lambda: parse_steps(["x=fingerprint"]), "steps"),
        (lambda: parse_pairs(["novalue"], "env"), "env"),
    ],
)
def test_a_refused_policy_value_names_its_field_and_no_flag(
    refuse: Callable[[], object], field: str
) -> None:
    with pytest.raises(ConfigFieldError) as refused:
        refuse()
    assert refused.value.fields == {field}
    assert "--" not in str(refused.value)


def test_a_policy_that_matches_every_glob_warns_of_nothing() -> None:
    lines = policy_lines(Policy(high_risk=("delete_*",)), {"delete_note": True, "list": False})
    assert lines == [(False, "high-risk writes (a second yes): delete_note")]


def test_grant_bounds_other_than_the_defaults_are_said_at_start() -> None:
    rules = GrantRules(max_minutes=5, free=(("write_*", ("text", "tags")),), off=("send_*",))
    tools = {"write_note": False, "send_mail": False}
    assert policy_lines(Policy(grants=rules), tools)[-1] == (
        False,
        "grants: at most 5 minutes and 10 uses; may vary: write_* (text, tags); never for: send_*",
    )
    off = policy_lines(Policy(grants=GrantRules(max_uses=0)), tools)
    assert off[-1] == (False, "grants: off (--grant-max or --grant-max-uses is 0)")
    assert all("grants" not in line for _, line in policy_lines(Policy(), tools))
