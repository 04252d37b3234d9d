"""The recogniser: a small ``Transcriber`` protocol, Whisper on CTranslate2, and a scripted fake.

One clip is encoded ONCE; the same encoder output feeds the free decoding (what was said) and the
closed-vocabulary scoring (how well each allowed phrase fits the audio). Scoring uses
``Whisper.align``, which returns each forced token's probability; a phrase's score is the sum of
the log-probabilities of its tokens, spelled with a capital first letter when the free decoding
began with one ("Two." / "two"), as the lexicon gives it otherwise. It is a prefix score: the
end-of-text probability is not available from ``align``. Whisper misses words that begin right
at the start of its window, so a clip that starts loud is heard after enough silence to make up
half a second of quiet.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from voicegate.errors import ModelError
from voicegate.reasons import Reason
from voicegate.voice import models

Samples = npt.NDArray[np.float32]

SAMPLE_RATE = 16_000
# Whisper's window: every input is padded to 30 s, 3000 mel frames, 1500 encoder frames.
WINDOW_FRAMES = 3000
HOP = 160
# Floor for a forced token whose probability underflows to zero.
MIN_PROB = 1e-12
# Encoder frames (20 ms each) kept after the end of the clip when scoring phrases. The decoder's
# cross-attention over all 1500 frames dominates the cost of scoring; over the clip plus 1 s of
# padding the phrase ranking was unchanged on FSDD, about 50x faster. The free decoding keeps the
# whole window: trimmed, it went from 17/30 to 6/30 right.
SCORE_TAIL_FRAMES = 50
# The quiet Whisper hears before the first loud frame. It learnt from windows where speech
# rarely starts at the first frame; on FSDD's tightly cut takes, making up 0.5 s of quiet took
# the closed-vocabulary check from 67 to 93 right of 120 (tiny.en, docs/voice.md). A clip that
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
class Hearing:
    """What the recogniser heard in one clip: free text, phrase scores and how sure it was."""

    text: str
    language: str
    no_speech_prob: float
    avg_logprob: float
    scores: tuple[tuple[str, float], ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    # Reason.NO_SPEECH when the no-speech and log-probability tests both say "hallucination";
    # Reason.LANGUAGE_UNAVAILABLE when no allowed language fits the model.
    refusal: Reason | None = None


@dataclass(frozen=True, slots=True)
class Utterance:
    """One clip to transcribe in a batch: its samples, allowed languages and phrases to score."""

    samples: Samples
    languages: tuple[str, ...] = ("en",)
    candidates: tuple[str, ...] = ()


class Transcriber(Protocol):
    """Turns 16 kHz mono float32 samples into a ``Hearing``.

    ``languages`` lists what the user may speak; a multilingual model picks the likeliest of them,
    an English-only model answers ``refusal=LANGUAGE_UNAVAILABLE`` when "en" is not allowed.
    ``candidates`` are the allowed phrases; each comes back scored, in the same order.
    """

    recogniser: str
    model: str

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


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Whisper's own hallucination test: no-speech AND low confidence means nothing was said."""

    no_speech_prob: float = 0.6
    avg_logprob: float = -1.0

    def says_silence(self, no_speech_prob: float, avg_logprob: float) -> bool:
        """True when the free decoding is most likely a hallucination over silence or noise."""
        return no_speech_prob > self.no_speech_prob and avg_logprob < self.avg_logprob


