"""The manifest format: every line checked, faults reported with their line number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind
from voicegate_lab.eval.manifest import Case, ManifestError, case_to_dict, load, parse, parse_expect

BASE = Path("/corpus")


def line(**changes: Any) -> str:
    data: dict[str, Any] = {
        "id": "a",
        "audio": "clips/a.ogg",
        "cards": 3,
        "stage": "choose",
        "expect": "choose:2",
        "class": "genuine",
        "lang": "en",
    }
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not None})


def fault(*lines: str) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        parse(lines, BASE)
    return info.value


def test_a_valid_line_becomes_a_case_with_defaults() -> None:
    (case,) = parse([line()], BASE)
    assert case == Case(
        id="a",
        audio="clips/a.ogg",
        path=BASE / "clips/a.ogg",
        cards=3,
        stage=Stage.CHOOSE,
        expect=Decision(Kind.CHOOSE, 2),
        label="genuine",
        lang="en",
        user="u1",
        line=1,
    )


def test_the_audio_path_is_relative_to_the_manifest(tmp_path: Path) -> None:
    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "a.ogg").write_bytes(b"x")
    (tmp_path / "m.jsonl").write_text(line() + "\n", encoding="utf-8")
    (case,) = load(tmp_path / "m.jsonl")
    assert case.path == tmp_path / "clips" / "a.ogg"


def test_a_missing_clip_is_reported_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "m.jsonl").write_text("\n" + line() + "\n", encoding="utf-8")
    with pytest.raises(ManifestError) as info:
        load(tmp_path / "m.jsonl")
    assert info.value.line == 2
    assert load(tmp_path / "m.jsonl", check_audio=False)[0].line == 2


@pytest.mark.parametrize(
    "bad",
    [
        line(cards=0),
        line(cards=6),
        line(cards=True),
        line(cards="3"),
        line(stage="confirm"),
        line(expect="choose:4"),
        line(expect="choose"),
        line(expect="confirm:1"),
        line(expect="yes"),
        line(stage="final", expect="choose:1"),
        line(lang="hi"),
        line(id=""),
        line(audio="/abs/a.ogg"),
        line(audio="clips\\a.ogg"),
        line(user=""),
        line(extra=1),
        line(lang=None),
        "[1, 2]",
        "{not json",
    ],
)
def test_a_malformed_line_is_refused_with_its_number(bad: str) -> None:
    assert fault(line(id="first"), bad).line == 2


def test_ids_are_unique() -> None:
    assert fault(line(), line()).line == 2


def test_a_replay_must_follow_its_original_and_expect_refuse() -> None:
    original = line(id="o")
    replay = line(id="r", expect="refuse", class_="replay", replay_of="o")
    replay = replay.replace("class_", "class")
    assert [c.replay_of for c in parse([original, replay], BASE)] == [None, "o"]
    assert fault(replay, original).line == 1
    assert fault(original, line(id="r", replay_of="o")).line == 2


def test_an_empty_manifest_is_refused() -> None:
    assert fault("", "  ").line == 0


@pytest.mark.parametrize(
    "text", ["choose:1", "choose:5", "confirm", "cancel", "more_time", "refuse"]
)
def test_expect_round_trips(text: str) -> None:
    (case,) = parse([line(cards=5, expect=text)], BASE)
    assert case.expect_text == text
    assert json.loads(json.dumps(case_to_dict(case)))["expect"] == text
    assert parse_expect(text) == case.expect


def enrol_line(**changes: Any) -> str:
    data: dict[str, Any] = {"id": "e1", "audio": "clips/e1.wav", "expect": "choose:2"}
    data.update({"enrol": True, "user": "u2"})
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not None})


def test_an_enrolment_line_needs_only_id_audio_and_expect() -> None:
    taught, case = parse([enrol_line(), line()], BASE)
    assert (taught.enrol, taught.user, taught.expect) == (True, "u2", Decision(Kind.CHOOSE, 2))
    assert not case.enrol
    assert case_to_dict(taught)["enrol"] is True and "enrol" not in case_to_dict(case)


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"expect": "refuse"}, "not 'refuse'"),
        ({"enrol": "yes"}, "true or false"),
        ({"expect": None}, "missing keys: expect"),
        ({"replay_of": "a"}, "cannot be a replay"),
        ({"hard": 1}, "'hard' must be true or false"),
    ],
)
def test_a_bad_enrolment_line_is_refused_with_its_number(
    changes: dict[str, Any], detail: str
) -> None:
    error = fault(line(), enrol_line(**changes))
    assert error.line == 2 and detail in error.detail


def test_the_hard_flag_rides_on_an_enrolment_line_only() -> None:
    taught, case = parse([enrol_line(hard=True), line()], BASE)
    assert taught.hard and not case.hard and case_to_dict(taught)["hard"] is True
    assert "hard" not in case_to_dict(case)
    error = fault(line(hard=True))
    assert error.line == 1 and "belongs on an enrolment line" in error.detail


def test_a_manifest_of_enrolment_lines_alone_has_no_cases() -> None:
    assert fault(enrol_line()).line == 0


def test_a_case_may_replay_an_enrolment_take() -> None:
    taught, replay = parse([enrol_line(), line(id="r", replay_of="e1", expect="refuse")], BASE)
    assert replay.replay_of == taught.id
