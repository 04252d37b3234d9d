"""The gate's hearing over the real local NATS server, with scripted workers: what comes back is
the worker's hearing, once; no worker, a worker of another model or a lost one is a refusal."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import nats
import numpy as np
import pytest

from voicegate.domain import Stage
from voicegate.errors import HearingUnavailable
from voicegate.hearing import queue, wire
from voicegate.hearing.remote import GONE_AFTER, NatsHearing
from voicegate.hearing.worker import work
from voicegate.reasons import Kind, Reason
from voicegate.voice.pipeline import VoicePipeline
from voicegate.voice.transcribe import FakeTranscriber, Hearing, Utterance

pytestmark = pytest.mark.nats

YES = Hearing("Yes.", "en", 0.01, -0.1, scores=(("yes", -0.05),))
ONE_SECOND = np.zeros(16_000, dtype=np.float32)


@asynccontextmanager
async def worker(
    url: str,
    hearings: Sequence[Hearing],
    *,
    model: str = "tiny.en",
    name: str = "w1",
    transcriber: FakeTranscriber | None = None,
) -> AsyncIterator[FakeTranscriber]:
    """A worker hearing ``hearings`` in order (or with ``transcriber``), in this process,
    until the block ends."""
    scripted = transcriber or FakeTranscriber(hearings, model=model)
    stop = asyncio.Event()
    started = asyncio.Event()
    task = asyncio.create_task(work(url, scripted, stop=stop, name=name, ready=started.set))
    await asyncio.wait_for(started.wait(), 10)
    try:
        yield scripted
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


@asynccontextmanager
async def gate(url: str, *, deadline: float = 10.0) -> AsyncIterator[NatsHearing]:
    hearing = NatsHearing(url, "tiny.en", deadline=deadline)
    await asyncio.to_thread(hearing.start)
    try:
        yield hearing
    finally:
        await asyncio.to_thread(hearing.close)


async def until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Wait for ``condition()`` (a probe of another party, not a timing assumption)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_a_worker_hears_an_utterance_for_the_gate(nats_url: str) -> None:
    async with gate(nats_url) as hearing, worker(nats_url, [YES]) as scripted:
        await until(lambda: hearing.workers() == 1, "the worker was never counted")
        utterance = Utterance(ONE_SECOND, ("en",), ("yes", "no"), question="yes")
        (heard,) = await asyncio.to_thread(hearing.transcribe_many, [utterance])
    assert heard.text == "Yes." and dict(heard.scores)["yes"] == -0.05
    (asked,) = scripted.calls
    assert asked.candidates == ("yes", "no") and asked.question == "yes"
    assert np.array_equal(asked.samples, ONE_SECOND)
    assert hearing.late == 0


class ByLevel(FakeTranscriber):
    """Hears an utterance of constant level ``i / 10`` as the ``i``-th word, whichever worker
    takes it: the queue, not the test, decides how the utterances are shared out."""

    WORDS = ("One.", "Two.", "Three.", "Four.")

    def __init__(self) -> None:
        super().__init__([], model="tiny.en")

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        self.calls.extend(utterances)
        return [
            Hearing(self.WORDS[round(float(u.samples[0]) * 10)], "en", 0.0, -0.1)
            for u in utterances
        ]


async def test_several_utterances_at_once_each_get_their_own_hearing(nats_url: str) -> None:
    first, second = ByLevel(), ByLevel()
    async with (
        gate(nats_url) as hearing,
        worker(nats_url, [], name="w1", transcriber=first),
        worker(nats_url, [], name="w2", transcriber=second),
    ):
        await until(lambda: hearing.workers() == 2, "both workers were never counted")
        asked = [Utterance(np.full(800, i / 10, np.float32)) for i in range(4)]
        heard = await asyncio.to_thread(hearing.transcribe_many, asked)
    assert [h.text for h in heard] == list(ByLevel.WORDS)
    assert len(first.calls) + len(second.calls) == 4  # each heard once, by one worker or other


async def test_a_recogniser_that_fails_is_a_refusal_that_says_so(nats_url: str) -> None:
    async with gate(nats_url) as hearing, worker(nats_url, []) as scripted:
        await until(lambda: hearing.workers() == 1, "the worker was never counted")
        with pytest.raises(HearingUnavailable, match="the recogniser failed: the scripted"):
            await asyncio.to_thread(hearing.transcribe_many, [Utterance(ONE_SECOND)])
    assert len(scripted.calls) == 1


@pytest.mark.slow
async def test_with_no_worker_an_answer_is_refused_within_the_deadline(nats_url: str) -> None:
    async with gate(nats_url, deadline=1.5) as hearing:
        started = time.monotonic()
        with pytest.raises(HearingUnavailable, match=r"no worker heard the utterance within 1\.5"):
            await asyncio.to_thread(hearing.transcribe_many, [Utterance(ONE_SECOND)])
        assert time.monotonic() - started < 1.5 + 2.0
        # Once no worker has been seen for three beats, an answer is refused at once.
        await asyncio.sleep(GONE_AFTER - (time.monotonic() - started) + 0.5)
        started = time.monotonic()
        with pytest.raises(HearingUnavailable, match="no recogniser worker is connected"):
            await asyncio.to_thread(hearing.transcribe_many, [Utterance(ONE_SECOND)])
        assert time.monotonic() - started < 0.5


async def test_the_pipeline_turns_no_hearing_into_a_refusal_it_names(nats_url: str) -> None:
    async with gate(nats_url, deadline=1.0) as hearing:
        pipeline = VoicePipeline(hearing, None)
        with open("fixtures/audio/clips/piper_yes.flac", "rb") as clip:
            result = await pipeline.decide(clip.read(), user="u", cards=1, stage=Stage.CHOOSE)
    assert result.decision.kind is Kind.REFUSE
    assert result.decision.reason is Reason.HEARING_UNAVAILABLE


async def test_a_worker_of_another_model_says_so_and_hears_nothing(nats_url: str) -> None:
    async with gate(nats_url) as hearing, worker(nats_url, [YES], model="base") as scripted:
        with pytest.raises(HearingUnavailable, match=r"hears with base, not tiny\.en"):
            await asyncio.to_thread(hearing.transcribe_many, [Utterance(ONE_SECOND)])
    assert scripted.calls == []
    assert hearing.workers() == 0  # a worker of another model is not counted for this gate


async def test_a_second_hearing_of_one_utterance_is_dropped(nats_url: str) -> None:
    """As after a redelivery: the gate takes the first hearing and counts the second late."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        async with gate(nats_url) as hearing:
            pulls = await js.pull_subscribe_bind(durable=queue.CONSUMER, stream=queue.STREAM)
            asked = asyncio.create_task(
                asyncio.to_thread(hearing.transcribe_many, [Utterance(ONE_SECOND)])
            )
            (msg,) = await pulls.fetch(1, timeout=10)
            job = wire.unpack_job(msg.data)
            reply_to = msg.headers[queue.REPLY_HEADER]  # type: ignore[index]
            for text in ("First.", "Second."):
                said = Hearing(text, "en", 0.0, -0.1)
                await nc.publish(reply_to, wire.pack_reply(wire.Reply(job.id, "w", said)))
            await msg.ack()
            (heard,) = await asyncio.wait_for(asked, 10)
            await until(lambda: hearing.late == 1, "the second hearing was not counted late")
    finally:
        await nc.close()
    assert heard.text == "First."


