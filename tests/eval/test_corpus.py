"""The committed corpus: its manifests are valid, large enough and cover every class."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, FSDD, require
from voicegate.reasons import Kind
from voicegate_lab.eval.manifest import Case, load

CORPUS = FIXTURES / "corpus"
CLASSES = {
    "genuine",
    "ambiguous",
    "hedge",
    "sound_alike",
    "contradiction",
    "negation",
    "out_of_range",
    "number_on_final",
    "oov",
    "silence",
    "noise",
    "tone",
    "truncated",
    "corrupt",
    "replay",
}


def cases(name: str) -> list[Case]:
    # The FSDD clips are referenced, not copied: check them only where the corpus is present.
    return load(CORPUS / name, check_audio=FSDD.is_dir())


@pytest.fixture(scope="module")
def full() -> list[Case]:
    return cases("manifest.jsonl")


@pytest.fixture(scope="module")
def ci() -> list[Case]:
    return cases("manifest-ci.jsonl")


def test_the_full_corpus_has_a_thousand_cases_of_every_class(full: list[Case]) -> None:
    assert len(full) >= 1000
    assert set(Counter(c.label for c in full)) >= CLASSES
    assert {c.lang for c in full} == {"en", "hi-Latn", "hi-Deva", "none"}
    assert {c.cards for c in full} == {1, 2, 3, 4, 5}
    assert {c.stage.value for c in full} == {"choose", "final"}


def test_genuine_answers_come_in_all_three_lexicons(full: list[Case]) -> None:
    genuine = {(c.lang, c.expect.kind) for c in full if c.label == "genuine"}
    for lang in ("en", "hi-Latn", "hi-Deva"):
        assert {k for lg, k in genuine if lg == lang} == {
            Kind.CHOOSE,
            Kind.CONFIRM,
            Kind.CANCEL,
            Kind.MORE_TIME,
        }


def test_every_case_that_is_not_genuine_expects_a_refusal(full: list[Case]) -> None:
    assert all(c.expect.kind is Kind.REFUSE for c in full if c.label != "genuine")


def test_replays_reuse_an_earlier_genuine_release_of_the_same_user(full: list[Case]) -> None:
    by_id = {c.id: c for c in full}
    replays = [c for c in full if c.replay_of]
    assert len(replays) >= 50
    for r in replays:
        original = by_id[r.replay_of or ""]
        assert original.label == "genuine" and original.user == r.user
        assert original.expect.kind in (Kind.CHOOSE, Kind.CONFIRM)


def test_the_ci_subset_covers_every_class_and_brings_replay_originals(
    full: list[Case], ci: list[Case]
) -> None:
    assert len(ci) >= 100
    assert {c.label for c in ci} == {c.label for c in full}
    assert {c.lang for c in ci} == {c.lang for c in full}
    full_ids = [c.id for c in full]
    assert [c.id for c in ci] == [i for i in full_ids if i in {c.id for c in ci}]
    assert all(c.replay_of in {x.id for x in ci} for c in ci if c.replay_of)


def test_committed_audio_is_small_and_16k_mono(full: list[Case]) -> None:
    clips = [p for p in (CORPUS / "clips").iterdir()]
    assert sum(p.stat().st_size for p in clips) <= 40 * 1024 * 1024
    import soundfile as sf

    for case in full[:200]:
        if case.label in ("corrupt", "truncated") or case.path.suffix not in (".flac", ".wav"):
            continue
        if "fsdd" in case.audio:
            continue
        info = sf.info(str(case.path))
        assert (info.samplerate, info.channels) == (16000, 1), case.id


@pytest.mark.corpus
def test_referenced_fsdd_clips_exist(full: list[Case]) -> None:
    require(FSDD.is_dir(), f"the FSDD corpus at {FSDD}")
    missing = [c.audio for c in full if "fsdd" in c.audio and not c.path.is_file()]
    assert not missing
    assert all(Path(c.audio).parent.name == "fsdd" for c in full if "fsdd" in c.audio)


@pytest.mark.corpus
def test_the_committed_manifests_are_what_the_generator_writes() -> None:
    require(FSDD.is_dir(), f"the FSDD corpus at {FSDD}")
    import subprocess
    import sys

    script = CORPUS / "make_corpus.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True)
    assert done.returncode == 0, done.stdout
