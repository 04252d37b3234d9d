"""Hearing on recogniser workers over NATS: the hop's added time, and decisions per second.

One voice decision (decode, hearing, grammar; no replay history) of the 1 s benchmark clip,
made by a pipeline whose recogniser runs in this process and by one whose recogniser is
``voicegate worker`` processes over the NATS at ``--nats``, with the same model. Repetitions
alternate between the two, one at a time, so both see the same machine; the hop's cost is the
difference of the medians. Then ``BURST`` decisions at once through the workers, with one and
with two workers, and in this process, for decisions per second. On a machine of two cores two
workers share the cores the one had, so a second worker buys little there: it is for another
machine or a GPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from voicegate.domain import Stage
from voicegate.voice.calibration import UNCALIBRATED
from voicegate.voice.pipeline import VoicePipeline
from voicegate.voice.transcribe import Hearing, Samples, Utterance
from voicegate_lab.bench.measure import Options, median, ms
from voicegate_lab.bench.voice_app import CARDS, one_second_clip

if TYPE_CHECKING:
    from voicegate.hearing.remote import NatsHearing

_SILENCE = Hearing("", "en", 1.0, -9.0)

# Decisions sent at once for the rate: enough to keep two workers busy, well inside one
# gate's 16 voice answers in flight.
BURST = 16
START_TIMEOUT = 180.0


def run(options: Options) -> dict[str, Any]:
    """The hop's added time (medians) and decisions per second with 0 (in process), 1, 2
    workers."""
    return asyncio.run(_run(options))


async def _run(options: Options) -> dict[str, Any]:
    from voicegate.hearing.remote import NatsHearing
    from voicegate.voice.whisper import FasterWhisperTranscriber

    audio = one_second_clip()
    repetitions = options.pick(10, 2)
    local = VoicePipeline(FasterWhisperTranscriber(options.model, device=options.device), None)
    hearing = NatsHearing(options.nats, options.model)
    await asyncio.to_thread(hearing.start)
    remote = VoicePipeline(hearing, None, workers=4)
    try:
        transport_ms = await _transport(hearing, options, repetitions * 4)
        async with _workers(options, 1):
            for _ in range(2):  # warm-up of both
                await _decide(local, audio)
                await _decide(remote, audio)
            here_s, there_s, decisions = [], [], []
            for _ in range(repetitions):
                here_s.append(await _timed(local, audio))
                started = time.perf_counter()
                decisions.append(await _decide(remote, audio))
                there_s.append(time.perf_counter() - started)
            one = await _rate(remote, audio, options.pick(BURST, 4))
        async with _workers(options, 2):
            await _decide(remote, audio)
            two = await _rate(remote, audio, options.pick(BURST, 4))
        in_process = await _rate(local, audio, options.pick(BURST, 4))
    finally:
        await asyncio.to_thread(hearing.close)
    here_ms = median([ms(s) for s in here_s])
    there_ms = median([ms(s) for s in there_s])
    return {
        "model": options.model,
        "device": options.device,
        "nats": options.nats,
        "repetitions": repetitions,
        "in_process_ms": here_ms,
        "on_worker_ms": there_ms,
        "hop_ms": round(there_ms - here_ms, 3),
        "transport_ms": transport_ms,
        "decisions_per_s": {"in_process": in_process, "one_worker": one, "two_workers": two},
        "burst": options.pick(BURST, 4),
        "decided": sorted({d for d in decisions}),
    }


async def _transport(hearing: NatsHearing, options: Options, count: int) -> float:
    """The hop alone (median ms): a 1 s utterance with the two-card readings to a worker in
    this process that hears nothing and answers at once, and its hearing back."""
    from voicegate.hearing.worker import work
    from voicegate.voice import calibration, consent
    from voicegate.voice.hypotheses import LEXICONS

    readings = consent.readings(len(CARDS), Stage.CHOOSE, LEXICONS["en"])
    utterance = Utterance(
        np.zeros(16_000, np.float32),
        candidates=tuple(r.text for r in readings),
        question=calibration.question(Stage.CHOOSE, len(CARDS)),
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    echo = _Echo(options.model)
    task = asyncio.create_task(work(options.nats, echo, stop=stop, ready=ready.set, name="echo"))
    try:
        await ready.wait()
        trips = []
        for _ in range(count + 2):
            started = time.perf_counter()
            await asyncio.to_thread(hearing.transcribe_many, [utterance])
            trips.append(time.perf_counter() - started)
    finally:
        stop.set()
        await task
    return median([ms(s) for s in trips[2:]])


class _Echo:
    """A recogniser that hears nothing at once: what is left of a hop is the hop."""

    recogniser = "echo"

    def __init__(self, model: str) -> None:
        self.model = model
        self.calibration = UNCALIBRATED

    def transcribe(self, samples: Samples, **_: Any) -> Hearing:
        return _SILENCE

    def transcribe_many(self, utterances: Sequence[Utterance]) -> list[Hearing]:
        return [_SILENCE for _ in utterances]

    def frames(self, samples: Samples) -> npt.NDArray[np.float32]:
        return np.zeros((0, 0), np.float32)


async def _decide(pipeline: VoicePipeline, audio: bytes) -> str:
    result = await pipeline.decide(audio, user="bench", cards=len(CARDS), stage=Stage.CHOOSE)
    return result.decision.kind.value + (
        f" ({result.decision.reason})" if result.decision.reason else ""
    )


async def _timed(pipeline: VoicePipeline, audio: bytes) -> float:
    started = time.perf_counter()
    await _decide(pipeline, audio)
    return time.perf_counter() - started


async def _rate(pipeline: VoicePipeline, audio: bytes, count: int) -> float:
    """Decisions per second with ``count`` sent at once."""
    started = time.perf_counter()
    await asyncio.gather(*(_decide(pipeline, audio) for _ in range(count)))
    return round(count / (time.perf_counter() - started), 2)


@contextlib.asynccontextmanager
async def _workers(options: Options, count: int) -> AsyncIterator[None]:
    """``count`` ``voicegate worker`` processes, each ready to hear, stopped afterwards."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "voicegate.cli", "worker", "--nats", options.nats]
    argv += ["--model", options.model, "--device", options.device]
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]
    try:
        await asyncio.gather(*(asyncio.to_thread(_ready, p) for p in procs))
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(60)


def _ready(proc: subprocess.Popen[bytes]) -> None:
    """Wait for the worker's first line, which it prints once it hears."""
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if "hearing with" not in line:
        raise RuntimeError(f"the worker did not start (exit {proc.poll()}): {line!r}")


def lines(figures: dict[str, Any]) -> list[str]:
    """The human summary."""
    rate = figures["decisions_per_s"]
    return [
        f"model {figures['model']} on {figures['device']}, 1 s clip, "
        f"{figures['repetitions']} alternating repetitions; decided {figures['decided']}",
        f"the hop alone {figures['transport_ms']:.1f} ms (an echo worker; goal <= 10); one "
        f"decision in process {figures['in_process_ms']:.0f} ms, on a worker "
        f"{figures['on_worker_ms']:.0f} ms, {figures['hop_ms']:.1f} ms more (medians)",
        f"{figures['burst']} at once: {rate['in_process']} decisions/s in process, "
        f"{rate['one_worker']} with one worker, {rate['two_workers']} with two",
    ]
