"""Scoring: correct answers, false releases, per-class figures, percentiles and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicegate_lab.eval.manifest import parse
from voicegate_lab.eval.report import (
    Result,
    confusion,
    expected_write,
    final_card,
    markdown,
    percentile,
    summary,
    write_plots,
)


def result(
    expect: str = "choose:2",
    decision: str = "choose",
    card: int | None = 2,
    write: int | None = 2,
    expected: int | None = 2,
    **kw: Any,
) -> Result:
    base: dict[str, Any] = {
        "id": "x",
        "label": "genuine",
        "lang": "en",
        "reason": None,
        "latency_ms": 100.0,
    }
    base.update(kw)
    return Result(
        expect=expect, decision=decision, card=card, write=write, expected_write=expected, **base
    )


def test_the_expected_choice_is_correct_and_no_false_release() -> None:
    r = result()
    assert r.correct and r.released and not r.false_release


def test_the_wrong_card_is_a_false_release() -> None:
    r = result(card=3, write=3)
    assert not r.correct and r.false_release


@pytest.mark.parametrize("expect", ["refuse", "cancel", "more_time"])
def test_any_write_where_none_was_expected_is_a_false_release(expect: str) -> None:
    assert result(
        expect=expect, decision="confirm", card=None, write=1, expected=None
    ).false_release


def test_a_refusal_where_a_choice_was_expected_is_wrong_but_releases_nothing() -> None:
    r = result(decision="refuse", card=None, write=None, reason="unclear")
    assert not r.correct and not r.released and not r.false_release


def test_on_a_single_card_choose_one_and_confirm_are_the_same_answer() -> None:
    assert result(expect="choose:1", decision="confirm", card=None, single_card=True).correct
    assert result(expect="confirm", decision="choose", card=1, single_card=True).correct
    assert not result(expect="confirm", decision="choose", card=1).correct


def test_expected_write_follows_the_stage() -> None:
    def case(**kw: Any) -> Any:
        import json

        data = {
            "id": "a",
            "audio": "a.ogg",
            "cards": 4,
            "stage": "choose",
            "expect": "refuse",
            "class": "c",
            "lang": "en",
            **kw,
        }
        return parse([json.dumps(data)], Path("."))[0]

    assert expected_write(case(expect="choose:3")) == 3
    assert expected_write(case(cards=1, expect="confirm")) == 1
    assert expected_write(case(stage="final", expect="confirm")) == final_card(4)
    assert expected_write(case(expect="cancel")) is None
    assert expected_write(case(expect="more_time")) is None


def test_percentile_interpolates_like_numpy() -> None:
    values = [10.0, 20.0, 30.0, 40.0]
    assert percentile(values, 50) == 25.0
    assert percentile(values, 95) == pytest.approx(38.5)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) == 0.0


@given(st.lists(st.floats(0, 1e6), min_size=1), st.floats(0, 100))
def test_a_percentile_lies_between_the_extremes(values: list[float], q: float) -> None:
    assert min(values) <= percentile(values, q) <= max(values)


def test_summary_counts_by_class_and_language() -> None:
    results = [
        result(id="a"),
        result(
            id="b",
            label="hedge",
            expect="refuse",
            decision="choose",
            card=2,
            write=2,
            expected=None,
            lang="hi-Latn",
        ),
        result(
            id="c",
            label="hedge",
            expect="refuse",
            decision="refuse",
            card=None,
            write=None,
            expected=None,
            latency_ms=300.0,
        ),
    ]
    s = summary(results)
    assert (s["cases"], s["false_releases"], s["correct"]) == (3, 1, 2)
    assert s["by_class"] == {
        "genuine": {"n": 1, "correct": 1, "released": 1},
        "hedge": {"n": 2, "correct": 1, "released": 1},
    }
    assert s["by_lang"]["hi-Latn"] == {"n": 1, "correct": 0, "released": 1}
    assert s["latency_ms"] == {"p50": 100.0, "p95": 280.0}
    assert [r["id"] for r in s["results"]] == ["a", "b", "c"]
    assert set(s["results"][0]) >= {"id", "decision", "card", "reason", "released", "latency_ms"}


def test_confusion_puts_a_wrong_card_in_its_own_column() -> None:
    table = confusion(
        [
            result(),
            result(card=4, write=4),
            result(expect="refuse", decision="cancel", card=None, write=None, expected=None),
        ]
    )
    assert table["choose"]["choose"] == 1
    assert table["choose"]["wrong_card"] == 1
    assert table["refuse"]["cancel"] == 1
    assert sum(sum(row.values()) for row in table.values()) == 3


@pytest.mark.slow
def test_the_markdown_report_lists_every_false_release(tmp_path: Path) -> None:
    results = [result(), result(id="bad", card=3, write=3)]
    plots = write_plots(results, tmp_path)
    text = markdown(results, plots=plots)
    assert "bad" in text and "FALSE RELEASE" in text
    for name in plots:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
