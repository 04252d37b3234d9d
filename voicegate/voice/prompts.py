"""What Whisper's decoder is given before the answer: the task tokens and the question asked.

A listener who knows the question hears "five" where a stranger hears "Bye". Whisper takes the
same hint as text that came before the clip (its previous-text prompt): the decoder then reads
every transcript and every reading after ``<|startofprev|>`` and the question (for tiny.en
at a choice among cards, ``One, two, three, four, five. The first one, not the second one.``).
Which question text a model is told is part of its calibration (``voice.calibration``): its
thresholds were fitted on scores made with exactly that prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["FINAL_MARKS", "Prompt", "check_steps", "spelled"]

# Previous text as long as a question prompt, for ``check_steps``.
CHECK_CONTEXT = "One, two, three, four, five. The first one, not the second one."
# Final punctuation copied from a free transcript onto the readings scored beside it.
FINAL_MARKS = ".!?।"


class Prompt:
    """faster-whisper's tokenizer for one language, with the decoder's prompt spelled out."""

    def __init__(self, tokens: Any, multilingual: bool, language: str, context: str = "") -> None:
        from faster_whisper.tokenizer import Tokenizer

        self._tok = Tokenizer(tokens, multilingual, task="transcribe", language=language)
        self.eot: int = int(self._tok.eot)
        before = [self._tok.sot_prev, *self.encode(" " + context.strip())] if context else []
        self.tokens: list[int] = [*before, *self._tok.sot_sequence, self._tok.no_timestamps]

    def max_length(self, steps: int) -> int:
        """The smallest ``max_length`` at which CTranslate2's Whisper ``generate`` runs
        ``steps`` decoding steps after this prompt, forced ones included.

        It runs min(max_length // 2, max_length - len(prompt) + 1) of them (CTranslate2's
        ``models/whisper.cc`` since 3.7; ``check_steps`` makes sure at load). A larger one runs
        steps nobody reads: told the question (22 tokens), the scoring once asked for 26 where
        the longest reading needed 5, and a batch ran them whenever one sequence did not end.
        """
        return max(2 * steps, steps + len(self.tokens) - 1)

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``."""
        return list(self._tok.encode(text))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens left out."""
        return str(self._tok.decode([i for i in ids if i < self._tok.eot]))


def spelled(text: str, heard: str) -> str:
    """A reading written the way the clip's best free transcript is: capital and final mark."""
    text = text.strip()
    if heard[:1].isupper():
        text = text[:1].upper() + text[1:]
    # An empty string is "in" every string: test the last character only when there is one.
    if heard and heard[-1] in FINAL_MARKS and not (text and text[-1] in FINAL_MARKS):
        text += heard[-1]
    return text


def check_steps(model: Any, tokens: Any, multilingual: bool) -> None:
    """Raise ``ModelError`` unless ``model`` runs exactly the decoding steps ``max_length``
    counts on, with no previous text and with a question's worth: with fewer, a reading would
    lose its end-of-text step and a cut transcript would go unseen. One short encoder pass and
    four one-row decodings, at load."""
    import ctranslate2

    from voicegate.errors import ModelError

    encoded = model.encode(
        ctranslate2.StorageView.from_array(np.zeros((1, model.n_mels, 200), np.float32)),
        to_cpu=True,
    )
    prompts = [Prompt(tokens, multilingual, "en", context) for context in ("", CHECK_CONTEXT)]
    for prompt in prompts:
        forced = prompt.encode(" one two three four five six seven eight")
        for steps in (1, 4):
            try:
                [result] = model.generate(
                    encoded,
                    [[*prompt.tokens, *forced]],
                    beam_size=1,
                    max_length=prompt.max_length(steps),
                    return_logits_vocab=True,
                    suppress_blank=False,
                    suppress_tokens=[],
                )
                got = len(result.logits[0]) if result.logits else 0
            except (RuntimeError, ValueError) as exc:
                got, why = 0, f" ({exc})"
            else:
                why = ""
            if got != steps:
                raise ModelError(
                    f"this CTranslate2 ({ctranslate2.__version__}) ran {got} decoding steps where "
                    f"{steps} were counted on after a prompt of {len(prompt.tokens)} tokens{why}"
                )
