"""The real Whisper models on the committed clips and on real spoken digits.

Choosing a card must never release a wrong card; accuracy floors are set well below what
docs/voice.md measures, so the tests check for regressions, not for a lucky run.
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import FIXTURES, ROOT, require
from voicegate.domain import Decision, Stage
from voicegate.reasons import Kind, Reason
from voicegate.voice import models
from voicegate.voice.audio import decode
from voicegate.voice.pipeline import VoicePipeline, VoiceResult
from voicegate.voice.transcribe import Utterance
from voicegate.voice.whisper import FasterWhisperTranscriber

pytestmark = pytest.mark.whisper
CLIPS = FIXTURES / "clips"
MANIFEST: list[dict[str, Any]] = json.loads((CLIPS / "manifest.json").read_text())


def load(name: str) -> FasterWhisperTranscriber:
    require(models.describe(name).status in ("present", "not_assembled"), f"the {name} model")
    return FasterWhisperTranscriber(name, device="cpu", threads=2)


@pytest.fixture(scope="session")
def tiny() -> Iterator[FasterWhisperTranscriber]:
    yield load("tiny.en")


@pytest.fixture(scope="session")
def base() -> Iterator[FasterWhisperTranscriber]:
    yield load("base")


def expected(text: str) -> Decision | None:
    """The manifest's expectation; None for "refuse" (anything that releases nothing)."""
    kind, _, card = text.partition(" ")
    if kind == "refuse":
        return None
    return Decision(Kind(kind), card=int(card) if card else None)


def run_all(pipeline: VoicePipeline, items: list[tuple[bytes, int, Stage]]) -> list[VoiceResult]:
    """Decide every item, a few at a time so they batch but never overflow the queue."""

    async def go() -> list[VoiceResult]:
        out: list[VoiceResult] = []
        for i in range(0, len(items), pipeline.max_waiting):
            chunk = items[i : i + pipeline.max_waiting]
            out += await asyncio.gather(
                *(pipeline.decide(a, user="t", cards=c, stage=s) for a, c, s in chunk)
            )
        return out

    results = asyncio.run(go())
    assert all(r.decision.reason != Reason.BUSY for r in results)
    return results


def clips(**where: str) -> list[dict[str, Any]]:
    return [m for m in MANIFEST if all(m[k] == v for k, v in where.items())]


def decide_clips(pipeline: VoicePipeline, rows: list[dict[str, Any]]) -> list[Decision]:
    items = [((CLIPS / m["file"]).read_bytes(), m["cards"], Stage(m["stage"])) for m in rows]
    return [r.decision for r in run_all(pipeline, items)]


def test_synthetic_english_answers_decide_as_listed(tiny: FasterWhisperTranscriber) -> None:
    rows = clips(lang="en", source="piper") + clips(lang="en", source="espeak-ng")
    decisions = decide_clips(VoicePipeline(tiny, None), rows)
    right = []
    for row, decision in zip(rows, decisions, strict=True):
        want = expected(row["expect"])
        if decision == want or (want is None and decision.kind is Kind.REFUSE):
            right.append(row["file"])
        else:  # never another card, never a release or a cancel of a refused phrase
            assert decision.kind is Kind.REFUSE, (row["file"], decision)
    # What is not right must be a refusal (a bare "two" written "2" under the confidence floor,
    # "cancel" heard as "Console" with too narrow a lead), never another answer. On 2026-11-30
    # 9 of these 11 clips were decided as listed.
    assert len(right) >= len(rows) - 3, right


def test_committed_spoken_digits_never_release_a_wrong_card(
    tiny: FasterWhisperTranscriber,
) -> None:
    rows = clips(source="fsdd")
    decisions = decide_clips(VoicePipeline(tiny, None), rows)
    right = 0
    for row, decision in zip(rows, decisions, strict=True):
        want = expected(row["expect"])
        if decision.releases:
            assert decision == want, row["file"]
        right += decision == want or (want is None and not decision.releases)
    assert right >= len(rows) // 2


