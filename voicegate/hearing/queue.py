"""The JetStream layout the gates and the workers share, created idempotently by either.

One work-queue stream holds the utterances waiting to be heard; every worker pulls from one
durable consumer, so each utterance goes to one worker at a time, and one that is not
acknowledged within ``ACK_WAIT`` (its worker died) goes to another, at most ``MAX_DELIVER``
times in all. Hearings go back on core NATS to the reply subject each utterance names (the
gate's own inbox): nothing of them is kept. Workers say they are alive on ``ALIVE`` every
``BEAT`` seconds, which is how a gate counts them.
"""

from __future__ import annotations

import contextlib
import logging

from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, NotFoundError

logger = logging.getLogger(__name__)

STREAM = "VOICEGATE_HEARING"
SUBJECT = "voicegate.hearing.utterances"
CONSUMER = "workers"
ALIVE = "voicegate.hearing.alive"
# The header naming the subject a hearing goes back to.
REPLY_HEADER = "Voicegate-Reply"
# NATS's default max_payload: the longest clip the gate decodes (15 s, 960,000 bytes of
# float32 samples) and its head fit in it.
MAX_MESSAGE = 1 << 20
# An utterance nobody heard within a minute is past every gate's deadline (30 s by default).
MAX_AGE = 60.0
# A publish repeated within the window (the same utterance id) is stored once.
DUPLICATE_WINDOW = 60.0
# Waiting utterances held at most; past it a new one is refused at once (the gate fails closed).
MAX_WAITING = 1000
# A worker's hold on an utterance: it says "still working" every ACK_WAIT / 3 while it hears,
# so only a dead or stuck worker loses it, and another gets it after at most this long.
ACK_WAIT = 6.0
# Deliveries of one utterance at most: one that kills every worker it reaches is given up.
MAX_DELIVER = 3
# How often a worker says it is alive; a gate counts a worker unseen for three beats as gone.
BEAT = 2.0


def stream_config() -> StreamConfig:
    """The stream of utterances waiting to be heard."""
    return StreamConfig(
        name=STREAM,
        subjects=[SUBJECT],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.MEMORY,  # a restart of NATS loses only utterances nobody waits for
        max_msgs=MAX_WAITING,
        max_msg_size=MAX_MESSAGE,
        max_age=MAX_AGE,
        discard=DiscardPolicy.NEW,
        duplicate_window=DUPLICATE_WINDOW,
    )


def consumer_config() -> ConsumerConfig:
    """The one durable consumer every worker pulls from."""
    return ConsumerConfig(
        durable_name=CONSUMER,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=ACK_WAIT,
        max_deliver=MAX_DELIVER,
        filter_subject=SUBJECT,
    )


async def ensure(js: JetStreamContext) -> None:
    """Create the stream and the consumer, or bring them to this layout; safe to repeat."""
    try:
        await js.stream_info(STREAM)
    except NotFoundError:
        # Another gate or worker may create it meanwhile: then this one is refused, and updates.
        with contextlib.suppress(BadRequestError):
            await js.add_stream(stream_config())
    await js.update_stream(stream_config())
    try:
        await js.add_consumer(STREAM, consumer_config())
    except BadRequestError as exc:
        # An existing consumer with other settings (an older layout) is replaced.
        logger.warning("hearing consumer %s: %s; making it again", CONSUMER, exc.description)
        await js.delete_consumer(STREAM, CONSUMER)
        await js.add_consumer(STREAM, consumer_config())


async def waiting(js: JetStreamContext) -> int:
    """Utterances no worker has taken yet (the queue's depth)."""
    info = await js.consumer_info(STREAM, CONSUMER)
    return int(info.num_pending or 0)
