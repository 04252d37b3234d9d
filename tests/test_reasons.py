"""Every refusal reason tells the caller what to do next."""

from __future__ import annotations

from voicegate.reasons import NEXT_STEP, Reason


def test_every_reason_has_a_next_step() -> None:
    missing = [reason for reason in Reason if not NEXT_STEP.get(reason, "").strip()]
    assert missing == []


def test_every_next_step_is_one_or_two_sentences_ending_in_a_full_stop() -> None:
    for reason, step in NEXT_STEP.items():
        assert step.endswith("."), reason
        assert step.count(". ") <= 1, reason


def test_no_speech_next_step_does_not_deny_the_guess_shown_beside_it() -> None:
    # The answer's ``heard`` keeps the recogniser's best guess ("Huh.") under a no_speech
    # refusal; the next step must not say that nothing at all was heard.
    step = NEXT_STEP[Reason.NO_SPEECH].lower()
    assert "no speech" not in step and not step.startswith("nothing was heard")


def test_next_steps_of_refusals_any_set_can_get_name_no_particular_card() -> None:
    # A one-card set has no "second one"; these refusals come from any set, whatever its size.
    any_set = [Reason.NO_SPEECH, Reason.UNCLEAR, Reason.HEDGE, Reason.QUESTION, Reason.NEGATION]
    ordinals = ("first", "second", "third", "fourth", "fifth")
    for reason in any_set:
        assert not any(word in NEXT_STEP[reason].lower() for word in ordinals), reason