def test_hindi_answers_never_release_a_wrong_card(base: FasterWhisperTranscriber) -> None:
    rows = clips(lang="hi")
    decisions = decide_clips(VoicePipeline(base, None, languages=("hi",)), rows)
    for row, decision in zip(rows, decisions, strict=True):
        if decision.releases:
            assert decision == expected(row["expect"]), row["file"]


def test_hindi_needs_a_multilingual_model(tiny: FasterWhisperTranscriber) -> None:
    row = clips(lang="hi")[0]
    [decision] = decide_clips(VoicePipeline(tiny, None, languages=("hi",)), [row])
    assert decision.reason == Reason.LANGUAGE_UNAVAILABLE


def test_quiet_noise_releases_nothing(tiny: FasterWhisperTranscriber) -> None:
    rng = np.random.default_rng(7)
    noise = (0.01 * rng.standard_normal(16_000)).astype(np.float32)
    noise[4000:8000] *= 8  # a louder burst, so the audio checks let it through
    out = io.BytesIO()
    sf.write(out, noise, 16_000, format="WAV")
    [result] = run_all(VoicePipeline(tiny, None), [(out.getvalue(), 3, Stage.CHOOSE)])
    assert not result.decision.releases


@pytest.mark.corpus
@pytest.mark.slow
def test_spoken_digits_choose_cards_without_a_wrong_release(
    tiny: FasterWhisperTranscriber, fsdd: Path
) -> None:
    speakers = ("jackson", "nicolas", "theo", "yweweler")
    chosen = [(d, s, t) for d in range(1, 6) for s in speakers for t in (40, 41)]
    negatives = [(d, s, 40) for d in (0, 6, 7, 8, 9) for s in speakers]
    items = [
        ((fsdd / f"{d}_{s}_{t}.wav").read_bytes(), 5, Stage.CHOOSE)
        for d, s, t in chosen + negatives
    ]
    results = run_all(VoicePipeline(tiny, None, max_batch=4), items)
    right = 0
    for (digit, speaker, take), result in zip(chosen + negatives, results, strict=True):
        decision = result.decision
        if not 1 <= digit <= 5:
            assert not decision.releases, f"{digit}_{speaker}_{take} {result.transcripts}"
            continue
        if decision.releases:
            assert decision == Decision(Kind.CHOOSE, card=digit), f"{digit}_{speaker}_{take}"
            right += 1
    # A floor against regressions, not the figure: docs/voice.md has the measured accuracy.
    # On these 40 takes it fell to 17 when scores stopped overruling sound-alikes ("to").
    assert right >= 0.35 * len(chosen)


def test_each_decision_path_on_committed_clips(tiny: FasterWhisperTranscriber) -> None:
    """The rule behind each decision, on real recordings the repository ships."""
    wanted = {
        "piper_the_second_one.flac": ("decided", Decision(Kind.CHOOSE, card=2)),
        "piper_cancel.flac": ("grammar", Decision(Kind.CANCEL)),
        "piper_more_time.flac": ("grammar", Decision(Kind.MORE_TIME)),
        "piper_maybe.flac": ("veto", Decision(Kind.REFUSE, reason=Reason.HEDGE)),
        "piper_not_two.flac": ("veto", Decision(Kind.REFUSE, reason=Reason.NEGATION)),
    }
    rows = [m for m in MANIFEST if m["file"] in wanted]
    items = [((CLIPS / m["file"]).read_bytes(), m["cards"], Stage(m["stage"])) for m in rows]
    for row, result in zip(rows, run_all(VoicePipeline(tiny, None), items), strict=True):
        rule, decision = wanted[row["file"]]
        assert (result.rule, result.decision) == (rule, decision), (row["file"], result)
        if rule == "decided":
            assert result.probability >= tiny.calibration.card


