"""The real app in this process for P1 and P2: SQLite store, notes upstream, Whisper, devices.

Uploads go through the device API over an ASGI transport, signed by paired P-256 devices
(``voicegate_lab.eval.local.Harness``). The pipeline and the store are wrapped only to record
what each step took; every call still reaches the real component.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, cast

import soundfile

from voicegate.domain import PendingSet, Risk, Stage
from voicegate.gate.core import ActionRequest
from voicegate.store.base import Store
from voicegate.voice.pipeline import VoicePipeline, VoiceResult
from voicegate.voice.transcribe import Hearing, Transcriber, Utterance
from voicegate_lab.eval.harness import PairedDevice
from voicegate_lab.eval.local import UNPAIRED, Harness, in_process

REPO = Path(__file__).resolve().parents[3]
# "The second one", cut to exactly one second (0.25 s to 1.25 s holds all of the speech).
SOURCE = REPO / "fixtures" / "audio" / "browser" / "the_second_one.wav"
CARDS = [
    ActionRequest("write_note", {"name": "shopping", "text": "milk"}),
    ActionRequest("write_note", {"name": "shopping", "text": "eggs"}),
]


def one_second_clip() -> bytes:
    """The 1 s benchmark clip as 16-bit WAV bytes."""
    samples, rate = soundfile.read(SOURCE, dtype="float32")
    start = int(0.25 * rate)
    buf = io.BytesIO()
    soundfile.write(buf, samples[start : start + rate], rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


class CountingTranscriber:
    """A transcriber that remembers the size of every batch it was given."""

    def __init__(self, inner: Transcriber) -> None:
        self.inner = inner
        self.recogniser = inner.recogniser
        self.model = inner.model
        self.calibration = inner.calibration
        self.batches: list[int] = []

    def transcribe(self, samples: Any, **kwargs: Any) -> Hearing:
        """One clip, as a batch of one."""
        return self.transcribe_many([Utterance(samples, **kwargs)])[0]

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        """Count the batch, then hand it on."""
        self.batches.append(len(utterances))
        return self.inner.transcribe_many(utterances)

    def frames(self, samples: Any) -> Any:
        """The inner recogniser's features for templates."""
        return self.inner.frames(samples)


class RecordingPipeline(VoicePipeline):
    """The voice pipeline, keeping every result so its step timings can be read afterwards."""

    results: list[VoiceResult]

    async def decide(
        self,
        audio: bytes,
        *,
        user: str,
        cards: int,
        stage: Stage,
        content_type: str | None = None,
        card_words: Sequence[str] = (),
    ) -> VoiceResult:
        """Decide as the real pipeline does, and keep the result."""
        result = await super().decide(
            audio,
            user=user,
            cards=cards,
            stage=stage,
            content_type=content_type,
            card_words=card_words,
        )
        self.results.append(result)
        return result


class _TimedPart:
    """One store concept whose every call adds its duration to a shared total."""

    def __init__(self, inner: Any, total: list[float]) -> None:
        self._inner = inner
        self._total = total

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self._total[0] += time.perf_counter() - start

        return timed


class TimedStore:
    """A store that adds up the time spent in it, except the replay guard's own reads."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.total = [0.0]
        for part in ("pending", "ledger", "devices", "pairings", "budgets", "receipts"):
            setattr(self, part, _TimedPart(getattr(inner, part), self.total))
        # The guard's reads are inside the "fingerprint" step already.
        self.fingerprints = inner.fingerprints
        # Templates are read inside the "templates" step of the voice decision.
        self.templates = inner.templates
        self.push = inner.push
        self.durable = inner.durable

    async def close(self) -> None:
        """Close the real store."""
        await self.inner.close()


@contextlib.asynccontextmanager
async def voice_app(model: str, device: str) -> AsyncIterator[tuple[Harness, RecordingPipeline]]:
    """The app with the real recogniser on a SQLite store in a temporary folder.

    The server's own budgets, except pairing: a run pairs a fresh phone per upload, far more
    than the 30 pairings a window allows.
    """
    from voicegate.settings import ServerConfig
    from voicegate.store import open_store
    from voicegate.voice.fingerprint import ReplayGuard
    from voicegate.voice.whisper import FasterWhisperTranscriber

    with tempfile.TemporaryDirectory(prefix="voicegate-bench-") as folder:
        store = await open_store(str(Path(folder) / "gate.db"))
        timed = TimedStore(store)
        transcriber = CountingTranscriber(FasterWhisperTranscriber(model, device=device))
        pipeline = RecordingPipeline(transcriber, ReplayGuard(store.fingerprints))
        pipeline.results = []
        config = ServerConfig(pairing_limits=UNPAIRED)
        try:
            async with in_process(
                lambda _: pipeline, store=cast(Store, timed), config=config
            ) as harness:
                yield harness, pipeline
        finally:
            await store.close()


async def ready_answer(harness: Harness, user: str) -> tuple[PairedDevice, PendingSet]:
    """A freshly paired device for ``user`` and a two-card set waiting for its answer.

    A fresh user per upload keeps the replay guard from refusing the same clip twice.
    """
    device = await harness.device(user)
    pending = await harness.services.gate.propose(user, CARDS, risk=Risk.LOW)
    return device, pending


async def upload(
    harness: Harness, device: PairedDevice, pending: PendingSet, audio: bytes
) -> tuple[float, dict[str, Any]]:
    """Seconds one signed voice upload took to come back decided, and the answer."""
    from voicegate.device import signing

    sent = {
        "Content-Type": "audio/wav",
        "X-Voicegate-Pending": pending.id,
        "X-Voicegate-Nonce": pending.nonce,
    }
    headers = signing.sign(device.key, device.id, "POST", "/device/voice", audio, time.time(), sent)
    start = time.perf_counter()
    answer = await harness.client.post("/device/voice", content=audio, headers=headers)
    elapsed = time.perf_counter() - start
    body = answer.json()
    if answer.status_code >= 500 or not isinstance(body, dict):
        raise RuntimeError(f"/device/voice answered {answer.status_code}: {answer.text[:300]}")
    return elapsed, body


class RssSampler:
    """Samples this process's resident memory in a thread while a block runs; keeps the peak."""

    def __init__(self, read: Callable[[], float], every: float = 0.01) -> None:
        self.read = read
        self.every = every
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RssSampler:
        self.peak = self.read()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.read())

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, self.read())
