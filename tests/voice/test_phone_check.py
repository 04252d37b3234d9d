"""training/phones.py, the spelling check measured beside the answer model: its CTC forward sum
against torch's, the margin's sign, and which words compete with a release."""

from __future__ import annotations

import importlib.util
import shutil
from types import ModuleType

import numpy as np
import pytest

from tests.conftest import require, training_script

# A toy inventory: blank first.
PHONES = ("_", "t", "uː", "θ", "ɹ", "iː", "b", "ɜː", "d", "s", "ɛ", "k", "ə", "n")
ID = {p: k for k, p in enumerate(PHONES)}


@pytest.fixture(scope="module")
def phones() -> ModuleType:
    return training_script("phones")


def spelled(*sounds: str) -> list[int]:
    return [ID[p] for p in sounds]


def frames_saying(*sounds: str, each: int = 3, sure: float = 0.9) -> np.ndarray:
    """Per-frame log-probabilities that say ``sounds``, each for ``each`` frames between blanks."""
    path = [0]
    for p in sounds:
        path += [ID[p]] * each + [0]
    probs = np.full((len(path), len(PHONES)), (1 - sure) / (len(PHONES) - 1))
    probs[np.arange(len(path)), path] = sure
    return np.asarray(np.log(probs))


@pytest.mark.slow  # torch's import alone takes about a second
def test_the_forward_sum_is_torchs_ctc(phones: ModuleType) -> None:
    require(importlib.util.find_spec("torch") is not None, "torch (the [train] extra)")
    import torch

    rng = np.random.default_rng(5)
    logp = torch.log_softmax(torch.tensor(rng.normal(size=(14, len(PHONES)))), dim=-1)
    # A repeated phone needs a blank between its two; the empty spelling is blank throughout.
    spellings = [[1, 2], [1, 1, 3], [], [4], [2, 3, 2, 5, 1], [6, 7, 8, 8, 8]]
    mine = phones.ctc_scores(logp.numpy(), spellings)
    for got, s in zip(mine, spellings, strict=True):
        loss = torch.nn.functional.ctc_loss(
            logp[:, None, :], torch.tensor([s], dtype=torch.long).reshape(1, len(s)),
            torch.tensor([14]), torch.tensor([len(s)]), reduction="sum", zero_infinity=False,
        )  # fmt: skip
        assert got == pytest.approx(-loss.item(), abs=1e-9)


def test_a_spelling_longer_than_the_frames_allow_is_impossible(phones: ModuleType) -> None:
    logp = frames_saying("t", each=1)  # three frames: blank, t, blank
    assert phones.ctc_scores(logp, [spelled("t", "uː", "θ", "s")])[0] == -np.inf


def test_the_answer_passes_where_it_was_said_and_fails_where_the_near_miss_was(
    phones: ModuleType,
) -> None:
    forms, near = [spelled("t", "uː")], [spelled("t", "uː", "θ"), spelled("t", "ɹ", "iː")]
    assert phones.margin(frames_saying("t", "uː"), forms, near) > 0
    assert phones.margin(frames_saying("t", "uː", "θ"), forms, near) < 0


def test_near_words_are_within_two_phones_and_never_sound_like_a_form(
    phones: ModuleType,
) -> None:
    require(phones.data.DICTIONARY.exists(), "Debian's wamerican word list")
    sounds = {
        "two": ["t", "uː"], "too": ["t", "uː"], "tooth": ["t", "uː", "θ"],
        "second": ["s", "ɛ", "k", "ə", "n", "d"], "bird": ["b", "ɜː", "d"],
        "third": ["θ", "ɜː", "d"], "three": ["θ", "ɹ", "iː"], "tree": ["t", "ɹ", "iː"],
        "ree": ["ɹ", "iː"], "one": ["w", "ʌ", "n"], "sun": ["s", "ʌ", "n"],
        "first one": ["f", "ɜː", "s", "t", "w", "ʌ", "n"],
    }  # fmt: skip
    lexicon = phones.lexicon(sounds)
    forms, near = lexicon["card2"]
    assert ("t", "uː") in forms and ("s", "ɛ", "k", "ə", "n", "d") in forms
    assert ("t", "uː", "θ") in near
    assert ("t", "uː") not in near  # "too" sounds as "two" does: the grammar reads it
    assert ("θ", "ɹ", "iː") not in near  # three phones from every form of card 2
    forms3, near3 = lexicon["card3"]
    assert ("θ", "ɜː", "d") in forms3
    assert {("b", "ɜː", "d"), ("t", "ɹ", "iː")} <= set(near3)
    assert ("ɹ", "iː") not in near3  # "three" with its first sound faint is still "three"
    # "sun" leaves sounds out of "first one", but is no fainter "one": a sound "one" lacks.
    assert ("s", "ʌ", "n") in lexicon["card1"][1]