@pytest.mark.corpus
@pytest.mark.slow
def test_real_non_answers_from_many_speakers_release_nothing(
    tiny: FasterWhisperTranscriber, fsdd: Path
) -> None:
    """speech_commands' "up", "down", "left", "on", "off", "go", "right" on one open card."""
    words = fsdd.parent / "speech_commands"
    require(words.is_dir(), "../shared/corpus/speech_commands")
    # The report split (speakers 2* and 3*): the thresholds were not fitted on these.
    paths = [
        p
        for w in ("up", "down", "left", "on", "off", "go", "right")
        for p in sorted((words / w).glob("[23]*.wav"))[:6]
    ]
    items = [(p.read_bytes(), 1, s) for p in paths for s in (Stage.CHOOSE, Stage.FINAL)]
    results = run_all(VoicePipeline(tiny, None), items)
    asked = [p for p in paths for _ in (0, 1)]
    released = [
        (p.name, r.transcripts) for p, r in zip(asked, results, strict=True) if r.decision.releases
    ]
    assert not released


def test_every_reading_and_transcript_gets_a_whole_sequence_score(
    tiny: FasterWhisperTranscriber,
) -> None:
    """Long readings are scored to their end-of-text, not cut off and scored minus infinity."""
    from voicegate.voice.consent import readings

    texts = tuple(r.text for r in readings(5, Stage.CHOOSE, ("en",)))
    samples = decode((CLIPS / "piper_the_second_one.flac").read_bytes()).samples
    hearing = tiny.transcribe(samples, candidates=(*texts, "more time please, right now then"))
    assert all(np.isfinite(score) for _, score in hearing.scores), hearing.scores
    assert hearing.hypotheses and all(np.isfinite(h.score) for h in hearing.hypotheses)
    # "the second one" spelt as the transcript is the same hypothesis, and the likeliest.
    best = max(hearing.scores, key=lambda pair: pair[1])
    assert best[0] == "the second one", hearing.scores


def test_told_the_card_question_every_reading_is_scored_to_its_end_of_text(
    tiny: FasterWhisperTranscriber,
) -> None:
    """The question prompt comes before every reading, and CTranslate2 counts it against the
    decoding length: the longest reading must still get its end-of-text step, no step spare."""
    from voicegate.voice.consent import readings

    texts = (*(r.text for r in readings(5, Stage.CHOOSE, ("en",))), "more time please, right now")
    samples = decode((CLIPS / "piper_the_second_one.flac").read_bytes()).samples
    [told] = tiny.transcribe_many([Utterance(samples, ("en",), texts, question="card")])
    assert all(np.isfinite(score) for _, score in told.scores), told.scores
    assert dict(told.scores)["the second one"] == max(score for _, score in told.scores)


def test_a_runtime_that_runs_other_decoding_steps_is_refused_at_load(
    tiny: FasterWhisperTranscriber,
) -> None:
    """The real model passed ``check_steps`` when the fixture loaded it; the same model made to
    run one step fewer than asked (as a CTranslate2 that counted otherwise would) is refused."""
    from voicegate.errors import ModelError
    from voicegate.voice.prompts import check_steps

    real = tiny._model

    class OneShort:
        n_mels = real.n_mels
        encode = staticmethod(real.encode)

        def generate(self, *args: Any, max_length: int, **kwargs: Any) -> Any:
            return real.generate(*args, max_length=max_length - 1, **kwargs)

    check_steps(real, tiny._tokens, tiny.multilingual)
    with pytest.raises(ModelError, match="decoding steps"):
        check_steps(OneShort(), tiny._tokens, tiny.multilingual)


def test_a_long_answer_to_a_yes_question_is_heard_to_its_last_words(
    tiny: FasterWhisperTranscriber, tmp_path: Path
) -> None:
    """A yes-or-no question has no prompt, and free decoding still gets its 32 tokens: the
    words after the sixteenth token are heard, or the cut transcript is refused as unclear.
    With fewer steps than asked for, "Yes, please send the message to my mother and then also
    tell my brother and" once came back whole, not refused, its last words gone."""
    require(shutil.which("espeak-ng") is not None, "espeak-ng")
    said = (
        "yes, please send the message to my mother, and then also tell my brother, "
        "no, do not send it"
    )
    wav = tmp_path / "long.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), said], check=True, capture_output=True)
    samples = decode(wav.read_bytes()).samples
    [hearing] = tiny.transcribe_many([Utterance(samples, ("en",), ("yes", "cancel"))])
    words = hearing.text.lower().replace(",", " ").replace(".", " ").split()
    assert "not" in words or hearing.refusal is Reason.UNCLEAR, hearing.text


