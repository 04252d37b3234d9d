"""P2 concurrency: 16 devices uploading at once vs the same 16 uploads one at a time.

Each of 16 users has a paired device and a two-card set waiting; in a round, all 16 signed
uploads of the 1 s clip go out together (or one after another), each answered through the
device API with the real recogniser. Decisions per second is 16 over the round's wall time;
the speed-up is concurrent over sequential. The pipeline queues answers that arrive while the
model is busy and encodes them as one batch (``max_batch``); the batch sizes it actually ran
are reported. Resident memory is sampled every 10 ms during the concurrent rounds.

The process's CPU time is counted each way too (every thread: the model's, the event loop's and
the workers'): CPU milliseconds per decision says whether batching saved work, and the share of
the machine's cores kept busy says how much room concurrency had. Over whole runs the speed-up
is the product of the two ratios (the reported one is of per-round medians, so it differs a
little), so a sequential run that already keeps every core busy leaves concurrency only the
work batching saves.
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
from typing import Any

from voicegate_lab.bench.measure import Options, median, rss_mib
from voicegate_lab.bench.voice_app import (
    RssSampler,
    one_second_clip,
    ready_answer,
    upload,
    voice_app,
)
from voicegate_lab.eval.local import Harness

DEVICES = 16


def run(options: Options) -> dict[str, Any]:
    """Decisions per second both ways, the speed-up, batch sizes and peak memory."""
    return asyncio.run(_run(options))


async def _run(options: Options) -> dict[str, Any]:
    audio = one_second_clip()
    rounds = options.pick(3, 1)
    devices = options.pick(DEVICES, 4)
    async with voice_app(options.model, options.device) as (harness, pipeline):
        counter: Any = pipeline.transcriber
        baseline = rss_mib()
        await _round(harness, audio, options.pick(devices, 2), "warm", concurrent=True)
        counter.batches.clear()
        together, alone, released = [], [], 0
        cpu = {"concurrent": [0.0, 0.0], "sequential": [0.0, 0.0]}  # CPU s, wall s
        with RssSampler(rss_mib) as memory:
            for r in range(rounds):
                seconds, used, ok = await _round(harness, audio, devices, f"c{r}", concurrent=True)
                together.append(devices / seconds)
                cpu["concurrent"][0] += used
                cpu["concurrent"][1] += seconds
                released += ok
        batches = collections.Counter(counter.batches)
        for r in range(rounds):
            seconds, used, ok = await _round(harness, audio, devices, f"s{r}", concurrent=False)
            alone.append(devices / seconds)
            cpu["sequential"][0] += used
            cpu["sequential"][1] += seconds
            released += ok
    concurrent_rate = median(together)
    sequential_rate = median(alone)
    cores = os.cpu_count() or 1
    return {
        "model": options.model,
        "device": options.device,
        "devices": devices,
        "rounds": rounds,
        "max_batch": pipeline.max_batch,
        "concurrent_per_s": concurrent_rate,
        "sequential_per_s": sequential_rate,
        "speedup": round(concurrent_rate / sequential_rate, 3),
        "cores": cores,
        **{
            f"{way}_cpu_ms_per_decision": round(1000 * used / (rounds * devices), 1)
            for way, (used, _) in cpu.items()
        },
        **{f"{way}_cores_busy": round(used / wall / cores, 3) for way, (used, wall) in cpu.items()},
        "batch_sizes": {str(k): v for k, v in sorted(batches.items())},
        "rss_before_mib": baseline,
        "peak_rss_mib": memory.peak,
        "released": released,
        "uploads": 2 * rounds * devices,
    }


async def _round(
    harness: Harness, audio: bytes, devices: int, tag: str, *, concurrent: bool
) -> tuple[float, float, int]:
    """Wall seconds and process CPU seconds for ``devices`` uploads, and how many released."""
    ready = [await ready_answer(harness, f"p2-{tag}-{i}") for i in range(devices)]
    start, start_cpu = time.perf_counter(), time.process_time()
    if concurrent:
        answers = await asyncio.gather(*(upload(harness, d, p, audio) for d, p in ready))
    else:
        answers = [await upload(harness, d, p, audio) for d, p in ready]
    elapsed, used = time.perf_counter() - start, time.process_time() - start_cpu
    return elapsed, used, sum(bool(body.get("released")) for _, body in answers)


def lines(figures: dict[str, Any]) -> list[str]:
    """The human summary."""
    return [
        f"{figures['devices']} devices, model {figures['model']} on {figures['device']}, "
        f"{figures['rounds']} rounds each way",
        f"at once {figures['concurrent_per_s']:.2f} decisions/s, one at a time "
        f"{figures['sequential_per_s']:.2f}/s: speed-up x{figures['speedup']} (goal >= 1.5)",
        f"encoder batches (size: count) {figures['batch_sizes']}, max_batch "
        f"{figures['max_batch']}; released {figures['released']}/{figures['uploads']}",
        f"CPU per decision {figures['concurrent_cpu_ms_per_decision']:.0f} ms at once, "
        f"{figures['sequential_cpu_ms_per_decision']:.0f} ms one at a time; cores busy "
        f"{figures['concurrent_cores_busy']:.0%} at once, {figures['sequential_cores_busy']:.0%} "
        f"one at a time (of {figures['cores']})",
        f"memory {figures['rss_before_mib']:.0f} MiB before, peak {figures['peak_rss_mib']:.0f} "
        "MiB during the concurrent rounds",
    ]
