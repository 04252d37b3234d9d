"""P2 concurrency: 16 devices uploading at once vs the same 16 uploads one at a time.

Each of 16 users has a paired device and a two-card set waiting; in a round, all 16 signed
uploads of the 1 s clip go out together (or one after another), each answered through the
device API with the real recogniser. Decisions per second is 16 over the round's wall time;
the speed-up is concurrent over sequential. The pipeline queues answers that arrive while the
model is busy and encodes them as one batch (``max_batch``); the batch sizes it actually ran
are reported. Resident memory is sampled every 10 ms during the concurrent rounds.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from voicegate.bench.measure import Options, median, rss_mib
from voicegate.bench.voice_app import RssSampler, one_second_clip, ready_answer, upload, voice_app
from voicegate.eval.local import Harness

DEVICES = 16


def run(options: Options) -> dict[str, Any]:
    """Decisions per second both ways, the speed-up, batch sizes and peak memory."""
    return asyncio.run(_run(options))


async def _run(options: Options) -> dict[str, Any]:
    audio = one_second_clip()
    rounds = options.pick(3, 1)
    devices = options.pick(DEVICES, 4)
    async with voice_app(options.model, options.device, options.window) as (harness, pipeline):
        counter: Any = pipeline.transcriber
        baseline = rss_mib()
        await _round(harness, audio, options.pick(devices, 2), "warm", concurrent=True)
        counter.batches.clear()
        together, alone, released = [], [], 0
        with RssSampler(rss_mib) as memory:
            for r in range(rounds):
                seconds, ok = await _round(harness, audio, devices, f"c{r}", concurrent=True)
                together.append(devices / seconds)
                released += ok
        batches = collections.Counter(counter.batches)
        for r in range(rounds):
            seconds, ok = await _round(harness, audio, devices, f"s{r}", concurrent=False)
            alone.append(devices / seconds)
            released += ok
    concurrent_rate = median(together)
    sequential_rate = median(alone)
    return {
        "model": options.model,
        "window": counter.inner.window,
        "device": options.device,
        "devices": devices,
        "rounds": rounds,
        "max_batch": pipeline.max_batch,
        "concurrent_per_s": concurrent_rate,
        "sequential_per_s": sequential_rate,
        "speedup": round(concurrent_rate / sequential_rate, 3),
        "batch_sizes": {str(k): v for k, v in sorted(batches.items())},
        "rss_before_mib": baseline,
        "peak_rss_mib": memory.peak,
        "released": released,
        "uploads": 2 * rounds * devices,
    }


async def _round(
    harness: Harness, audio: bytes, devices: int, tag: str, *, concurrent: bool
) -> tuple[float, int]:
    """Wall seconds for ``devices`` uploads, and how many released their write."""
    ready = [await ready_answer(harness, f"p2-{tag}-{i}") for i in range(devices)]
    start = time.perf_counter()
    if concurrent:
        answers = await asyncio.gather(*(upload(harness, d, p, audio) for d, p in ready))
    else:
        answers = [await upload(harness, d, p, audio) for d, p in ready]
    elapsed = time.perf_counter() - start
    return elapsed, sum(bool(body.get("released")) for _, body in answers)


def lines(figures: dict[str, Any]) -> list[str]:
    """The human summary."""
    return [
        f"{figures['devices']} devices, model {figures['model']} on {figures['device']}, "
        f"{figures['rounds']} rounds each way",
        f"at once {figures['concurrent_per_s']:.2f} decisions/s, one at a time "
        f"{figures['sequential_per_s']:.2f}/s: speed-up x{figures['speedup']} (goal >= 1.5)",
        f"encoder batches (size: count) {figures['batch_sizes']}, max_batch "
        f"{figures['max_batch']}; released {figures['released']}/{figures['uploads']}",
        f"memory {figures['rss_before_mib']:.0f} MiB before, peak {figures['peak_rss_mib']:.0f} "
        "MiB during the concurrent rounds",
    ]