def test_on_one_card_a_confirm_is_checked_as_yes_or_one(phones: ModuleType) -> None:
    from voicegate.domain import Decision
    from voicegate.reasons import Kind

    assert phones.releases(Decision(Kind.CONFIRM), 1) == ("yes", "card1")
    assert phones.releases(Decision(Kind.CONFIRM), 3) == ("yes",)
    assert phones.releases(Decision(Kind.CHOOSE, card=2), 3) == ("card2",)


def test_a_fainter_form_only_leaves_sounds_out(phones: ModuleType) -> None:
    assert phones.fainter(("ɹ", "iː"), ("θ", "ɹ", "iː"))
    assert phones.fainter(("f", "aɪ"), ("f", "aɪ", "v"))
    assert not phones.fainter(("t", "uː", "θ"), ("t", "uː"))  # a sound added
    assert not phones.fainter(("iː", "ɹ"), ("θ", "ɹ", "iː"))  # out of order


def test_a_frame_hears_its_neighbours_and_quiet_past_the_ends(phones: ModuleType) -> None:
    x = np.arange(1.0, 7.0).reshape(3, 2)
    got = phones.stacked(x, 1)
    assert got.shape == (3, 6)
    assert got[0].tolist() == [0, 0, 1, 2, 3, 4]
    assert got[2].tolist() == [3, 4, 5, 6, 0, 0]
    assert phones.stacked(x, 0) is x


class Clips:
    """What ``train`` reads of ``answer_model.Data``: frames, their offsets and the clips."""

    def __init__(self, clips: list[np.ndarray]) -> None:
        self.frames = np.concatenate(clips).astype(np.float16)
        self.offsets = np.cumsum([0, *(len(c) for c in clips)])

    def clip(self, i: int) -> np.ndarray:
        return self.frames[self.offsets[i] : self.offsets[i + 1]]


@pytest.mark.slow
def test_trained_it_spells_what_was_said(phones: ModuleType) -> None:
    """Two made-up sounds, each a pattern of frames: trained on clips saying them in some order,
    the network's numpy reading spells a clip it never heard."""
    require(importlib.util.find_spec("torch") is not None, "torch (the [train] extra)")
    rng = np.random.default_rng(8)
    sound = {1: np.eye(8)[0] * 3, 2: np.eye(8)[1] * 3}

    def saying(*said: int) -> np.ndarray:
        quiet = [rng.normal(0, 0.3, (2, 8))]
        parts = quiet + [np.r_[[sound[p]] * 3] + rng.normal(0, 0.3, (3, 8)) for p in said]
        return np.concatenate([*(x for p in parts for x in (p, *quiet))])

    orders = [(1,), (2,), (1, 2), (2, 1), (1, 2, 1)]
    said = [orders[k % len(orders)] for k in range(640)]
    clips = Clips([saying(*s) for s in said])
    w = phones.train(clips, [list(s) for s in said], range(len(said)), 3, 3, epochs=40)
    best = phones.log_probs(w, saying(2, 1, 2)).argmax(axis=1)
    spelled_out = [int(b) for k, b in enumerate(best) if b and (k == 0 or b != best[k - 1])]
    assert spelled_out == [2, 1, 2]


def test_a_spelling_is_espeaks_phonemes_without_stress(phones: ModuleType) -> None:
    require(shutil.which("espeak-ng") is not None, "espeak-ng")
    said = phones.spell(["Two!", "tooth", ""])
    assert said == {"Two!": ["t", "uː"], "tooth": ["t", "uː", "θ"], "": []}
