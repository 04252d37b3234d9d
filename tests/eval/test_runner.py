"""The runner end to end through the real app and upstream, with scripted recognisers.

A scripted recogniser stands in for Whisper here so the runner's own bookkeeping can be checked
fast: a perfect one scores every case, and a yes-man is caught releasing what it should not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from tests.device.test_enrol import take
from voicegate.cli import main
from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind, Reason
from voicegate.store.base import Store
from voicegate.voice.calibration import Calibration
from voicegate.voice.pipeline import VoicePipeline, VoiceResult
from voicegate_lab.cli import eval as eval_cli
from voicegate_lab.eval import local, outputs, runner
from voicegate_lab.eval.manifest import Case, load, parse_expect
from voicegate_lab.eval.report import summary

CASES = [
    ("pick-two", 3, "choose", "choose:2"),
    ("final-yes", 3, "final", "confirm"),
    ("only-card-yes", 1, "choose", "confirm"),
    ("cancel", 2, "final", "cancel"),
    ("wait", 4, "choose", "more_time"),
    ("hedge", 2, "choose", "refuse"),
]


class Scripted:
    """Answers from a table keyed by the clip's bytes, or always the same answer, where the
    server's ``VoicePipeline`` would: its ``decide`` and the ``VoiceResult`` it returns."""

    # The server reads its pipeline's calibration to word a refusal's next step.
    calibration = Calibration(card=0.9, yes=0.9, support=1, source="test")

    def __init__(
        self, table: dict[str, Decision] | None = None, always: Decision | None = None
    ) -> None:
        self.table = table or {}
        self.always = always

    async def decide(
        self,
        audio: bytes,
        *,
        user: str,
        cards: int,
        stage: Stage,
        content_type: str | None = None,
        card_words: Sequence[str] = (),
    ) -> VoiceResult:
        unclear = Decision(Kind.REFUSE, reason=Reason.UNCLEAR)
        decision = self.always
        if decision is None:
            decision = self.table.get(hashlib.sha256(audio).hexdigest(), unclear)
        return VoiceResult(
            decision, transcripts=("scripted",), recogniser="scripted", model="none", language="en"
        )


def manifest(tmp_path: Path) -> tuple[list[Case], dict[str, Decision]]:
    table: dict[str, Decision] = {}
    lines = []
    for n, (name, cards, stage, expect) in enumerate(CASES):
        path = tmp_path / f"{name}.wav"
        sf.write(path, np.full(1600 + n, 0.01, dtype=np.float32), 16000, subtype="PCM_16")
        table[hashlib.sha256(path.read_bytes()).hexdigest()] = parse_expect(expect)
        lines.append(
            json.dumps(
                {
                    "id": name,
                    "audio": path.name,
                    "cards": cards,
                    "stage": stage,
                    "expect": expect,
                    "class": "c",
                    "lang": "en",
                    "user": f"u{n % 2}",
                }
            )
        )
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load(tmp_path / "m.jsonl"), table


async def test_a_perfect_recogniser_scores_every_case_and_writes_the_right_cards(
    tmp_path: Path,
) -> None:
    cases, table = manifest(tmp_path)
    async with local.in_process(lambda _: Scripted(table)) as harness:
        results = await runner.evaluate(cases, harness, progress=False)
    doc = summary(results)
    assert (doc["correct"], doc["false_releases"]) == (len(CASES), 0)
    assert [r.write for r in results] == [2, 3, 1, None, None, None]
    assert len(harness.devices) == 2


async def test_a_yes_man_recogniser_is_caught_releasing(tmp_path: Path) -> None:
    cases, _ = manifest(tmp_path)
    async with local.in_process(lambda _: Scripted(always=Decision(Kind.CONFIRM))) as harness:
        results = await runner.evaluate(cases, harness, progress=False)
    false = {r.id for r in results if r.false_release}
    # On one open card or the final card a yes runs a write; several open cards stay ambiguous.
    assert "cancel" in false
    assert not any(r.write for r in results if r.id in ("pick-two", "hedge", "wait"))


async def test_a_wrong_card_is_a_false_release(tmp_path: Path) -> None:
    cases, _ = manifest(tmp_path)
    async with local.in_process(lambda _: Scripted(always=Decision(Kind.CHOOSE, 1))) as harness:
        (result,) = await runner.evaluate(cases[:1], harness, progress=False)
    assert (result.write, result.false_release) == (1, True)


def test_the_command_exits_2_on_a_bad_manifest(tmp_path: Path) -> None:
    (tmp_path / "m.jsonl").write_text('{"id": 1}\n', encoding="utf-8")
    assert main(["eval", "--manifest", str(tmp_path / "m.jsonl")]) == 2


def test_answers_parse_whatever_the_status() -> None:
    assert runner.parse_answer(
        200, {"decision": "choose", "card": 2, "reason": None, "heard": ["two"]}
    ) == ("choose", 2, None, ("two",))
    assert runner.parse_answer(422, {"reason": "corrupt", "next_step": ""}) == (
        "refuse",
        None,
        "corrupt",
        (),
    )
    assert runner.parse_answer(500, None)[0] == "refuse"
    assert runner.parse_answer(422, {"decision": "confirm", "card": 1, "reason": "x"})[1] is None


