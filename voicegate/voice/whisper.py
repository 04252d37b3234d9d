"""Whisper on CTranslate2 (the engine of faster-whisper): one encoder pass, every score from it.

For a batch of clips: one encoder call; then, for each language a clip may be spoken in, a beam
search for its free transcripts and one forced decoding of every candidate reading and every
free transcript. A text's score is read off the forced decoding's per-step log-probabilities
over the whole vocabulary: the log-probability of each of its tokens and then of end-of-text, so
"yes" is not scored as the start of "yesterday". (``Whisper.align`` cannot give this: it
normalises over text tokens only, and end-of-text gets no probability there.) With more than
one language, a text's score also holds the language's own probability from Whisper's language
detection, so every score is log P(text, language | audio) and all of them compare. Where the
model's calibration names one, the question asked comes first as Whisper's previous text
(voice/prompts.py), for the free transcripts and the readings alike. The encoder hears Whisper's
full 30 s window; the answer model has its own short one (voice/windows.py).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voicegate.errors import ModelError
from voicegate.reasons import Reason
from voicegate.voice import answer_model, calibration, models, templates, windows
from voicegate.voice.prompts import Prompt, check_steps, spelled
from voicegate.voice.transcribe import (
    HOP,
    WINDOW_FRAMES,
    Heard,
    Hearing,
    Samples,
    Thresholds,
    Utterance,
    lead_in,
)

# Free transcripts kept per language: faster-whisper's own default beam. Each is scored like a
# reading and stands for "something else was said" when the grammar reads it as no answer.
BEAM = 5
# Encoder frames (20 ms each) kept after the end of the clip for the forced decodings. The
# decoder's cross-attention over all 1500 frames dominates their cost; over the clip plus 1 s
# the ranking of readings was unchanged on FSDD, about 50x faster. The beam search keeps the
# whole encoded window: trimmed after a 30 s encoding, it went from 17/30 to 6/30 right
# (docs/voice-measurements.md).
SCORE_TAIL_FRAMES = 50
# CTranslate2 4.8 on CPU scored a batch attending over exactly 80 encoder frames 3 times (tiny.en)
# to 8 times (base) slower than over 79 or 81, and no other length from 40 to 330 stood out
# (34 readings told the card question, 2026-12-03, 2 cores, "Intel(R) Xeon(R) Processor"):
# one frame more there.
SLOW_KEEP = 80
# A language Whisper's detection gives less than this share of the allowed ones is not decoded:
# all its hypotheses together could carry at most that much of the probability, and decoding
# and scoring a language is most of the cost of a clip.
MIN_LANGUAGE_SHARE = 1e-3
DEFAULT_THRESHOLDS = Thresholds()


class FasterWhisperTranscriber:
    """Whisper through CTranslate2, without timestamps."""

    recogniser = "faster-whisper"

    def __init__(
        self,
        model: str = "tiny.en",
        *,
        device: str = "auto",
        compute_type: str = "default",
        threads: int = 0,
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        # A cut answer is refused; 32 tokens hold a long spoken answer (docs/voice-measurements.md).
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
        self.answer_model = answer_model.load(model)
        self.calibration = calibration.of(model)
        if self.answer_model is not None:
            self.calibration = dataclasses.replace(
                self.calibration, answers=self.answer_model.thresholds
            )
        self.device = device
        self.compute_type = compute_type
        self.multilingual = bool(self._model.is_multilingual)
        self._tokens = tokenizers.Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
        self._features = FeatureExtractor(feature_size=self._model.n_mels)
        self._thresholds = thresholds
        self._max_new_tokens = max_new_tokens
        self._clock = clock
        self._prompts: dict[tuple[str, str], Prompt] = {}
        check_steps(self._model, self._tokens, self.multilingual)

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
        """Transcribe several clips with one encoder call, then decode and score per language."""
        if not utterances:
            return []
        t0 = self._clock()
        clips = [u.samples for u in utterances]
        # One log-mel per clip, for the encoder's 30 s window and the answer model's short one.
        mels = [self._mel(samples) for samples in clips]
        full = self._encode(clips, mels)
        t1 = self._clock()
        priors = self._priors(full, [self._spoken(u) for u in utterances])
        spoken = [tuple(prior) for prior in priors]
        free = self._free(full, spoken, [u.question for u in utterances])
        t2 = self._clock()
        scores = self._scores(full, utterances, spoken, free)
        t3 = self._clock()
        answers = self._answers(clips, mels)
        t4 = self._clock()
        n = len(utterances)
        timings = {
            "encoder": (t1 - t0) * 1000 / n,
            "decoding": (t2 - t1) * 1000 / n,
            "closed_vocabulary": (t3 - t2) * 1000 / n,
            "answer_model": (t4 - t3) * 1000 / n,
        }
        return [
            dataclasses.replace(
                self._hearing(u, spoken[i], priors[i], free[i], scores[i], timings),
                frames=templates.encoder_frames(full[i], u.samples, lead_in(u.samples)),
                answers=answers[i],
            )
            for i, u in enumerate(utterances)
        ]

    def _answers(
        self, clips: Sequence[Samples], mels: Sequence[npt.NDArray[np.float32]]
    ) -> list[tuple[float, ...] | None]:
        """The answer model's P(class) of each clip, from its own short-window encoder pass."""
        if self.answer_model is None:
            return [None] * len(clips)
        model = self.answer_model
        return [
            tuple(float(p) for p in model.probabilities(frames))
            for frames in self.short_frames(clips, mels)
        ]

    def frames(self, samples: Samples) -> npt.NDArray[np.float32]:
        """The encoder frames over the clip's speech, heard as an answer is: a template."""
        return templates.encoder_frames(self._encode([samples])[0], samples, lead_in(samples))

    def short_frames(
        self,
        clips: Sequence[Samples],
        mels: Sequence[npt.NDArray[np.float32]] | None = None,
    ) -> list[npt.NDArray[np.float32]]:
        """Each clip's encoder frames over the short window: the answer model's input
        (``voice/answer_model.py``). Clips of one window width share an encoder call; a batch
        would pad every clip to the longest. ``mels``: the clips' log-mels (``_mel``) where
        already computed."""
        import ctranslate2

        if mels is None:
            mels = [self._mel(samples) for samples in clips]
        widths = [windows.short(mel.shape[1]) for mel in mels]
        out: list[npt.NDArray[np.float32]] = [np.zeros((0, 0), np.float32)] * len(clips)
        for width in sorted(set(widths)):
            rows = [i for i, w in enumerate(widths) if w == width]
            feats = np.stack([windows.fit(mels[i], width) for i in rows])
            encoded = self._model.encode(ctranslate2.StorageView.from_array(feats), to_cpu=True)
            for i, frames in zip(rows, np.asarray(encoded), strict=True):
                heard = lead_in(clips[i]) + len(clips[i])
                out[i] = answer_model.kept(np.asarray(frames, dtype=np.float32), heard)
        return out

    def _encode(
        self,
        clips: Sequence[Samples],
        mels: Sequence[npt.NDArray[np.float32]] | None = None,
    ) -> npt.NDArray[np.float32]:
        """One encoder call over the clips, each after its lead-in, in Whisper's 30 s window
        (``mels``: their log-mels, where already computed)."""
        import ctranslate2

        if mels is None:
            mels = [self._mel(samples) for samples in clips]
        feats = np.stack([windows.fit(mel, WINDOW_FRAMES) for mel in mels])
        # On the host even with CUDA: the forced decodings slice it with numpy (3 MB a clip).
        return np.asarray(
            self._model.encode(ctranslate2.StorageView.from_array(feats), to_cpu=True)
        )

    def _hearing(
        self,
        u: Utterance,
        langs: Sequence[str],
        prior: dict[str, float],
        free: dict[str, _Free],
        scores: dict[tuple[str, str], float],
        timings: dict[str, float],
    ) -> Hearing:
        if not langs:
            return Hearing("", "", 0.0, 0.0, timings_ms=dict(timings),
                           refusal=Reason.LANGUAGE_UNAVAILABLE)  # fmt: skip
        spelt = {
            (lang, spelled(text, free[lang].texts[0])): text
            for k, text in enumerate(u.candidates)
            for lang in [u.language_of(k)]
            if lang in free
        }
        heard = tuple(
            Heard(
                text,
                lang,
                prior[lang] + scores.get((lang, text), float("-inf")),
                spelt.get((lang, text)),
            )
            for lang in langs
            for text in free[lang].texts
        )
        best_lang = max(langs, key=lambda lang: next(h.score for h in heard if h.language == lang))
        top = free[best_lang]
        refusal = None
        if self._thresholds.says_silence(top.no_speech_prob, top.avg_logprob):
            refusal = Reason.NO_SPEECH
        elif top.cut:
            refusal = Reason.UNCLEAR
        # A reading in a language not decoded (not allowed, or too unlikely) has no score.
        readings = tuple(
            (text, prior.get(lang, -math.inf) + scores.get((lang, text), -math.inf))
            for i, text in enumerate(u.candidates)
            for lang in [u.language_of(i)]
        )
        return Hearing(
            top.texts[0],
            best_lang,
            top.no_speech_prob,
            top.avg_logprob,
            readings,
            heard,
            dict(timings),
            refusal,
        )

    def _mel(self, samples: Samples) -> npt.NDArray[np.float32]:
        x = np.asarray(samples, dtype=np.float32)
        heard = np.concatenate([np.zeros(lead_in(x), np.float32), x])
        return np.asarray(self._features(heard)[:, :WINDOW_FRAMES], dtype=np.float32)

    def _spoken(self, u: Utterance) -> tuple[str, ...]:
        """The allowed languages this model can hear; an English-only model knows only "en"."""
        if not self.multilingual:
            return ("en",) if "en" in u.languages else ()
        from faster_whisper.tokenizer import _LANGUAGE_CODES

        return tuple(lang for lang in dict.fromkeys(u.languages) if lang in _LANGUAGE_CODES)

    def _priors(self, full: Any, spoken: Sequence[tuple[str, ...]]) -> list[dict[str, float]]:
        """log P(language | audio) over each clip's allowed languages (0 for a single one).

        Only the languages worth decoding are kept (``MIN_LANGUAGE_SHARE``), likeliest first.
        """
        import ctranslate2

        priors: list[dict[str, float]] = [dict.fromkeys(langs, 0.0) for langs in spoken]
        several = [i for i, langs in enumerate(spoken) if len(langs) > 1]
        if not several:
            return priors
        view = ctranslate2.StorageView.from_array(np.ascontiguousarray(full[several]))
        for i, detected in zip(several, self._model.detect_language(view), strict=True):
            probs = {tok.strip("<|>"): p for tok, p in detected}
            allowed = {lang: probs.get(lang, 0.0) for lang in spoken[i]}
            total = sum(allowed.values())
            if total <= 0:  # none of them detected at all: every one equally likely
                allowed, total = dict.fromkeys(spoken[i], 1.0), float(len(spoken[i]))
            kept = sorted(
                (p / total, lang) for lang, p in allowed.items() if p / total >= MIN_LANGUAGE_SHARE
            )
            priors[i] = {lang: float(np.log(share)) for share, lang in reversed(kept)}
        return priors

    def _free(
        self,
        full: Any,
        spoken: Sequence[tuple[str, ...]],
        questions: Sequence[str],
    ) -> list[dict[str, _Free]]:
        """The beam search's transcripts of each clip in each of its languages."""
        import ctranslate2

        out: list[dict[str, _Free]] = [{} for _ in spoken]
        groups: dict[tuple[str, str], list[int]] = {}
        for i, langs in enumerate(spoken):
            for lang in langs:
                groups.setdefault((lang, self._context(questions[i], lang)), []).append(i)
        for (lang, context), rows in sorted(groups.items()):
            tok = self._prompt(lang, context)
            results = self._model.generate(
                ctranslate2.StorageView.from_array(np.ascontiguousarray(full[rows])),
                [tok.tokens for _ in rows],
                beam_size=BEAM,
                num_hypotheses=BEAM,
                max_length=tok.max_length(self._max_new_tokens),
                return_scores=True,
                return_no_speech_prob=True,
                suppress_blank=True,
            )
            for i, result in zip(rows, results, strict=True):
                texts = tuple(dict.fromkeys(tok.decode(t).strip() for t in result.sequences_ids))
                # With length_penalty=1 CTranslate2's score is the length-normalised log-prob.
                avg = float(result.scores[0]) if result.scores else 0.0
                best = result.sequences_ids[0] if result.sequences_ids else []
                cut = len(best) >= self._max_new_tokens and not windows.loops(texts[0])
                out[i][lang] = _Free(texts or ("",), float(result.no_speech_prob), avg, cut)
        return out

    def _scores(
        self,
        full: Any,
        utterances: Sequence[Utterance],
        spoken: Sequence[tuple[str, ...]],
        free: Sequence[dict[str, _Free]],
    ) -> list[dict[tuple[str, str], float]]:
        """Whole-sequence log P(text | audio, language) of every reading and free transcript."""
        out: list[dict[tuple[str, str], float]] = [{} for _ in utterances]
        asked = {
            (lang, self._context(u.question, lang))
            for u, langs in zip(utterances, spoken, strict=True)
            for lang in langs
        }
        for lang, context in sorted(asked):
            tok = self._prompt(lang, context)
            rows: list[int] = []
            owners: list[tuple[int, str]] = []
            seqs: list[list[int]] = []
            for i, u in enumerate(utterances):
                if lang not in spoken[i] or self._context(u.question, lang) != context:
                    continue
                heard = free[i][lang].texts
                texts = {text: text for text in heard if text}
                for k, text in enumerate(u.candidates):
                    if u.language_of(k) == lang and text not in texts:
                        texts[text] = spelled(text, heard[0])
                for text, spelling in texts.items():
                    ids = tok.encode(" " + spelling)
                    if ids:
                        rows.append(i)
                        owners.append((i, text))
                        seqs.append(ids)
            if not seqs:
                continue
            frames = [(lead_in(u.samples) + len(u.samples)) // HOP for u in utterances]
            keep = min(full.shape[1], max(frames[i] for i in rows) // 2 + SCORE_TAIL_FRAMES)
            keep = keep + 1 if keep == SLOW_KEEP else keep
            scored = self._forced(full, rows, keep, tok, seqs)
            for (i, text), score in zip(owners, scored, strict=True):
                out[i][(lang, text)] = score
        return out

    def _forced(
        self, full: Any, rows: list[int], keep: int, tok: Prompt, seqs: list[list[int]]
    ) -> list[float]:
        """Each token sequence's log-probability, end-of-text included, in one decoder call.

        The batch runs as many steps as its longest member, so a one-token number beside a
        twelve-token Devanagari reading takes ten steps it does not need; one call for all was
        still faster than one call per sequence length, with the same scores to the last digit
        (``benchmarks/forced.py``; docs/voice-measurements.md, "Measured").
        """
        import ctranslate2

        group = sorted(range(len(seqs)), key=lambda k: -len(seqs[k]))  # longest first
        results = self._model.generate(
            ctranslate2.StorageView.from_array(
                np.ascontiguousarray(full[[rows[k] for k in group], :keep])
            ),
            [[*tok.tokens, *seqs[k]] for k in group],
            beam_size=1,
            # The tokens and end-of-text. A sequence that still got fewer steps than it needs
            # scores minus infinity below.
            max_length=tok.max_length(len(seqs[group[0]]) + 1),
            return_logits_vocab=True,
            # Scored as the model gives them: no token is suppressed or forced out.
            suppress_blank=False,
            suppress_tokens=[],
        )
        scores = [float("-inf")] * len(seqs)
        for k, result in zip(group, results, strict=True):
            steps = result.logits[0] if result.logits else []
            if len(steps) <= len(seqs[k]):
                continue
            total = 0.0
            for step, token in enumerate([*seqs[k], tok.eot]):
                logits = np.asarray(steps[step], dtype=np.float64).ravel()
                top = logits.max()
                total += float(logits[token] - top - np.log(np.exp(logits - top).sum()))
            scores[k] = total
        return scores

    def _context(self, question: str, lang: str) -> str:
        """The question this model is told was asked, in ``lang`` ("" for none)."""
        return calibration.prompt(self.model, question, lang)

    def _prompt(self, lang: str, context: str) -> Prompt:
        key = (lang, context)
        if key not in self._prompts:
            self._prompts[key] = Prompt(self._tokens, self.multilingual, lang, context)
        return self._prompts[key]


@dataclass(frozen=True, slots=True)
class _Free:
    """One clip's beam search in one language: its transcripts, best first."""

    texts: tuple[str, ...]
    no_speech_prob: float
    avg_logprob: float
    # The best transcript was stopped by the token limit, and is not a loop (``windows.loops``).
    cut: bool = False
