"""A user's personal answers between the store and the voice decision.

``StoreEnrolments`` reads a user's templates from the store on every answer (one indexed query,
so a template taught or deleted through any replica counts at once) and keeps the radii of the
last set it saw per user: they cost a DTW per pair of templates, about 0.2 s for 30 of them, and
change only when the templates do. ``stored`` turns the features of one enrolment take into the
row the store keeps: features, never audio, tagged with the model that made them; a template of
another model (or of the MFCC features of earlier releases) is skipped, never matched, so after
a change of model the user teaches their answers again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

from voicegate.domain import Decision, Stage, StoredTemplate
from voicegate.reasons import Kind
from voicegate.store.base import TemplateStore
from voicegate.voice import templates

# The answers a user may teach: yes, no/cancel, wait/more time and the cards one to five.
MAX_CARD = 5
MEANINGS = ("confirm", "cancel", "more_time", *(f"choose:{k}" for k in range(1, MAX_CARD + 1)))
# Per user, at most this many templates: 8 answers × 3 takes, each taught in two ways
# (a word and a personal one, "yes" and "haan"), rounded up. It bounds the store and the DTW
# work of one decision (about 8 ms per template here, benchmarks/enrol.py).
MAX_TEMPLATES = 60
MAX_LABEL = 40  # characters of the user's own name for a personal answer ("theek hai")


def meaning_of(text: str) -> Decision:
    """``"choose:2"`` -> the card, ``"confirm"`` etc.; ``ValueError`` for anything else."""
    if text not in MEANINGS:
        raise ValueError(f"not an answer one can teach: {text!r} (one of {', '.join(MEANINGS)})")
    kind, _, card = text.partition(":")
    return Decision(Kind(kind), card=int(card)) if card else Decision(Kind(kind))


def meaning_text(meaning: Decision) -> str:
    """The stored name of a taught meaning: ``meaning_of``'s inverse."""
    return f"{meaning.kind.value}:{meaning.card}" if meaning.card else meaning.kind.value


def heard_as(text: str) -> str | None:
    """The answer a take's transcript reads as, by its stored name, or None where it reads as
    no single answer: a card's number at a choice among ``MAX_CARD`` cards, or cancel or wait;
    else yes, no or wait as the answer to a yes-or-no question."""
    from voicegate.voice.hypotheses import read_transcript

    for cards, stage in ((MAX_CARD, Stage.CHOOSE), (1, Stage.FINAL)):
        read = read_transcript(text, cards, stage)
        if read.kind in (Kind.CHOOSE, Kind.CONFIRM, Kind.CANCEL, Kind.MORE_TIME):
            return meaning_text(read)
    return None


def label_of(label: str) -> str:
    """The user's own name for an answer, checked; ``ValueError`` when it cannot be kept."""
    if len(label) > MAX_LABEL or any(not c.isprintable() for c in label):
        raise ValueError("a label is at most 40 printable characters")
    return label


def stored(
    user: str,
    meaning: str,
    label: str,
    features: templates.Matrix,
    *,
    kind: str,
    now: float,
    device: str,
) -> StoredTemplate:
    """The store's row for one take; ``ValueError`` for an unknown meaning or a bad label."""
    meaning_of(meaning)
    label_of(label)
    return StoredTemplate(
        id="tpl_" + uuid.uuid4().hex,
        user=user,
        meaning=meaning,
        label=label,
        created_at=now,
        data=templates.encode(features, kind),
        device_id=device,
    )


class StoreEnrolments:
    """``voicegate.voice.pipeline.Enrolments`` over a ``TemplateStore``, for the features of
    ``kind`` (the model whose frames an answer is compared with)."""

    def __init__(self, store: TemplateStore, kind: str) -> None:
        self.store = store
        self.kind = kind
        self._last: dict[str, tuple[tuple[str, ...], templates.Enrolment]] = {}

    async def enrolment(self, user: str) -> templates.Enrolment | None:
        """The user's enrolment now; None when they taught nothing."""
        rows = await self.store.list(user)
        if not rows:
            self._last.pop(user, None)
            return None
        hard = await self.store.hard(user)
        key = tuple(r.id for r in rows)
        last = self._last.get(user)
        if last is not None and last[0] == key:
            return templates.Enrolment(last[1].templates, last[1].radii, hard)
        taught = []
        for row in rows:
            try:
                taught.append(
                    templates.Template(
                        meaning_of(row.meaning), templates.decode(row.data, self.kind)
                    )
                )
            except ValueError:
                continue  # features of another model or version: skipped, never matched
        # One model's frames all have one width; a damaged row of another is skipped too.
        widths = Counter(t.features.shape[1] for t in taught)
        if widths:
            width = widths.most_common(1)[0][0]
            taught = [t for t in taught if t.features.shape[1] == width]
        enrolment = await asyncio.to_thread(templates.enrol, taught, hard)
        self._last[user] = (key, enrolment)
        return enrolment