class FasterWhisperTranscriber:
    """Whisper through CTranslate2 (the engine of faster-whisper), without timestamps."""

    recogniser = "faster-whisper"

    def __init__(
        self,
        model: str = "tiny.en",
        *,
        device: str = "auto",
        compute_type: str = "default",
        threads: int = 0,
        thresholds: Thresholds = Thresholds(),
        max_new_tokens: int = 32,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        import ctranslate2
        import tokenizers
        from faster_whisper.feature_extractor import FeatureExtractor

        path = models.ensure(model)
        if device == "auto":
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        if compute_type == "default":
            compute_type = "int8_float16" if device == "cuda" else "int8"
        try:
            self._model = ctranslate2.models.Whisper(
                str(path), device=device, compute_type=compute_type, intra_threads=threads
            )
        except (RuntimeError, ValueError) as exc:
            raise ModelError(f"{model}: CTranslate2 could not load {path}: {exc}") from exc
        self.model = model
        self.device = device
        self.compute_type = compute_type
        self.multilingual = bool(self._model.is_multilingual)
        self._tokens = tokenizers.Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
        self._features = FeatureExtractor(feature_size=self._model.n_mels)
        self._thresholds = thresholds
        self._max_new_tokens = max_new_tokens
        self._clock = clock
        self._toks: dict[str, _Tok] = {}

    def transcribe(
        self,
        samples: Samples,
        *,
        languages: Sequence[str] = ("en",),
        candidates: Sequence[str] = (),
    ) -> Hearing:
        """Transcribe one clip and score the candidate phrases against it."""
        return self.transcribe_many([Utterance(samples, tuple(languages), tuple(candidates))])[0]

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        """Transcribe several clips with one encoder call, one decode call and one align call."""
        if not utterances:
            return []
        import ctranslate2

        t0 = self._clock()
        feats = np.stack([self._mel(u.samples) for u in utterances])
        # On the host even with CUDA: phrase scoring slices it with numpy (about 3 MB a clip).
        encoded = self._model.encode(ctranslate2.StorageView.from_array(feats), to_cpu=True)
        t1 = self._clock()
        langs = self._languages(encoded, utterances)
        prompts = [self._tokenizer(lang).sot_sequence_without_timestamps for lang in langs]
        results = self._model.generate(
            encoded,
            [list(p) for p in prompts],
            beam_size=1,
            max_length=self._max_new_tokens,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
        )
        t2 = self._clock()
        texts = [
            self._tokenizer(lang).decode(result.sequences_ids[0]).strip()
            for lang, result in zip(langs, results, strict=True)
        ]
        capital = [text[:1].isupper() for text in texts]
        scores = self._score(encoded, utterances, langs, capital)
        t3 = self._clock()
        timings = {
            "encoder": (t1 - t0) * 1000 / len(utterances),
            "decoding": (t2 - t1) * 1000 / len(utterances),
            "closed_vocabulary": (t3 - t2) * 1000 / len(utterances),
        }
        hearings = []
        for u, lang, text, result, scored in zip(
            utterances, langs, texts, results, scores, strict=True
        ):
            nsp = float(result.no_speech_prob)
            # With length_penalty=1 CTranslate2's score is the length-normalised log-probability.
            avg = float(result.scores[0]) if result.scores else 0.0
            refusal = None
            if lang not in u.languages:
                refusal = Reason.LANGUAGE_UNAVAILABLE
            elif self._thresholds.says_silence(nsp, avg):
                refusal = Reason.NO_SPEECH
            hearings.append(Hearing(text, lang, nsp, avg, scored, dict(timings), refusal))
        return hearings

    def _mel(self, samples: Samples) -> npt.NDArray[np.float32]:
        x = np.asarray(samples, dtype=np.float32)
        heard = np.concatenate([np.zeros(lead_in(x), np.float32), x])
        mel = self._features(heard)[:, :WINDOW_FRAMES]
        if mel.shape[1] < WINDOW_FRAMES:
            mel = np.pad(mel, ((0, 0), (0, WINDOW_FRAMES - mel.shape[1])))
        return np.ascontiguousarray(mel, dtype=np.float32)

    def _languages(self, encoded: Any, utterances: Sequence[Utterance]) -> list[str]:
        """The likeliest allowed language per clip; an English-only model only knows "en"."""
        if not self.multilingual:
            return ["en" for _ in utterances]
        needs = [len(u.languages) > 1 for u in utterances]
        detected: list[list[tuple[str, float]]] = []
        if any(needs):
            detected = self._model.detect_language(encoded)
        chosen = []
        for i, u in enumerate(utterances):
            if not needs[i]:
                chosen.append(u.languages[0] if u.languages else "en")
                continue
            probs = {tok.strip("<|>"): p for tok, p in detected[i]}
            chosen.append(max(u.languages, key=lambda lang: probs.get(lang, 0.0)))
        return chosen

    def _score(
        self,
        encoded: Any,
        utterances: Sequence[Utterance],
        langs: Sequence[str],
        capital: Sequence[bool],
    ) -> list[tuple[tuple[str, float], ...]]:
        """Sum log-probability of each candidate, in one align call per language."""
        import ctranslate2

        out: list[dict[str, float]] = [{} for _ in utterances]
        full = np.asarray(encoded)
        for lang in sorted(set(langs)):
            tok = self._tokenizer(lang)
            rows: list[int] = []
            owners: list[tuple[int, str]] = []
            seqs: list[list[int]] = []
            frames: list[int] = []
            for i, u in enumerate(utterances):
                if langs[i] != lang:
                    continue
                n = max(1, min(WINDOW_FRAMES, (lead_in(u.samples) + len(u.samples)) // HOP))
                for text in dict.fromkeys(u.candidates):
                    # One spelling, cased as the free decoding wrote this clip: the best of
                    # "Two" and "two" cost twice as much and got as many FSDD takes right.
                    ids = tok.encode(" " + _cased(text, capital[i]))
                    if ids:
                        rows.append(i)
                        owners.append((i, text))
                        seqs.append(ids)
                        frames.append(n)
            if not seqs:
                continue
            keep = min(full.shape[1], max(frames) // 2 + SCORE_TAIL_FRAMES)
            frames = [min(n, 2 * keep) for n in frames]
            batch = ctranslate2.StorageView.from_array(np.ascontiguousarray(full[rows, :keep]))
            results = self._model.align(batch, list(tok.sot_sequence), seqs, frames)
            for (i, text), result in zip(owners, results, strict=True):
                probs = np.maximum(np.asarray(result.text_token_probs, dtype=np.float64), MIN_PROB)
                score = float(np.log(probs).sum())
                out[i][text] = score
        return [
            tuple((text, out[i].get(text, float("-inf"))) for text in dict.fromkeys(u.candidates))
            for i, u in enumerate(utterances)
        ]

    def _tokenizer(self, lang: str) -> _Tok:
        if lang not in self._toks:
            self._toks[lang] = _Tok(self._tokens, self.multilingual, lang)
        return self._toks[lang]


class _Tok:
    """faster-whisper's tokenizer with the no-timestamps prompt spelled out."""

    def __init__(self, tokens: Any, multilingual: bool, language: str) -> None:
        from faster_whisper.tokenizer import Tokenizer

        self._tok = Tokenizer(tokens, multilingual, task="transcribe", language=language)
        self.sot_sequence: list[int] = list(self._tok.sot_sequence)
        self.sot_sequence_without_timestamps = [*self.sot_sequence, self._tok.no_timestamps]

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode([i for i in ids if i < self._tok.eot]))


def _cased(text: str, capital: bool) -> str:
    """The phrase with a capital first letter when the clip's transcript began with one."""
    text = text.strip()
    return text[:1].upper() + text[1:] if capital else text


class FakeTranscriber:
    """Answers scripted hearings in order, for unit tests; records what it was asked."""

    recogniser = "fake"

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
            hearing = next(self._hearings)
            given = dict(hearing.scores)
            scores = tuple((c, given.get(c, float("-inf"))) for c in dict.fromkeys(u.candidates))
            out.append(dataclasses.replace(hearing, scores=scores))
        return out
