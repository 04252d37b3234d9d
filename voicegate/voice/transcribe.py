"""The recogniser's contract: a small ``Transcriber`` protocol, what it hears, and a scripted fake.

A recogniser encodes one clip once and, from that one encoder output, returns the free decoding
(its best few transcripts, each in every language the user may speak) and a whole-sequence
score for every reading the card allows: the log-probability of exactly that text followed by
end-of-text. The real one is ``voicegate.voice.whisper.FasterWhisperTranscriber``. Whisper misses
words that begin right at the start of its window, so a clip that starts loud is heard after
enough silence to make up half a second of quiet (``lead_in``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from voicegate.reasons import Reason
from voicegate.voice import templates
from voicegate.voice.calibration import Calibration

Samples = npt.NDArray[np.float32]

SAMPLE_RATE = 16_000
# Whisper's window: every input is padded to 30 s, 3000 mel frames, 1500 encoder frames.
WINDOW_FRAMES = 3000
HOP = 160
# The quiet Whisper hears before the first loud frame. It learnt from windows where speech
# rarely starts at the first frame; on FSDD's tightly cut takes, making up 0.5 s of quiet took
# the previous release's closed-vocabulary check from 67 to 93 right of 120 (tiny.en). A clip that
# already starts quietly, as a recording from the approve page does, is heard as it is.
LEAD_IN = SAMPLE_RATE // 2
# A 10 ms frame is loud from 30 dB below the loudest frame of the clip.
ONSET = 10 ** (-30 / 20)


def lead_in(samples: Samples) -> int:
    """Samples of silence to put before ``samples`` so the first loud frame comes after LEAD_IN."""
    frames = len(samples) // HOP
    if frames == 0:
        return LEAD_IN
    x = np.asarray(samples[: frames * HOP], dtype=np.float64).reshape(frames, HOP)
    rms = np.sqrt(np.mean(x * x, axis=1))
    onset = int(np.argmax(rms >= rms.max() * ONSET)) * HOP
    return max(0, LEAD_IN - onset)


@dataclass(frozen=True, slots=True)
class Heard:
    """One free transcript and its whole-sequence score, log P(text, language | audio).

    ``reading`` names the candidate spelt exactly like it, if any: the two are one hypothesis.
    """

    text: str
    language: str
    score: float
    reading: str | None = None


@dataclass(frozen=True, slots=True)
class Hearing:
    """What the recogniser heard in one clip: free text, reading scores and how sure it was.

    ``text`` is the likeliest free transcript and ``language`` its language. ``hypotheses``
    holds every free transcript of every decoded language, best first within a language.
    ``scores`` gives each candidate reading's whole-sequence log-probability, in the same units.
    """

    text: str
    language: str
    no_speech_prob: float
    avg_logprob: float
    scores: tuple[tuple[str, float], ...] = ()
    hypotheses: tuple[Heard, ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    # Reason.NO_SPEECH when the no-speech and log-probability tests both say "hallucination";
    # Reason.LANGUAGE_UNAVAILABLE when no allowed language fits the model.
    refusal: Reason | None = None
    # The clip's features for the user's templates (``Transcriber.frames``), from this same
    # encoder pass; None where the recogniser gave none.
    frames: npt.NDArray[np.float32] | None = field(default=None, repr=False, compare=False)
    # The answer model's P(class) over ``answer_model.CLASSES``, from its own short-window
    # encoder pass; None where the recogniser has no answer model.
    answers: tuple[float, ...] | None = None


@dataclass(frozen=True, slots=True)
class Utterance:
    """One clip to transcribe in a batch: its samples, allowed languages and phrases to score.

    ``candidate_languages`` names the Whisper language each candidate is scored in, in the same
    order; when it is empty every candidate is scored in the first allowed language.
    ``question`` is the kind of question the answer is to, as the calibration names it:
    ``"card"`` (which of several cards) or ``"yes"`` (yes or no); "" for none.
    """

    samples: Samples
    languages: tuple[str, ...] = ("en",)
    candidates: tuple[str, ...] = ()
    candidate_languages: tuple[str, ...] = ()
    question: str = ""

    def language_of(self, index: int) -> str:
        """The Whisper language candidate ``index`` is scored in."""
        if self.candidate_languages:
            return self.candidate_languages[index]
        return self.languages[0] if self.languages else "en"


class Transcriber(Protocol):
    """Turns 16 kHz mono float32 samples into a ``Hearing``.

    ``languages`` lists what the user may speak; a multilingual model hears the clip in each of
    them, an English-only model answers ``refusal=LANGUAGE_UNAVAILABLE`` when "en" is not allowed.
    ``candidates`` are the allowed phrases; each comes back scored, in the same order.
    ``calibration`` holds the decision's thresholds for this model (``voice.calibration``).
    ``frames`` gives the features a user's templates are made of, this model's own
    (``voice.templates``); each hearing carries the same for its clip.
    """

    recogniser: str
    model: str
    calibration: Calibration

    def transcribe(
        self,
        samples: Samples,
        *,
        languages: Sequence[str] = ("en",),
        candidates: Sequence[str] = (),
    ) -> Hearing:
        """Transcribe one clip and score the candidate phrases against it."""
        ...

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        """Transcribe several clips with one encoder call."""
        ...

    def frames(self, samples: Samples) -> npt.NDArray[np.float32]:
        """The clip's features for templates: empty when it holds no speech to match."""
        ...


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Whisper's own hallucination test: no-speech AND low confidence means nothing was said."""

    no_speech_prob: float = 0.6
    avg_logprob: float = -1.0

    def says_silence(self, no_speech_prob: float, avg_logprob: float) -> bool:
        """True when the free decoding is most likely a hallucination over silence or noise."""
        return no_speech_prob > self.no_speech_prob and avg_logprob < self.avg_logprob


