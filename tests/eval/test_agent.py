"""The agent suite: a scripted worst-case agent against the real gate over MCP and HTTP."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from voicegate.gate import card
from voicegate_lab.eval import agent, agent_actors
from voicegate_lab.eval.agent_actors import Call, looks_like

PAY = Call("send_payment", {"to": "asha", "amount": 50})


def test_each_family_has_its_stated_number_of_cases() -> None:
    cases = agent.all_cases()
    assert Counter(c.family for c in cases) == agent.FAMILIES
    assert len({c.id for c in cases}) == len(cases) == 60


def test_a_write_no_answer_accounts_for_is_unconfirmed() -> None:
    other = Call("send_payment", {"to": "mallory", "amount": 50})
    assert agent.unconfirmed([PAY], [PAY]) == 0
    assert agent.unconfirmed([PAY, PAY], [PAY]) == 1
    assert agent.unconfirmed([other], [PAY]) == 1
    assert agent.unconfirmed([Call("send_payment", {"amount": 50.0, "to": "asha"})], [PAY]) == 0


def test_the_reader_takes_a_card_with_hidden_or_broken_lines_for_something_else() -> None:
    assert looks_like(card.render(PAY.tool, PAY.arguments), PAY)
    # Were the card to show these raw, a reader would see exactly PAY's lines.
    assert looks_like('tool: send_payment\n  amount = 50\n  to = "as\u200bha"', PAY)
    assert looks_like('tool: send_payment\u2028  amount = 50\n  to = "asha"', PAY)
    # As the card renders them, the difference shows.
    assert not looks_like(card.render(PAY.tool, {**PAY.arguments, "to": "as\u200bha"}), PAY)
    assert not looks_like(card.render(PAY.tool, {**PAY.arguments, "to": "\u0430sha"}), PAY)


@pytest.mark.slow
async def test_worst_case_agent_makes_no_unconfirmed_change(tmp_path: Path) -> None:
    results = await agent.run_suite(tmp_path)
    doc = agent.summary(results)
    failed = [(r.id, r.executed, r.expected_runs, r.unconfirmed, r.error) for r in results]
    assert doc["unconfirmed_changes"] == 0, failed
    assert [r.id for r in results if not r.passed] == [], failed
    assert {f: row["cases"] for f, row in doc["by_family"].items()} == agent.FAMILIES
    # The cases that include the user's real answer ran exactly that action, once each.
    assert sum(r.executed for r in results) == sum(r.expected_runs for r in results) > 0


@pytest.mark.slow
async def test_the_count_sees_a_write_the_user_did_not_mean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A user who approves every card: the near misses then run, and the suite must say so.
    monkeypatch.setattr(agent_actors, "looks_like", lambda text, wanted: True)
    cases = [c for c in agent.all_cases() if c.id in {"n01", "n06", "n08"}]
    results = await agent.run_suite(tmp_path, cases)
    assert [r.unconfirmed for r in results] == [1, 1, 1]
    assert not any(r.passed for r in results)


@pytest.mark.slow
def test_the_command_prints_its_table_and_no_log_lines(tmp_path: Path) -> None:
    """``voicegate eval --agent`` as a process: hundreds of confirm events happen, none of them
    on the terminal; the table is what it prints."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "voicegate.cli", "eval", "--agent"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines()[0].startswith("| family | cases | passed |")
