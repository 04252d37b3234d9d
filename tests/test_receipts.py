"""Receipts: sealed with a key, chained per user; any edit, gap or swap shows."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest

from voicegate.canonical import ARGUMENTS_BYTES, MAX_BYTES, canonical_json
from voicegate.domain import (
    Check,
    Choice,
    FirstYes,
    GrantMade,
    GrantUse,
    InputKind,
    Modality,
    PasskeyProof,
    Receipt,
    Risk,
)
from voicegate.reasons import Reason
from voicegate.receipts import (
    GENESIS,
    ChainHead,
    ChainProblem,
    Heads,
    ProblemKind,
    Roster,
    behind,
    check,
    digest,
    heads_from_dict,
    heads_to_dict,
    seal,
    sign_head,
    sign_roster,
    verify_chain,
    verify_heads,
)
from voicegate.secrets import KeyRing, generate_secret

KEYS = KeyRing([("r1", generate_secret())])


def unsealed(user: str, seq: int, prev_digest: str) -> Receipt:
    return Receipt(
        id=f"rcpt_{user}_{seq}",
        user=user,
        seq=seq,
        prev_digest=prev_digest,
        pending_id=f"p_{seq}",
        tool="send_email",
        arguments={"to": "bob@example.com", "amount": seq * 10},
        args_hash="ab" * 32,
        card_text='tool: send_email\n  to = "bob@example.com"',
        risk=Risk.HIGH,
        mode="device",
        outcome="confirmed",
        proposed_at=1_700_000_000.25,
        decided_at=1_700_000_010.5,
        executed_at=1_700_000_011.0,
        checks=(Check("nonce_matches", True), Check("words_choose_one_card", True)),
        device_id="dev_1",
        modality=Modality.VOICE,
        input=InputKind.VOICE,
        transcript="yes",
        recogniser="whisper",
        model="base",
        fingerprint_id="fp_1",
        result={"ok": True},
    )


def chain(user: str = "alice", length: int = 5, keys: KeyRing = KEYS) -> list[Receipt]:
    receipts: list[Receipt] = []
    for seq in range(1, length + 1):
        prev = receipts[-1].digest if receipts else GENESIS
        receipts.append(seal(unsealed(user, seq, prev), keys))
    return receipts


def kinds(problems: list[ChainProblem]) -> set[tuple[str, ProblemKind]]:
    return {(p.receipt_id, p.kind) for p in problems}


def test_seal_sets_digest_key_id_and_signature() -> None:
    receipt = seal(unsealed("alice", 1, GENESIS), KEYS)
    assert receipt.digest == digest(receipt)
    assert len(receipt.digest) == 64
    assert receipt.key_id == "r1"
    assert receipt.signature and "=" not in receipt.signature
    assert check(receipt, KEYS) == []


def test_digest_ignores_the_seal_itself() -> None:
    receipt = unsealed("alice", 1, GENESIS)
    assert digest(seal(receipt, KEYS)) == digest(receipt)


def test_an_intact_chain_passes() -> None:
    assert verify_chain(chain(), KEYS) == []


def test_an_empty_chain_passes() -> None:
    assert verify_chain([], KEYS) == []


def test_chains_of_several_users_are_checked_apart() -> None:
    receipts = chain("alice") + chain("bob", 3)
    assert verify_chain(receipts[::-1], KEYS) == []


def test_the_order_receipts_arrive_in_does_not_matter() -> None:
    receipts = chain()
    receipts[1], receipts[3] = receipts[3], receipts[1]
    assert verify_chain(receipts, KEYS) == []


EDITS: dict[str, Any] = {
    "id": "rcpt_other",
    "pending_id": "p_other",
    "tool": "delete_mailbox",
    "arguments": {"to": "mallory@example.com", "amount": 20},
    "args_hash": "cd" * 32,
    "card_text": "tool: something else",
    "risk": Risk.LOW,
    "mode": "delegated",
    "outcome": "failed",
    "proposed_at": 1.0,
    "decided_at": 2.0,
    "executed_at": None,
    "checks": (Check("nonce_matches", False, Reason.WRONG_SET),),
    "device_id": "dev_2",
    "modality": Modality.TAP,
    "input": InputKind.TOUCH,
    "transcript": "no",
    "recogniser": "other",
    "model": "small",
    "fingerprint_id": "fp_2",
    "result": {"ok": False},
    "error": "boom",
    "first_yes": FirstYes(
        evidence_id="ev_1",
        device_id="dev_3",
        modality=Modality.VOICE,
        input=InputKind.VOICE,
        decided_at=1.5,
        chosen=2,
        transcript="doosra",
    ),
    "choice": Choice(question="Which slot?", options=("9:00", "10:00"), chosen=2),
    "shown_text": 'tool: write_note\n  text = "the whole of it"',
    "second_yes": FirstYes(
        evidence_id="ev_2",
        device_id="dev_3",
        modality=Modality.TAP,
        input=InputKind.SWITCH,
        decided_at=1.7,
        chosen=2,
    ),
    "passkey": PasskeyProof(
        id="pk_" + "ab" * 12,
        user_present=True,
        user_verified=True,
        backup_eligible=False,
        backed_up=False,
        sign_count=3,
        rp_id="localhost",
        origin="http://localhost:8800",
    ),
    "grant": GrantUse(
        grant_id="g_other", made_by="p_maker", made_receipt="rcpt_0", uses_left=2, expires_at=9.0
    ),
    "granted": GrantMade(
        grant_id="g_other",
        tool="write_note",
        fixed=("name",),
        free=("text",),
        minutes=60,
        expires_at=9.0,
        uses=10,
    ),
}


def test_every_field_is_covered_by_an_edit_test() -> None:
    sealed_fields = {"digest", "signature", "key_id", "user", "seq", "prev_digest"}
    names = {f.name for f in dataclasses.fields(Receipt)}
    assert names - sealed_fields == set(EDITS)


@pytest.mark.parametrize("field", sorted(EDITS))
def test_an_edited_receipt_fails(field: str) -> None:
    receipts = chain()
    receipts[2] = dataclasses.replace(receipts[2], **{field: EDITS[field]})
    problems = verify_chain(receipts, KEYS)
    assert (receipts[2].id, ProblemKind.EDITED) in kinds(problems)


@pytest.mark.parametrize(("field", "value"), [("seq", 9), ("prev_digest", "00" * 32)])
def test_an_edited_position_fails(field: str, value: Any) -> None:
    receipts = chain()
    receipts[2] = dataclasses.replace(receipts[2], **{field: value})
    assert (receipts[2].id, ProblemKind.EDITED) in kinds(verify_chain(receipts, KEYS))


def test_an_edit_with_a_recomputed_digest_fails_on_the_signature_and_the_link() -> None:
    receipts = chain()
    edited = dataclasses.replace(receipts[2], arguments={"to": "mallory@example.com"})
    receipts[2] = dataclasses.replace(edited, digest=digest(edited))
    assert kinds(verify_chain(receipts, KEYS)) == {
        (receipts[2].id, ProblemKind.BAD_SIGNATURE),
        (receipts[3].id, ProblemKind.BROKEN_LINK),
    }


def test_a_receipt_resealed_with_a_foreign_key_fails() -> None:
    receipts = chain()
    stranger = KeyRing([("r1", generate_secret())])
    receipts[1] = seal(dataclasses.replace(receipts[1], outcome="cancelled"), stranger)
    problems = kinds(verify_chain(receipts, KEYS))
    assert (receipts[1].id, ProblemKind.BAD_SIGNATURE) in problems
    assert (receipts[2].id, ProblemKind.BROKEN_LINK) in problems


@pytest.mark.parametrize("signature", ["", "not base64!", "é", "AAAA"])
def test_a_damaged_signature_fails(signature: str) -> None:
    receipts = chain()
    receipts[0] = dataclasses.replace(receipts[0], signature=signature)
    assert kinds(verify_chain(receipts, KEYS)) == {(receipts[0].id, ProblemKind.BAD_SIGNATURE)}


def test_a_deleted_receipt_shows_as_missing() -> None:
    receipts = chain()
    del receipts[2]
    assert kinds(verify_chain(receipts, KEYS)) == {(receipts[2].id, ProblemKind.MISSING)}


def test_a_deleted_first_receipt_shows_as_missing() -> None:
    receipts = chain()[1:]
    assert kinds(verify_chain(receipts, KEYS)) == {(receipts[0].id, ProblemKind.MISSING)}


def test_two_swapped_receipts_fail() -> None:
    receipts = chain()
    second, third = receipts[1], receipts[2]
    receipts[1] = dataclasses.replace(third, seq=2)
    receipts[2] = dataclasses.replace(second, seq=3)
    problems = kinds(verify_chain(receipts, KEYS))
    assert (third.id, ProblemKind.EDITED) in problems
    assert (second.id, ProblemKind.EDITED) in problems
    assert (second.id, ProblemKind.REORDERED) in problems


def test_two_swapped_and_resealed_receipts_still_fail_on_their_links() -> None:
    # Someone holding the key re-signs both with swapped numbers; the links still tell.
    receipts = chain()
    second, third = receipts[1], receipts[2]
    receipts[1] = seal(dataclasses.replace(third, seq=2), KEYS)
    receipts[2] = seal(dataclasses.replace(second, seq=3), KEYS)
    problems = kinds(verify_chain(receipts, KEYS))
    assert (third.id, ProblemKind.BROKEN_LINK) in problems
    assert (second.id, ProblemKind.REORDERED) in problems
    assert not any(kind is ProblemKind.EDITED for _, kind in problems)


def test_a_duplicated_sequence_number_fails() -> None:
    receipts = chain()
    copy = seal(dataclasses.replace(receipts[2], id="rcpt_copy"), KEYS)
    problems = verify_chain([*receipts, copy], KEYS)
    assert ProblemKind.REORDERED in {p.kind for p in problems}


def test_a_first_receipt_that_links_somewhere_fails() -> None:
    receipts = chain()
    receipts[0] = seal(dataclasses.replace(receipts[0], prev_digest="ff" * 32), KEYS)
    problems = kinds(verify_chain(receipts, KEYS))
    assert (receipts[0].id, ProblemKind.BROKEN_LINK) in problems


def test_a_chain_signed_before_a_key_rotation_still_verifies() -> None:
    old = KeyRing([("r1", generate_secret())])
    receipts = chain(keys=old)
    rotated = KeyRing([("r2", generate_secret()), *old])
    prev = receipts[-1].digest
    receipts.append(seal(unsealed("alice", 6, prev), rotated))
    assert receipts[-1].key_id == "r2"
    assert verify_chain(receipts, rotated) == []
    assert {p.kind for p in verify_chain(receipts, old)} == {ProblemKind.BAD_SIGNATURE}


def test_the_digest_is_the_sha256_of_the_bodys_canonical_json() -> None:
    # The form every stored receipt was sealed in: a chain sealed before stays intact.
    receipt = unsealed("alice", 1, GENESIS)
    assert digest(receipt) == hashlib.sha256(canonical_json(receipt.body())).hexdigest()


def test_a_receipt_whose_parts_add_up_past_canonical_jsons_byte_bound_seals_and_verifies() -> None:
    # Arguments at their limit, with their card and a result of up to 1 MiB beside them.
    big = dataclasses.replace(
        unsealed("alice", 1, GENESIS),
        arguments={"text": "x" * ARGUMENTS_BYTES},
        card_text="tool: send_email\n  text = " + "x" * 200,
        result={"text": "y" * (MAX_BYTES - 20)},
    )
    assert len(canonical_json(big.body(), max_bytes=4 * MAX_BYTES)) > MAX_BYTES
    assert verify_chain([seal(big, KEYS)], KEYS) == []


def test_a_receipt_whose_fields_no_longer_hash_counts_as_edited() -> None:
    receipt = seal(unsealed("alice", 1, GENESIS), KEYS)
    broken = dataclasses.replace(receipt, result={"x": float("nan")})
    assert check(broken, KEYS) == [ProblemKind.EDITED]


def test_problems_name_the_receipt_user_and_seq() -> None:
    receipts = chain()
    del receipts[1]
    (problem,) = verify_chain(receipts, KEYS)
    assert problem == ChainProblem(receipts[1].id, "alice", 3, ProblemKind.MISSING)


# heads and the roster


def heads_of(*chains: list[Receipt], keys: KeyRing = KEYS) -> Heads:
    """Signed heads at the end of each chain and a roster counting them, as the store keeps."""
    heads = tuple(sign_head(ChainHead(c[-1].user, c[-1].seq, c[-1].digest), keys) for c in chains)
    return Heads(heads, sign_roster(Roster(len(chains)), keys))


def head_kinds(receipts: list[Receipt], heads: Heads) -> set[tuple[str, ProblemKind]]:
    return {(p.user, p.kind) for p in verify_heads(receipts, heads, KEYS)}


def test_chains_that_end_at_their_heads_pass() -> None:
    alice, bob = chain("alice"), chain("bob", 2)
    assert verify_heads(alice + bob, heads_of(alice, bob), KEYS) == []


def test_nothing_at_all_passes() -> None:
    assert verify_heads([], Heads((), None), KEYS) == []


def test_a_deleted_last_receipt_shows_as_truncated() -> None:
    alice = chain("alice")
    heads = heads_of(alice)
    assert verify_chain(alice[:-1], KEYS) == []  # the chain alone cannot tell
    (problem,) = verify_heads(alice[:-1], heads, KEYS)
    assert problem == ChainProblem("", "alice", 5, ProblemKind.TRUNCATED)


def test_every_receipt_of_a_user_deleted_shows_as_truncated() -> None:
    alice, bob = chain("alice"), chain("bob", 2)
    assert head_kinds(bob, heads_of(alice, bob)) == {("alice", ProblemKind.TRUNCATED)}


def test_a_user_deleted_with_the_head_shows_as_a_missing_chain() -> None:
    alice, bob = chain("alice"), chain("bob", 2)
    heads = heads_of(alice, bob)
    without_alice = Heads(heads.heads[1:], heads.roster)
    assert head_kinds(bob, without_alice) == {("", ProblemKind.MISSING_CHAIN)}


def test_receipts_past_the_head_or_a_replaced_last_receipt_show_as_head_mismatch() -> None:
    alice = chain("alice")
    assert head_kinds(alice, heads_of(alice[:-1])) == {("alice", ProblemKind.HEAD_MISMATCH)}
    elsewhere = sign_head(ChainHead("alice", 5, alice[3].digest), KEYS)
    heads = Heads((elsewhere,), heads_of(alice).roster)
    assert head_kinds(alice, heads) == {("alice", ProblemKind.HEAD_MISMATCH)}


def test_a_chain_without_a_head_shows_as_missing_head() -> None:
    alice, bob = chain("alice"), chain("bob", 2)
    heads = heads_of(alice)
    assert head_kinds(alice + bob, heads) == {("bob", ProblemKind.MISSING_HEAD)}


def test_a_head_moved_back_without_the_key_fails_its_signature() -> None:
    alice = chain("alice")
    (head,) = heads_of(alice).heads
    forged = dataclasses.replace(head, seq=4, digest=alice[3].digest)
    heads = Heads((forged,), heads_of(alice).roster)
    assert head_kinds(alice[:-1], heads) == {("alice", ProblemKind.BAD_HEAD)}


def test_a_receipt_signature_cannot_stand_in_for_a_head_signature() -> None:
    alice = chain("alice")
    last = alice[-1]
    borrowed = ChainHead("alice", last.seq, last.digest, last.key_id, last.signature)
    heads = Heads((borrowed,), heads_of(alice).roster)
    assert head_kinds(alice, heads) == {("alice", ProblemKind.BAD_HEAD)}


@pytest.mark.parametrize("roster", [None, Roster(1), Roster(0)], ids=["missing", "unsigned", "low"])
def test_a_missing_unsigned_or_low_roster_fails(roster: Roster | None) -> None:
    alice = chain("alice")
    heads = Heads(
        heads_of(alice).heads,
        roster if roster is None or roster.users else sign_roster(roster, KEYS),
    )
    assert head_kinds(alice, heads) == {("", ProblemKind.BAD_ROSTER)}


def test_heads_round_trip_through_their_json_form() -> None:
    heads = heads_of(chain("alice"), chain("bob", 2))
    assert heads_from_dict(heads_to_dict(heads)) == heads
    assert heads_from_dict({"heads": [], "roster": None}) == Heads((), None)


@pytest.mark.parametrize(
    "data", [{}, {"heads": 3}, {"heads": [{"user": "a"}]}, {"heads": [], "roster": 1}]
)
def test_a_malformed_heads_file_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        heads_from_dict(data)


def test_chains_that_went_on_past_a_saved_copy_of_the_heads_are_not_behind() -> None:
    alice, bob = chain("alice"), chain("bob", 2)
    saved = heads_of(alice[:3], bob)
    assert behind(alice + bob, heads_of(alice, bob), saved) == []


def test_a_rollback_of_receipts_and_heads_together_is_behind_a_saved_copy() -> None:
    alice, bob = chain("alice"), chain("bob", 2)
    saved = heads_of(alice, bob)
    rolled_back = alice[:3] + bob
    now = heads_of(alice[:3], bob)
    assert verify_heads(rolled_back, now, KEYS) == []  # consistent inside the database
    (problem,) = behind(rolled_back, now, saved)
    assert problem == ChainProblem("", "alice", 5, ProblemKind.BEHIND_EXPECTED)


def test_a_whole_user_rolled_back_is_behind_a_saved_copy() -> None:
    alice, bob = chain("alice"), chain("bob", 2)
    saved = heads_of(alice, bob)
    kinds_found = {(p.user, p.kind) for p in behind(alice, heads_of(alice), saved)}
    assert kinds_found == {("bob", ProblemKind.BEHIND_EXPECTED), ("", ProblemKind.BEHIND_EXPECTED)}
