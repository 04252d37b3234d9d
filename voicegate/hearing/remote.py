"""The gate's side: a ``Transcriber`` whose hearing is done by recogniser workers over NATS.

``NatsHearing`` stands where ``FasterWhisperTranscriber`` stands in the voice pipeline, so
everything that decides safety stays in the gate: the device's signature and the nonce before
the pipeline, the replay fingerprint against the shared store and the decoding inside it, the
grammar, the decision and the named checks of the release after it. Only the utterance (its
samples, languages, readings and question) goes out; a hearing comes back.

It keeps its own event loop on a thread of its own, holding the one NATS connection, because
the pipeline calls a recogniser from worker threads. Each utterance is published to the work
stream under its own id (a repeat is stored once) with this gate's inbox as its reply subject;
the first hearing back for an id is taken and any later one (a redelivery, a slow worker) is
dropped. No hearing by the deadline, no worker seen, NATS down or the stream full: each raises
``HearingUnavailable``, which the pipeline turns into a refusal. Nothing is ever guessed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import nats
import numpy as np
import numpy.typing as npt
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.errors import Error as JetStreamError

from voicegate.errors import ConfigError, HearingUnavailable
from voicegate.hearing import queue, wire
from voicegate.voice import answer_model, calibration
from voicegate.voice.calibration import Calibration
from voicegate.voice.transcribe import Hearing, Samples, Utterance

logger = logging.getLogger(__name__)
T = TypeVar("T")

# How long the gate waits for one hearing: a worker's longest hearing (a 15 s clip, a few
# seconds on one CPU) after one redelivery (``queue.ACK_WAIT``), with room to spare.
DEADLINE = 30.0
# How long connecting to NATS at start may take before the gate refuses to start.
CONNECT_TIMEOUT = 5.0
# A worker unseen for this long is counted gone (three of its beats).
GONE_AFTER = 3 * queue.BEAT


class NatsHearing:
    """A ``Transcriber`` over recogniser workers; ``start`` before use, ``close`` after."""

    recogniser = "faster-whisper"

    def __init__(
        self,
        url: str,
        model: str,
        *,
        deadline: float = DEADLINE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.model = model
        self.deadline = deadline
        self.calibration = heard_calibration(model)
        # Called with each hearing's round trip in seconds (the gate's metrics).
        self.on_heard: Callable[[float], None] | None = None
        self._clock = clock
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._nc: Client | None = None
        self._inbox = ""
        self._waiting: dict[str, asyncio.Future[wire.Reply]] = {}
        self._seen: dict[str, float] = {}  # worker -> when it last said it was alive
        self._started = 0.0
        self._depth = 0
        self._watch: asyncio.Task[None] | None = None
        self.late = 0  # hearings that came back after their gate stopped waiting, or twice

    # -- life ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, make sure the stream exists and listen for hearings and workers;
        ``ConfigError`` when NATS cannot be reached or has no JetStream."""
        self._thread.start()
        try:
            self._run(self._connect(), CONNECT_TIMEOUT + 5)
        except (OSError, NatsError, JetStreamError, TimeoutError) as exc:
            self.close()
            raise ConfigError(f"cannot use NATS at {self.url} for hearing: {exc!r}") from None

    def close(self) -> None:
        """Drain the connection and stop the loop; safe to call twice."""
        if self._thread.is_alive():
            with _quietly():
                self._run(self._disconnect(), 10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()

    async def _disconnect(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if self._nc is not None:
            await self._nc.close()

    async def _connect(self) -> None:
        self._nc = await nats.connect(
            self.url, connect_timeout=CONNECT_TIMEOUT, max_reconnect_attempts=-1, name="gate"
        )
        await queue.ensure(self._nc.jetstream())
        self._inbox = f"_INBOX.voicegate.{uuid.uuid4().hex}"
        await self._nc.subscribe(f"{self._inbox}.*", cb=self._reply)
        await self._nc.subscribe(queue.ALIVE, cb=self._alive)
        self._started = self._clock()
        self._watch = self._loop.create_task(self._watch_depth())

    # -- what the gate reports ------------------------------------------------------------------

    def workers(self) -> int:
        """Workers heard from in the last ``GONE_AFTER`` seconds."""
        now = self._clock()
        return sum(1 for seen in list(self._seen.values()) if now - seen <= GONE_AFTER)

    def depth(self) -> int:
        """Utterances waiting for a worker, as last read from the stream (every beat)."""
        return self._depth

    # -- the Transcriber contract -----------------------------------------------------------------

    def transcribe(
        self,
        samples: Samples,
        *,
        languages: Sequence[str] = ("en",),
        candidates: Sequence[str] = (),
    ) -> Hearing:
        """Hear one clip on a worker."""
        return self.transcribe_many([Utterance(samples, tuple(languages), tuple(candidates))])[0]

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        """Hear each utterance on whichever worker takes it, all at once; called from a worker
        thread of the pipeline, never from the event loop."""
        return self._run(self._hear_all(list(utterances)), self.deadline + 5)

    def frames(self, samples: Samples) -> npt.NDArray[np.float32]:
        """The clip's template features, from a worker's hearing of it."""
        hearing = self.transcribe(samples)
        return hearing.frames if hearing.frames is not None else np.zeros((0, 0), np.float32)

    # -- on the loop --------------------------------------------------------------------------

    async def _hear_all(self, utterances: list[Utterance]) -> list[Hearing]:
        if self._nc is None or not self._nc.is_connected:
            raise HearingUnavailable(f"NATS at {self.url} is not connected")
        if self.workers() == 0 and self._clock() - self._started > GONE_AFTER:
            raise HearingUnavailable("no recogniser worker is connected")
        return list(await asyncio.gather(*(self._hear(u) for u in utterances)))

    async def _hear(self, utterance: Utterance) -> Hearing:
        assert self._nc is not None
        started = self._clock()
        job = wire.Job(uuid.uuid4().hex, self.model, started + self.deadline, utterance)
        future: asyncio.Future[wire.Reply] = self._loop.create_future()
        self._waiting[job.id] = future
        try:
            headers = {queue.REPLY_HEADER: f"{self._inbox}.{job.id}", "Nats-Msg-Id": job.id}
            try:
                await self._nc.jetstream().publish(
                    queue.SUBJECT, wire.pack_job(job), headers=headers, timeout=self.deadline
                )
            except (NatsError, JetStreamError, TimeoutError) as exc:
                raise HearingUnavailable(f"the utterance could not be queued: {exc!r}") from None
            try:
                reply = await asyncio.wait_for(future, job.deadline - self._clock())
            except TimeoutError:
                raise HearingUnavailable(
                    f"no worker heard the utterance within {self.deadline:g} s"
                ) from None
        finally:
            self._waiting.pop(job.id, None)
        if reply.hearing is None:
            raise HearingUnavailable(f"worker {reply.worker} could not hear it: {reply.error}")
        if self.on_heard is not None:
            self.on_heard(self._clock() - started)
        return reply.hearing

    async def _reply(self, msg: Msg) -> None:
        try:
            reply = wire.unpack_reply(msg.data)
        except wire.WireError as exc:
            logger.warning("a hearing that cannot be read came back: %s", exc)
            return
        future = self._waiting.get(reply.id)
        if future is None or future.done() or msg.subject != f"{self._inbox}.{reply.id}":
            # Late (the gate gave up), twice (a redelivery heard again) or misaddressed.
            self.late += 1
            return
        future.set_result(reply)

    async def _alive(self, msg: Msg) -> None:
        try:
            said = json.loads(msg.data)
            worker, model = str(said["worker"]), str(said["model"])
        except (ValueError, KeyError, TypeError):
            return
        if model == self.model:
            self._seen[worker] = self._clock()

    async def _watch_depth(self) -> None:
        while self._nc is not None and not self._nc.is_closed:
            with _quietly():
                self._depth = await queue.waiting(self._nc.jetstream())
            await asyncio.sleep(queue.BEAT)

    def _run(self, work: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)


def heard_calibration(model: str) -> Calibration:
    """The decision's thresholds for ``model``, with the answer model's where it has one: what
    ``FasterWhisperTranscriber(model)`` carries."""
    found = calibration.of(model)
    answers = answer_model.load(model)
    return found if answers is None else dataclasses.replace(found, answers=answers.thresholds)


def _quietly() -> contextlib.suppress:
    """What a best-effort step (closing, reading the queue's depth) may raise, ignored."""
    return contextlib.suppress(NatsError, JetStreamError, OSError, TimeoutError)