async def test_health_and_metrics_report_the_workers_the_queue_and_the_round_trip(
    nats_url: str,
) -> None:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    from voicegate.mcp.notes import build_notes_server
    from voicegate.mcp.policy import Policy
    from voicegate.mcp.upstream import UpstreamSpec
    from voicegate.secrets import Secret
    from voicegate.settings import ServerConfig
    from voicegate.store.memory import MemoryStore
    from voicegate.web.app import build_app

    config = ServerConfig(token=Secret("a-long-enough-agent-token"))
    async with gate(nats_url) as hearing, worker(nats_url, [YES]):
        app = build_app(
            config,
            upstream=UpstreamSpec.in_process(build_notes_server()),
            policy=Policy(),
            store=MemoryStore(),
            voice=VoicePipeline(hearing, None),
        )
        await until(lambda: hearing.workers() == 1, "the worker was never counted")
        await asyncio.to_thread(hearing.transcribe_many, [Utterance(ONE_SECOND)])
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url=config.base_url) as http:
            health = (await http.get("/healthz")).json()
            text = (await http.get("/metrics")).text
    assert health["hearing"] == {"workers": 1, "queue_depth": 0}
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["voicegate_hearing_workers"] == 1.0
    assert samples["voicegate_hearing_queue_depth"] == 0.0
    assert samples["voicegate_hearing_seconds_count"] == 1.0