@pytest.mark.slow
async def test_a_hundred_answers_from_one_user_are_all_decided_not_throttled(
    tmp_path: Path,
) -> None:
    rows = []
    for n in range(100):
        sf.write(tmp_path / f"{n}.wav", np.full(1600 + n, 0.01, dtype=np.float32), 16000)
        rows.append(json.dumps({"id": f"c{n}", "audio": f"{n}.wav", "cards": 1,
                                "stage": "choose", "expect": "confirm", "class": "c",
                                "lang": "en", "user": "u0"}))  # fmt: skip
    (tmp_path / "m.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    cases = load(tmp_path / "m.jsonl")
    async with local.in_process(lambda _: Scripted(always=Decision(Kind.CONFIRM))) as harness:
        results = await runner.evaluate(cases, harness, progress=False)
    doc = summary(results)
    assert (doc["correct"], doc["throttled"]) == (100, 0)


def test_the_eval_defaults_to_the_servers_model_and_language() -> None:
    parser = argparse.ArgumentParser()
    eval_cli.add_arguments(parser)
    args = parser.parse_args(["--manifest", "m.jsonl"])
    assert (args.model, args.langs) == (None, None)  # tiny.en and English, as voicegate serve
    assert "tiny.en" in parser.format_help() and "default: en" in parser.format_help()


def synthetic_take(path: Path, pitch: float, seed: int) -> None:
    """One synthetic "word" as a WAV file (``tests.device.test_enrol.take``: a harmonic glide
    with its own length, vibrato and harmonic phases)."""
    path.write_bytes(take(pitch, seed))


def enrolment_manifest(tmp_path: Path, hard: bool = False) -> list[Case]:
    """u1 teaches three takes of card 2 and of card 3 (one sent twice), then answers; with
    ``hard``, the first take also sets "my speech is hard for recognisers"."""
    rows: list[dict[str, Any]] = []
    for card, pitch in ((2, 200.0), (3, 520.0)):
        for seed in range(3):
            name = f"t{card}{seed}"
            synthetic_take(tmp_path / f"{name}.wav", pitch, seed)
            rows.append({"id": name, "audio": f"{name}.wav", "expect": f"choose:{card}",
                         "enrol": True})  # fmt: skip
    rows.append({"id": "again", "audio": "t20.wav", "expect": "choose:2", "enrol": True})
    if hard:
        rows[0]["hard"] = True
    synthetic_take(tmp_path / "new.wav", 200.0, 3)
    case = {"cards": 3, "stage": "choose", "class": "c", "lang": "en"}
    rows.append({"id": "new-two", "audio": "new.wav", "expect": "choose:2", **case})
    rows.append({"id": "replayed", "audio": "t21.wav", "expect": "refuse", "replay_of": "t21",
                 **case})  # fmt: skip
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return load(tmp_path / "m.jsonl")


def unsure(store: Store) -> VoicePipeline:
    """The real pipeline and replay guard over the app's store. The recogniser cannot read the
    answer surely: it hears "Two." with half the probability, under the 0.9 it needs alone. The
    fusion adds three times the log of the templates' margin, so templates that point clearly
    to two lift it over 0.9."""
    from voicegate.voice.calibration import Calibration
    from voicegate.voice.enrolment import StoreEnrolments
    from voicegate.voice.fingerprint import ReplayGuard
    from voicegate.voice.transcribe import FakeTranscriber, Heard, Hearing

    scores = (("two", -2.0), ("three", -2.6), ("one", -2.8), ("cancel", -9.0))
    said = (Heard("Two.", "en", -2.0, "two"),)
    return VoicePipeline(
        FakeTranscriber([Hearing("Two.", "en", 0.1, -0.3, scores, said)] * 4),
        ReplayGuard(store.fingerprints),
        calibrated=Calibration(
            card=0.9, yes=0.9, support=1, source="test", fusion=(0.0, 1.0, 3.0, 0.0)
        ),
        enrolments=StoreEnrolments(store.templates, "fake"),
    )


@pytest.mark.slow
async def test_an_enrolment_line_may_set_the_hard_flag_through_the_device_api(
    tmp_path: Path,
) -> None:
    async with local.in_process(unsure) as harness:
        await runner.evaluate(enrolment_manifest(tmp_path, hard=True), harness, progress=False)
        assert await harness.store.templates.hard("u1") is True
    (tmp_path / "plain").mkdir()
    async with local.in_process(unsure) as harness:
        await runner.evaluate(enrolment_manifest(tmp_path / "plain"), harness, progress=False)
        assert await harness.store.templates.hard("u1") is False


@pytest.mark.slow
async def test_enrolment_lines_are_taught_through_the_device_api_and_are_not_cases(
    tmp_path: Path,
) -> None:
    cases = enrolment_manifest(tmp_path)
    async with local.in_process(unsure) as harness:
        results = await runner.evaluate(cases, harness, progress=False)
        stored = await harness.store.templates.list("u1")
    assert [r.id for r in results] == ["new-two", "replayed"]
    assert (results[0].write, results[1].reason) == (2, Reason.AUDIO_REUSED)
    assert len(stored) == 6
    doc = outputs.write(results, harness.taught)
    assert doc["cases"] == 2
    assert doc["enrolment"] == {
        "takes": 7,
        "taught": 6,
        "refused": 1,
        "reasons": {"audio_reused": 1},
        "users": 1,
    }
