"""One voice answer end to end: bytes → clip → replay check → hearing → grammar → decision.

Audio refusals, a reused recording, a busy recogniser, no speech and every doubt of the grammar
all come back as a ``REFUSE`` decision with its reason; only the recogniser's own failures raise.
Decoding and model calls run in worker threads, so a long upload stalls no other request.
Requests that arrive while the model is busy wait in a short queue and go into the next model
call together, one encoder batch (at most ``max_batch``); when ``max_waiting`` answers are
already in the house, a new one is refused with ``BUSY``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from voicegate.domain import Decision, Stage
from voicegate.errors import AudioRefused, HearingUnavailable, Refused, Throttled
from voicegate.reasons import Kind, Reason
from voicegate.voice import calibration, consent, decision, enrolment, templates
from voicegate.voice.answer_model import meanings
from voicegate.voice.audio import Clip, decode
from voicegate.voice.decision import Rule
from voicegate.voice.enrolment import meaning_text
from voicegate.voice.hypotheses import LEXICONS, SPOKEN, hypotheses, read_transcript
from voicegate.voice.leading import answer_part
from voicegate.voice.taught import Taught
from voicegate.voice.transcribe import Hearing, Transcriber, Utterance

logger = logging.getLogger(__name__)


class Guard(Protocol):
    """The replay check (``voicegate.voice.fingerprint.ReplayGuard``)."""

    async def check_and_remember(self, user: str, clip: Clip) -> str:
        """Remember the clip and return its id; raise ``AudioRefused(AUDIO_REUSED)`` on reuse."""
        ...


class Enrolments(Protocol):
    """Where a user's taught answers come from (the store, in the server)."""

    async def enrolment(self, user: str) -> templates.Enrolment | None:
        """The user's enrolment; None when they taught nothing."""
        ...


