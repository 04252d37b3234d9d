"""A recogniser worker: takes utterances from the work stream, hears them, sends hearings back.

``voicegate worker --nats URL`` runs ``work``. It holds one recogniser (and its answer model)
and hears one utterance at a time; run several workers, on one machine or many, CPU or GPU, to
hear more at once. While it hears it tells JetStream it is still working, so only a worker that
died or hangs loses its utterance to another. It sends the hearing before it acknowledges the
utterance: a worker killed between the two leaves the utterance to be heard again, and the gate
takes the first hearing and drops the second. It decides nothing: no release, no nonce, no user.

An utterance for another model, past its deadline, or not readable is answered with an error
(where it names a reply subject) and never heard again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import TimeoutError as FetchTimeout

from voicegate import faults
from voicegate.hearing import queue, wire
from voicegate.voice.transcribe import Transcriber

logger = logging.getLogger(__name__)

# How long one fetch waits for an utterance before it looks at ``stop`` again.
POLL = 1.0


def worker_name() -> str:
    """This worker's name in the gates' count: host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def work(
    url: str,
    transcriber: Transcriber,
    *,
    stop: asyncio.Event,
    name: str | None = None,
    ready: Callable[[], None] | None = None,
    on_step: Callable[[str], None] = faults.ignore,
) -> int:
    """Hear utterances from NATS at ``url`` until ``stop`` is set; the number heard.

    ``on_step`` hears ``faults.WHILE_HEARING`` once an utterance is heard, before its hearing
    is sent; by default it does nothing (the crash tests pass one that kills the process).
    """
    me = name or worker_name()
    nc = await nats.connect(url, max_reconnect_attempts=-1, name=f"worker {me}")
    heard = 0
    try:
        js = nc.jetstream()
        await queue.ensure(js)
        pulls = await js.pull_subscribe_bind(durable=queue.CONSUMER, stream=queue.STREAM)
        beat = asyncio.create_task(_beat(nc, me, transcriber.model, stop))
        if ready is not None:
            ready()
        try:
            while not stop.is_set():
                try:
                    taken = await pulls.fetch(1, timeout=POLL)
                except (FetchTimeout, TimeoutError):
                    continue
                for msg in taken:
                    heard += await _handle(nc, msg, transcriber, me, on_step)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
    finally:
        await nc.close()
    return heard


async def _handle(
    nc: Client, msg: Msg, transcriber: Transcriber, me: str, on_step: Callable[[str], None]
) -> int:
    """Hear one utterance and answer it; 1 when it was heard."""
    reply_to = (msg.headers or {}).get(queue.REPLY_HEADER, "")
    try:
        job = wire.unpack_job(msg.data)
    except wire.WireError as exc:
        await _answer(nc, reply_to, wire.Reply("", me, None, f"unreadable: {exc}"))
        await msg.term()
        return 0
    refusal = ""
    if job.model != transcriber.model:
        refusal = f"this worker hears with {transcriber.model}, not {job.model}"
    elif time.time() > job.deadline:
        refusal = "past its deadline: nobody waits for it"
    if refusal:
        logger.warning("utterance %s not heard: %s", job.id, refusal)
        await _answer(nc, reply_to, wire.Reply(job.id, me, None, refusal))
        await msg.term()
        return 0
    holding = asyncio.create_task(_hold(msg))
    try:
        hearing = await asyncio.to_thread(transcriber.transcribe_many, [job.utterance])
    except Exception as exc:  # the recogniser's own failure: say it, never hear it again
        logger.exception("utterance %s: the recogniser failed", job.id)
        await _answer(nc, reply_to, wire.Reply(job.id, me, None, f"the recogniser failed: {exc}"))
        await msg.term()
        return 0
    finally:
        holding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holding
    on_step(faults.WHILE_HEARING)
    # The hearing first, then the acknowledgement: dying between the two costs a second
    # hearing, never a lost one.
    await _answer(nc, reply_to, wire.Reply(job.id, me, hearing[0]))
    await msg.ack()
    return 1


async def _answer(nc: Client, reply_to: str, reply: wire.Reply) -> None:
    if reply_to:
        await nc.publish(reply_to, wire.pack_reply(reply))
        await nc.flush()


async def _hold(msg: Msg) -> None:
    """Tell JetStream this worker still hears ``msg``, every third of its hold."""
    while True:
        await asyncio.sleep(queue.ACK_WAIT / 3)
        await msg.in_progress()


async def _beat(nc: Client, me: str, model: str, stop: asyncio.Event) -> None:
    said = json.dumps({"worker": me, "model": model}).encode()
    while not stop.is_set():
        with contextlib.suppress(Exception):
            await nc.publish(queue.ALIVE, said)
        await asyncio.sleep(queue.BEAT)
