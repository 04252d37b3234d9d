"""A user's taught answers between the store and the decision: meanings, rows, radii cache."""

from __future__ import annotations

import numpy as np
import pytest

from voicegate.domain import Decision
from voicegate.reasons import Kind
from voicegate.store import open_store
from voicegate.voice import enrolment, templates


def feats(seed: int, pitch: float = 200.0) -> templates.Matrix:
    rng = np.random.default_rng(seed)
    t = np.arange(8_000) / 16_000
    phase = 2 * np.pi * np.cumsum(pitch * (1 + 0.6 * t) * (1 + 0.05 * rng.standard_normal()))
    x = sum(np.sin(k * phase / 16_000) / k for k in range(1, 6)) * np.sin(np.pi * t / 0.5)
    return templates.features((0.3 * x + 0.01 * rng.standard_normal(len(t))).astype(np.float32))


@pytest.mark.parametrize(
    ("text", "meaning"),
    [
        ("confirm", Decision(Kind.CONFIRM)),
        ("more_time", Decision(Kind.MORE_TIME)),
        ("choose:5", Decision(Kind.CHOOSE, card=5)),
    ],
)
def test_a_taught_meaning_reads_back_as_its_decision(text: str, meaning: Decision) -> None:
    assert enrolment.meaning_of(text) == meaning


@pytest.mark.parametrize("text", ["choose:0", "choose:6", "choose", "refuse", "yes", ""])
def test_anything_else_is_no_meaning_one_can_teach(text: str) -> None:
    with pytest.raises(ValueError):
        enrolment.meaning_of(text)


@pytest.mark.parametrize("label", ["x" * 41, "line\nbreak"])
def test_a_label_that_is_too_long_or_unprintable_is_refused(label: str) -> None:
    with pytest.raises(ValueError):
        enrolment.stored("asha", "confirm", label, feats(0), kind="m", now=1.0, device="d1")


async def test_the_enrolment_follows_the_store_and_its_flag() -> None:
    store = await open_store("memory")
    source = enrolment.StoreEnrolments(store.templates, "m")
    assert await source.enrolment("asha") is None
    rows = [
        enrolment.stored("asha", m, "", feats(s, p), kind="m", now=float(s), device="d1")
        for m, p in (("choose:1", 200.0), ("choose:2", 520.0))
        for s in range(3)
    ]
    for row in rows:
        await store.templates.add(row)
    first = await source.enrolment("asha")
    assert first is not None and len(first.templates) == 6 and not first.hard
    await store.templates.set_hard("asha", True)
    again = await source.enrolment("asha")
    assert again is not None and again.hard and again.radii is first.radii
    await store.templates.delete("asha", rows[0].id)
    fewer = await source.enrolment("asha")
    assert fewer is not None and len(fewer.templates) == 5 and fewer.radii is not first.radii
    await store.templates.delete("asha")
    assert await source.enrolment("asha") is None


async def test_templates_of_another_model_are_skipped_never_matched() -> None:
    """After a change of model the user's old templates count for nothing; they stay listed."""
    store = await open_store("memory")
    for s in range(3):
        row = enrolment.stored("asha", "confirm", "", feats(s), kind="base", now=s, device="d1")
        await store.templates.add(row)
    assert await enrolment.StoreEnrolments(store.templates, "base").enrolment("asha") is not None
    other = await enrolment.StoreEnrolments(store.templates, "tiny.en").enrolment("asha")
    assert other is not None and other.templates == () and other.radii == {}
    assert len(await store.templates.list("asha")) == 3


async def test_a_stored_template_of_another_width_is_skipped_never_a_failure() -> None:
    """A damaged row of the right model but another frame width cannot break the user's
    enrolment: the width most of their templates share wins, the odd one is skipped."""
    store = await open_store("memory")
    for s in range(3):
        row = enrolment.stored("asha", "confirm", "", feats(s), kind="m", now=s, device="d1")
        await store.templates.add(row)
    odd = np.ones((20, 7), dtype=np.float32)
    await store.templates.add(
        enrolment.stored("asha", "cancel", "", odd, kind="m", now=9, device="d1")
    )
    taught = await enrolment.StoreEnrolments(store.templates, "m").enrolment("asha")
    assert taught is not None and len(taught.templates) == 3
    assert {t.features.shape[1] for t in taught.templates} == {feats(0).shape[1]}