def test_a_reading_scores_the_same_alone_and_beside_longer_ones(
    tiny: FasterWhisperTranscriber,
) -> None:
    """Every reading of a language is scored in one decoder call, which runs as long as its
    longest member: a short reading's score must not depend on what it is batched with."""
    samples = decode((CLIPS / "piper_the_second_one.flac").read_bytes()).samples
    short = ("two", "one")
    long = ("the second one please", "more time please, right now")
    beside = dict(tiny.transcribe(samples, candidates=(*short, *long)).scores)
    for text in (*short, *long):
        alone = dict(tiny.transcribe(samples, candidates=(text,)).scores)[text]
        assert np.isfinite(alone)
        assert beside[text] == pytest.approx(alone, abs=1e-4), (text, alone, beside)


def test_a_dropped_the_second_is_a_partial_hearing_of_the_second_one(
    tiny: FasterWhisperTranscriber, monkeypatch: pytest.MonkeyPatch
) -> None:
    """espeak-ng en-gb "the second one": told only the numbers, tiny.en also scores a bare
    "One." high, and that text, a part of the best transcript, counts for card two instead of
    against it. (The shipped card prompt also names "the first one", and there the bare "One."
    keeps about 0.3 % on this clip: the pipeline below decides it as shipped.)"""
    from voicegate.voice import calibration, consent
    from voicegate.voice.hypotheses import hypotheses

    [row] = clips(file="espeak_gb_the_second_one.flac")
    readings = consent.readings(2, Stage.CHOOSE, ("en",))
    samples = decode((CLIPS / row["file"]).read_bytes()).samples
    texts = tuple(r.text for r in readings)
    asked = Utterance(samples, ("en",), texts, question=calibration.question(Stage.CHOOSE, 2))
    numbers = {"tiny.en": {"card": {"en": "One, two, three, four, five."}}}
    with monkeypatch.context() as told:
        told.setattr(calibration, "PROMPTS", numbers)
        [hearing] = tiny.transcribe_many([asked])
    assert "second one" in hearing.text.lower(), hearing.text
    scored = hypotheses(readings, hearing, 2, Stage.CHOOSE)
    # The reading "one", or the free transcript "One." spelt like it: one hypothesis.
    [one] = [h for h in scored if consent.words_of(h.text) == ("1",)]
    second = Decision(Kind.CHOOSE, card=2)
    assert one.decision == second
    # Measured: the bare "one" holds about a tenth of the probability on this clip (0.098 on an
    # Intel Xeon, over 0.1 on an AMD EPYC: int8 scores differ a little between machines).
    total = sum(np.exp(h.score) for h in scored if np.isfinite(h.score))
    assert np.exp(one.score) / total > 0.05, (one, total)
    [result] = run_all(
        VoicePipeline(tiny, None), [((CLIPS / row["file"]).read_bytes(), 2, Stage.CHOOSE)]
    )
    assert (result.rule, result.decision) == ("decided", second), result
    assert result.probability >= tiny.calibration.card


def test_the_short_window_benchmark_hears_the_clips_and_releases_nothing() -> None:
    """Decoding at a short window (benchmarks/short_window.py: measured, not shipped) runs on
    the shipped clips over the recogniser's own code, and releases nothing: every model's
    thresholds were fitted at the full window."""
    require(models.describe("tiny.en").status in ("present", "not_assembled"), "tiny.en")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from short_window import ShortWindowTranscriber
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    short = ShortWindowTranscriber("tiny.en", device="cpu", threads=2)
    assert short.calibration.card == short.calibration.yes == float("inf")
    rows = clips(lang="en", source="piper") + clips(source="fsdd")
    items = [((CLIPS / m["file"]).read_bytes(), m["cards"], Stage(m["stage"])) for m in rows]
    results = run_all(VoicePipeline(short, None), items)
    assert not any(r.decision.releases for r in results)
    second = [r for m, r in zip(rows, results, strict=True) if "second_one" in m["file"]]
    assert "second" in " ".join(second[0].transcripts).lower()
