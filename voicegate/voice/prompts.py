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

__all__ = ["FINAL_MARKS", "Prompt", "spelled"]

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

        It runs min(max_length // 2, max_length - len(prompt) + 1) of them (measured on tiny.en
        and base, CTranslate2 4.8, prompts of 2 to 33 tokens; ``tests/voice/test_recogniser.py``
        checks it on the real model). A larger one runs steps nobody reads: told the question
        (22 tokens), each forced reading ran 24 steps where it needed 6.
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