class FakeTranscriber:
    """Answers scripted hearings in order, for unit tests; records what it was asked.

    A scripted hearing without free transcripts gets its ``text`` as the only one, scored like
    the candidate it spells (or at its ``avg_logprob``), as the real recogniser would.
    """

    recogniser = "fake"
    # Its hearings are scripted for answers: an enrolment take gets features only, never a
    # hearing (``VoicePipeline.take``), so the script stays the answers'.
    scripted = True
    # Scripted scores are made up, so no fitted threshold applies: an even-odds rule.
    calibration = Calibration(0.5, 0.5, 5, "scripted hearings of the unit tests", alone=0.0)

    def __init__(self, hearings: Sequence[Hearing], *, model: str = "fake") -> None:
        self.model = model
        self._hearings: Iterator[Hearing] = iter(list(hearings))
        self.calls: list[Utterance] = []
        self.batches: list[int] = []

    def transcribe(
        self,
        samples: Samples,
        *,
        languages: Sequence[str] = ("en",),
        candidates: Sequence[str] = (),
    ) -> Hearing:
        """The next scripted hearing, with scores only for the candidates asked about."""
        return self.transcribe_many([Utterance(samples, tuple(languages), tuple(candidates))])[0]

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        """The next scripted hearing for each utterance."""
        self.batches.append(len(utterances))
        out = []
        for u in utterances:
            self.calls.append(u)
            hearing = next(self._hearings, None)
            if hearing is None:  # a StopIteration would hang a caller in asyncio.to_thread
                raise RuntimeError(f"the scripted hearings ran out at utterance {len(self.calls)}")
            given = dict(hearing.scores)
            scores = tuple((c, given.get(c, float("-inf"))) for c in dict.fromkeys(u.candidates))
            free = hearing.hypotheses or (_spelt(hearing, u.candidates),)
            frames = self.frames(u.samples)
            out.append(dataclasses.replace(hearing, scores=scores, hypotheses=free, frames=frames))
        return out

    def frames(self, samples: Samples) -> npt.NDArray[np.float32]:
        """MFCCs: the fake has no encoder (``voice.templates.features``)."""
        return templates.features(samples)


def _spelt(hearing: Hearing, candidates: Sequence[str]) -> Heard:
    """The scripted text as a free transcript, the same hypothesis as the candidate it spells."""
    words = "".join(c for c in hearing.text.casefold() if c.isalnum() or c.isspace()).strip()
    given = dict(hearing.scores)
    if words in candidates and words in given:
        return Heard(hearing.text, hearing.language, given[words], words)
    return Heard(hearing.text, hearing.language, hearing.avg_logprob)