@dataclass(frozen=True, slots=True)
class VoiceResult:
    """What one voice answer decided, with everything a receipt or a debugging session needs."""

    decision: Decision
    transcripts: tuple[str, ...] = ()
    readings: tuple[tuple[str, float], ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    fingerprint_id: str | None = None
    recogniser: str = ""
    model: str = ""
    language: str | None = None
    rule: Rule | None = None
    probability: float = 0.0
    # The fused probability of the recogniser's winner, where the user's templates weighed in.
    fused: float | None = None
    # What the user's templates said about this answer; None where they taught nothing.
    taught: Taught | None = None
    # The answer model's probability of the decision, where it weighed in.
    heard: float | None = None
    # The minutes a released yes asked to allow the same again for ("yes, for ten minutes").
    grant_minutes: int | None = None


@dataclass(frozen=True, slots=True)
class Take:
    """One enrolment take: its features, and what the recogniser heard in it ("" for nothing)."""

    features: templates.Matrix = field(repr=False)
    heard: str = ""


class _Busy(Exception):
    """The queue in front of the recogniser is full."""


@dataclass(slots=True)
class _Waiting:
    utterance: Utterance
    future: asyncio.Future[Hearing]


class VoicePipeline:
    """Decides voice answers; shares one recogniser between concurrent requests."""

    def __init__(
        self,
        transcriber: Transcriber,
        guard: Guard | None,
        *,
        languages: Sequence[str] = ("en",),
        clock: Callable[[], float] = time.perf_counter,
        calibrated: calibration.Calibration | None = None,
        max_batch: int = 4,
        max_waiting: int = 16,
        workers: int = 1,
        enrolments: Enrolments | None = None,
    ) -> None:
        self.transcriber = transcriber
        self.guard = guard
        self.enrolments = enrolments
        self.languages = tuple(languages)
        self.lexicons = tuple(lex for lang in self.languages for lex in LEXICONS.get(lang, ()))
        self.calibration = calibrated if calibrated is not None else transcriber.calibration
        self.max_batch = max_batch
        self.max_waiting = max_waiting
        self.workers = workers
        self._clock = clock
        self._admitted = 0
        self._queue: list[_Waiting] = []
        self._running = 0
        # The event loop keeps only weak references to tasks; these keep the drains alive.
        self._drains: set[asyncio.Task[None]] = set()

    @property
    def waiting(self) -> int:
        """How many utterances wait now for a model call that has not taken them yet."""
        return len(self._queue)

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
        """The decision for one uploaded answer to a set of ``cards`` cards at ``stage``."""
        # Admission comes before the replay check: a BUSY answer must leave the recording unused,
        # so the device can send the same one again.
        if self._admitted >= self.max_waiting:
            return self._refused(Reason.BUSY, {})
        self._admitted += 1
        try:
            return await self._decide(audio, user, cards, stage, content_type, card_words)
        finally:
            self._admitted -= 1

    async def _decide(
        self,
        audio: bytes,
        user: str,
        cards: int,
        stage: Stage,
        content_type: str | None,
        card_words: Sequence[str],
    ) -> VoiceResult:
        timings: dict[str, float] = {}
        t0 = self._clock()
        try:
            # Decoding a long recording takes CPU time; in a worker thread it stalls no other
            # request. ``decode`` still checks the size and the declared duration first.
            clip = await asyncio.to_thread(decode, audio, content_type)
        except AudioRefused as exc:
            return self._refused(exc.reason, timings)
        t1 = self._clock()
        timings["decode"] = _ms(t1 - t0)
        fingerprint_id = None
        if self.guard is not None:
            try:
                fingerprint_id = await self.guard.check_and_remember(user, clip)
            except AudioRefused as exc:
                timings["fingerprint"] = _ms(self._clock() - t1)
                return self._refused(exc.reason, timings)
        t2 = self._clock()
        timings["fingerprint"] = _ms(t2 - t1)
        readings = consent.readings(cards, stage, self.lexicons)
        utterance = Utterance(
            clip.samples,
            self.languages,
            tuple(r.text for r in readings),
            tuple(SPOKEN.get(r.lang, "en") for r in readings),
            question=calibration.question(stage, cards),
        )
        try:
            hearing = await self._hear(utterance)
        except _Busy:
            return self._refused(Reason.BUSY, timings, fingerprint_id)
        except HearingUnavailable as exc:
            logger.warning("voice answer refused: %s", exc)
            return self._refused(Reason.HEARING_UNAVAILABLE, timings, fingerprint_id)
        timings.update({k: round(v, 3) for k, v in hearing.timings_ms.items()})
        t3 = self._clock()
        transcript = read_transcript(hearing.text, cards, stage, card_words)
        taught: Taught | None = None
        minutes: int | None = None
        if hearing.refusal is not None:
            ruling = decision.refused_by_recogniser(hearing.refusal, transcript)
            said = None if hearing.answers is None else meanings(hearing.answers, cards, stage)
            ruling = decision.heard_cancel(ruling, said, transcript, self.calibration)
        elif (words := consent.grant_of(hearing.text, cards, stage, card_words)) is not None:
            ruling, taught = await self._granted(
                words, clip, utterance, user, cards, stage, card_words, timings
            )
            minutes = words.minutes if ruling.decision.releases else None
        else:
            scored = hypotheses(readings, hearing, cards, stage, card_words)
            ruling, taught = await self._verdict(
                scored, transcript, hearing, user, cards, stage, timings
            )
        timings.setdefault("grammar", _ms(self._clock() - t3))
        return VoiceResult(
            decision=ruling.decision,
            transcripts=(hearing.text,),
            readings=tuple(sorted(hearing.scores, key=lambda p: -p[1])),
            timings_ms=timings,
            fingerprint_id=fingerprint_id,
            recogniser=self.transcriber.recogniser,
            model=self.transcriber.model,
            language=hearing.language,
            rule=ruling.rule,
            probability=ruling.probability,
            fused=ruling.fused,
            taught=taught,
            heard=ruling.heard,
            grant_minutes=minutes,
        )

    async def _verdict(
        self,
        scored: Sequence[decision.Hypothesis],
        transcript: Decision,
        hearing: Hearing,
        user: str,
        cards: int,
        stage: Stage,
        timings: dict[str, float],
    ) -> tuple[decision.Ruling, Taught | None]:
        """Rules 1-4 of ``voice/decision.py`` and the user's templates, for one hearing."""
        started = self._clock()
        ruling = decision.weigh(scored, transcript, stage, self.calibration, cards)
        timings["grammar"] = _ms(self._clock() - started)
        taught = await self._taught(user, hearing, timings)
        ruling = decision.fuse(ruling, scored, transcript, taught, stage, self.calibration, cards)
        said = None if hearing.answers is None else meanings(hearing.answers, cards, stage)
        ruling = decision.agree(ruling, said, stage, self.calibration, cards)
        likeliest = decision.likeliest(scored, self.calibration, stage, cards)
        return decision.heard_cancel(ruling, said, transcript, self.calibration, likeliest), taught

    async def _granted(
        self,
        words: consent.GrantWords,
        clip: Clip,
        whole: Utterance,
        user: str,
        cards: int,
        stage: Stage,
        card_words: Sequence[str],
        timings: dict[str, float],
    ) -> tuple[decision.Ruling, Taught | None]:
        """A yes followed by a grant's length ("yes, for ten minutes"): the answer part of the
        clip (``leading.answer_part``) heard again and decided by every rule a plain answer
        passes, the answer model's agreement included; it releases only where that is the
        release the words before the length say, and a cancel or wait it hears there is the
        two hearings disagreeing, not an answer. The length itself releases nothing."""
        part = answer_part(clip.samples)
        if part is None:
            return decision.Ruling(consent.refuse(Reason.GRANT_NO_PAUSE), 0.0, Rule.GRANT), None
        started = self._clock()
        try:
            heard = await self._hear(dataclasses.replace(whole, samples=part))
        except HearingUnavailable as exc:
            # As for the whole clip: refused, never guessed from the whole clip's hearing alone.
            logger.warning("voice answer refused: %s", exc)
            refusal = consent.refuse(Reason.HEARING_UNAVAILABLE)
            return decision.Ruling(refusal, 0.0, Rule.GRANT), None
        timings["answer_part"] = _ms(self._clock() - started)
        said = read_transcript(heard.text, cards, stage, card_words)
        if heard.refusal is not None:
            return decision.refused_by_recogniser(heard.refusal, said), None
        readings = consent.readings(cards, stage, self.lexicons)
        scored = hypotheses(readings, heard, cards, stage, card_words)
        ruling, taught = await self._verdict(scored, said, heard, user, cards, stage, timings)
        answered = ruling.decision.kind is not Kind.REFUSE
        if answered and ruling.decision != decision.merge(cards, stage)(words.decision):
            return decision.Ruling(
                decision.UNCLEAR, ruling.probability, Rule.GRANT_DISAGREE
            ), taught
        return ruling, taught

    async def take(self, clip: Clip) -> Take:
        """One enrolment take as the recogniser meets it: its features (``Transcriber.frames``,
        empty when the clip holds no speech to learn from) and its best transcript, heard as an
        answer to a choice among five cards, so the page can say when a take sounds like
        another answer. One model call in the queue, as an answer is; a scripted recogniser
        (``scripted``, the unit tests') gives features only. Admitted like an answer: past
        ``max_waiting`` it raises ``Throttled(BUSY)``, retry in a second (the answer route's
        ``intake.BUSY_RETRY_AFTER``)."""
        if self._admitted >= self.max_waiting:
            raise Throttled(Reason.BUSY, 1)
        self._admitted += 1
        try:
            if getattr(self.transcriber, "scripted", False):
                return Take(await asyncio.to_thread(self.transcriber.frames, clip.samples))
            asked = calibration.question(Stage.CHOOSE, enrolment.MAX_CARD)
            try:
                hearing = await self._hear(Utterance(clip.samples, self.languages, question=asked))
            except HearingUnavailable as exc:
                raise Refused(Reason.HEARING_UNAVAILABLE, str(exc)) from None
            frames = hearing.frames
            if frames is None:
                frames = await asyncio.to_thread(self.transcriber.frames, clip.samples)
            return Take(frames, hearing.text if hearing.refusal is None else "")
        finally:
            self._admitted -= 1

    async def _taught(
        self, user: str, hearing: Hearing, timings: dict[str, float]
    ) -> Taught | None:
        """What the user's templates say about this answer; None when they taught nothing."""
        if self.enrolments is None or hearing.frames is None:
            return None
        started = self._clock()
        held = await self.enrolments.enrolment(user)
        if held is None or not held.templates:
            return None
        frames = hearing.frames
        # DTW against every template: a few milliseconds each, so off the event loop.
        match = await asyncio.to_thread(
            lambda: templates.match(frames, held.templates, dict(held.radii))
        )
        timings["templates"] = _ms(self._clock() - started)
        return Taught(
            match.nearest,
            match.meaning is not None,
            held.hard,
            match.distances,
            {m: r.radius for m, r in held.radii.items()},
        )

    def _refused(
        self, reason: Reason, timings: Mapping[str, float], fingerprint_id: str | None = None
    ) -> VoiceResult:
        return VoiceResult(
            Decision(Kind.REFUSE, reason=reason),
            timings_ms=dict(timings),
            fingerprint_id=fingerprint_id,
            recogniser=self.transcriber.recogniser,
            model=self.transcriber.model,
        )

    async def _hear(self, utterance: Utterance) -> Hearing:
        """Queue one utterance for the next model call and wait for its hearing."""
        waiting = _Waiting(utterance, asyncio.get_running_loop().create_future())
        self._queue.append(waiting)
        if self._running < self.workers:
            self._running += 1
            task = asyncio.get_running_loop().create_task(self._drain())
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)
        return await waiting.future

    async def _drain(self) -> None:
        """Run model calls until the queue is empty, taking up to ``max_batch`` at a time."""
        try:
            while self._queue:
                batch = self._queue[: self.max_batch]
                del self._queue[: len(batch)]
                try:
                    hearings = await asyncio.to_thread(
                        self.transcriber.transcribe_many, [w.utterance for w in batch]
                    )
                # The one boundary where any recogniser failure is handed to every request of
                # the batch, so none of them waits for ever; each caller then raises it.
                except Exception as exc:
                    for w in batch:
                        if not w.future.done():
                            w.future.set_exception(exc)
                    continue
                for w, hearing in zip(batch, hearings, strict=True):
                    if not w.future.done():
                        w.future.set_result(hearing)
        finally:
            self._running -= 1


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# Model calls in flight at once when workers hear: the default thread pool's size on two
# cores (min(32, cores + 4) = 6) less room for decoding and the store.
REMOTE_CALLS = 4


