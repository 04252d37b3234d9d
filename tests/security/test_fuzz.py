"""Hypothesis on bytes over every parser that reads what a stranger sends: only the documented
refusal types ever escape.

    token decoder      TokenRefused
    canonical hashing  ValueError
    consent grammar    nothing (it always answers a Decision)
    audio decoder      AudioRefused
    device signatures  DeviceRefused (verify), ValueError (public keys)
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tests.security import audio
from voicegate.canonical import MAX_DEPTH, args_hash, canonical_json
from voicegate.device import signing
from voicegate.domain import Decision, Device, DeviceKind, Stage
from voicegate.errors import AudioRefused, DeviceRefused, TokenRefused
from voicegate.reasons import Kind, Reason
from voicegate.secrets import KeyRing
from voicegate.tokens import PREFIX, TokenCodec
from voicegate.voice.audio import Clip, decode
from voicegate.voice.consent import read_words

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The audio decoders are the slow ones; fewer examples keep the suite short.
FUZZ_AUDIO = settings(FUZZ, max_examples=120)

NOW = 1_750_000_000.0
KEYS = KeyRing.generate()
CODEC = TokenCodec(KEYS, clock=lambda: NOW)
BINDING = {"subject": "owner", "tenant": "default", "tool": "write_note", "target": ""}
PLAN = args_hash({"tool": "write_note", "arguments": {"name": "a"}})
VALID_TOKEN = CODEC.mint(**BINDING, args_hash=PLAN)

MAGIC = [
    b"RIFF\x24\x00\x00\x00WAVEfmt ",
    b"RF64\xff\xff\xff\xffWAVEds64",
    b"fLaC\x00\x00\x00\x22",
    b"OggS\x00\x02" + b"\x00" * 20 + b"\x01\x13OpusHead",
    b"OggS\x00\x02" + b"\x00" * 20 + b"\x01\x1e\x01vorbis",
    b"\x1a\x45\xdf\xa3",
    b"\x00\x00\x00\x20ftypM4A ",
]
CONTENT_TYPES = [None, "", "audio/wav", "audio/webm", "audio/ogg; codecs=opus", "text/plain"]
VALID_AUDIO = {fmt: audio.encode(fmt) for fmt in audio.FORMATS}


# -- tokens ----------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=600))
@example(PREFIX.encode() + b"e30.e30.AAAA")
@example(VALID_TOKEN.encode() + b"\xff")
def test_token_decoder_refuses_any_bytes_with_token_refused(data: bytes) -> None:
    try:
        CODEC.verify(data, **BINDING, args_hash=PLAN)
    except TokenRefused as refused:
        assert refused.reason in Reason
    else:
        pytest.fail("random bytes verified as a token")


@FUZZ
@given(st.text(max_size=600))
def test_token_decoder_refuses_any_text_with_token_refused(text: str) -> None:
    with pytest.raises(TokenRefused):
        CODEC.verify(PREFIX + text, **BINDING, args_hash=PLAN)


@FUZZ
@given(st.data())
def test_any_change_to_a_valid_token_is_refused(data: st.DataObject) -> None:
    raw = bytearray(VALID_TOKEN.encode())
    edits = data.draw(st.integers(1, 4))
    for _ in range(edits):
        action = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        at = data.draw(st.integers(0, len(raw) - 1))
        if action == "flip":
            raw[at] ^= data.draw(st.integers(1, 255))
        elif action == "insert":
            raw.insert(at, data.draw(st.integers(0, 255)))
        elif len(raw) > 1:
            del raw[at]
    assume(bytes(raw) != VALID_TOKEN.encode())
    with pytest.raises(TokenRefused):
        CODEC.verify(bytes(raw), **BINDING, args_hash=PLAN)


@FUZZ
@given(
    st.integers()
    | st.floats()
    | st.none()
    | st.lists(st.text(max_size=5), max_size=3)
    | st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)
    | st.builds(bytearray, st.binary(max_size=20))
)
def test_token_decoder_refuses_values_that_are_not_text(value: Any) -> None:
    with pytest.raises(TokenRefused):
        CODEC.read(value)


# -- canonical hashing -----------------------------------------------------------------------

JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(codec=None, exclude_categories=())),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(max_size=5) | st.integers(), children, max_size=5)
        | st.tuples(children)
    ),
    max_leaves=40,
)


@FUZZ
@given(JSONISH)
@example([float("nan")])
@example({1: "x"})
@example("\ud800")
@example(10**5000)
def test_canonical_hash_of_anything_is_a_hash_or_a_value_error(value: Any) -> None:
    try:
        digest = args_hash(value)
    except ValueError:
        return
    assert len(digest) == 64
    # What hashes is plain JSON that reads back to the same hash.
    assert args_hash(json.loads(canonical_json(value))) == digest


@FUZZ
@given(st.binary(max_size=400))
def test_canonical_hash_of_parsed_bytes_never_fails_another_way(data: bytes) -> None:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return
    with contextlib.suppress(ValueError):
        args_hash(value)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 100_000])
def test_canonical_hash_refuses_deep_nesting_without_recursing(depth: int) -> None:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    with pytest.raises(ValueError):
        args_hash(value)


def test_canonical_hash_refuses_a_cycle() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError):
        args_hash({"a": cycle})


# -- the consent grammar ---------------------------------------------------------------------


@FUZZ
@given(
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", "surrogateescape")) | st.text(),
    st.integers(1, 5),
    st.sampled_from(list(Stage)),
    st.lists(st.text(max_size=20), max_size=3),
)
def test_grammar_answers_every_transcript_with_a_decision(
    transcript: str, cards: int, stage: Stage, card_words: list[str]
) -> None:
    decision = read_words(transcript, cards, stage, card_words)
    assert isinstance(decision, Decision) and decision.kind in Kind
    if decision.kind is Kind.REFUSE:
        assert isinstance(decision.reason, Reason)
    if decision.kind is Kind.CHOOSE:
        assert decision.card is not None and 1 <= decision.card <= cards


def test_grammar_handles_a_very_long_transcript() -> None:
    decision = read_words("yes " * 20_000 + "no", 1, Stage.FINAL)
    assert decision.kind is Kind.REFUSE


# -- the audio decoder -----------------------------------------------------------------------


def _checked(data: bytes, content_type: str | None) -> None:
    try:
        clip = decode(data, content_type)
    except AudioRefused as refused:
        assert refused.reason in Reason
        return
    assert isinstance(clip, Clip)
    assert clip.samples.dtype == np.float32 and np.isfinite(clip.samples).all()
    assert 0 < clip.duration <= 15.0 + 0.01 and math.isfinite(clip.rms)


@FUZZ_AUDIO
@given(st.sampled_from(MAGIC), st.binary(max_size=2_000), st.sampled_from(CONTENT_TYPES))
def test_audio_decoder_refuses_junk_behind_any_magic_number(
    magic: bytes, rest: bytes, content_type: str | None
) -> None:
    _checked(magic + rest, content_type)


@FUZZ_AUDIO
@given(st.binary(max_size=1_000), st.sampled_from(CONTENT_TYPES))
def test_audio_decoder_refuses_arbitrary_bytes(data: bytes, content_type: str | None) -> None:
    _checked(data, content_type)


@FUZZ_AUDIO
@given(st.sampled_from(sorted(VALID_AUDIO)), st.data())
def test_audio_decoder_survives_damage_to_real_recordings(fmt: str, data: st.DataObject) -> None:
    raw = bytearray(VALID_AUDIO[fmt])
    for _ in range(data.draw(st.integers(1, 16))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    _checked(bytes(raw[:cut] if data.draw(st.booleans()) else raw), audio.CONTENT_TYPES[fmt])


@FUZZ_AUDIO
@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 40),
    st.sampled_from([8, 16, 24, 32, 64]),
    st.sampled_from([1, 3, 6, 0xFFFE, 0]),
    st.integers(0, 2**32 - 1),
    st.binary(max_size=4_000),
)
def test_audio_decoder_refuses_lying_wav_headers(
    rate: int, channels: int, bits: int, fmt: int, size: int, body: bytes
) -> None:
    header = audio.wav_header(
        rate=min(rate, 2**32 // max(1, channels * bits // 8) - 1),
        channels=channels,
        bits=bits,
        data_size=size,
        fmt=fmt,
    )
    _checked(header + body, "audio/wav")


@FUZZ_AUDIO
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=64))
def test_audio_decoder_refuses_float_samples_that_are_not_numbers(values: list[float]) -> None:
    x = np.resize(np.asarray(values, dtype=np.float32), 16_000)
    out = io.BytesIO()
    sf.write(out, x, 16_000, format="WAV", subtype="FLOAT")
    _checked(out.getvalue(), "audio/wav")


# -- device signatures -----------------------------------------------------------------------

DEVICE = Device(
    id="dev_fuzz",
    user="owner",
    kind=DeviceKind.VOICE,
    public_key=signing.normalise_public_key(
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    ),
    algorithm="ES256",
    created_at=NOW,
)


@FUZZ
@given(
    st.text(max_size=40),
    st.text(max_size=200),
    st.text(max_size=30),
    st.binary(max_size=200),
    st.text(max_size=200),
)
def test_signature_check_refuses_anything_with_device_refused(
    method: str, target: str, stamp: str, body: bytes, signature: str
) -> None:
    request = signing.SignedRequest(DEVICE.id, method, target, stamp, body, signature)
    with pytest.raises(DeviceRefused):
        signing.verify(DEVICE, request, now=NOW)


@FUZZ
@given(
    st.text(max_size=300)
    | st.dictionaries(st.text(max_size=5), st.text(max_size=60), max_size=6)
    | st.binary(max_size=200).map(lambda b: b.decode("latin-1"))
)
def test_public_key_parser_refuses_anything_with_value_error(key: Any) -> None:
    try:
        normalised = signing.normalise_public_key(key)
    except ValueError:
        return
    assert json.loads(normalised)["crv"] == "P-256"