def default_model(languages: Sequence[str]) -> str:
    """The model for ``languages``: tiny.en for English alone, else the multilingual base."""
    return "tiny.en" if tuple(languages) == ("en",) else "base"


def as_json(result: VoiceResult) -> dict[str, object]:
    """The JSON shape of ``voicegate decide --json``."""
    return {
        "decision": result.decision.kind.value,
        "card": result.decision.card,
        "reason": result.decision.reason.value if result.decision.reason else None,
        "transcripts": list(result.transcripts),
        "readings": [
            {"text": t, "score": round(s, 3) if math.isfinite(s) else None}
            for t, s in result.readings
        ],
        "timings_ms": dict(result.timings_ms),
        "language": result.language,
        "model": result.model,
        "recogniser": result.recogniser,
        "rule": result.rule or "",
        "probability": round(result.probability, 4),
        "fused_probability": None if result.fused is None else round(result.fused, 4),
        "answer_model_probability": None if result.heard is None else round(result.heard, 4),
        "grant_minutes": result.grant_minutes,
        "taught": None if result.taught is None else taught_json(result.taught),
    }


def taught_json(taught: Taught) -> dict[str, object]:
    """What the user's templates said, by the stored names of the meanings."""
    return {
        "hard": taught.hard,
        "nearest": None if taught.nearest is None else meaning_text(taught.nearest),
        "clear": taught.clear,
        "distances": {meaning_text(m): round(d, 3) for m, d in taught.distances.items()},
        "radii": {meaning_text(m): round(r, 3) for m, r in taught.radii.items()},
    }
