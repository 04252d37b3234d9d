"""P1 voice decision: a signed 1 s upload decided through the device API vs bare faster-whisper.

Both sides run in this process on the same model and device. The voice side is the whole
request: signature check, decode, replay check, encoder, decoding, closed-vocabulary scoring,
grammar, the gate's checks, the store and the write to the in-process notes upstream. The
bare side is ``faster_whisper.WhisperModel.transcribe`` on the same WAV bytes, with its
defaults (beam search of 5, timestamps) and also greedy without timestamps, the decoding the
pipeline uses. Repetitions alternate between the sides, so both see the same machine load.
"""

from __future__ import annotations

import asyncio
import io
import time
from typing import Any

from voicegate_lab.bench.measure import Options, median, ms
from voicegate_lab.bench.voice_app import one_second_clip, ready_answer, upload, voice_app

STEPS = (
    "decode",
    "fingerprint",
    "encoder",
    "decoding",
    "closed_vocabulary",
    "answer_model",
    "grammar",
)


def run(options: Options) -> dict[str, Any]:
    """Decision time, bare time, their ratio and the per-step times (medians)."""
    return asyncio.run(_run(options))


async def _run(options: Options) -> dict[str, Any]:
    from faster_whisper import WhisperModel

    from voicegate.voice import models

    audio = one_second_clip()
    repetitions = options.pick(10, 1)
    warmup = options.pick(2, 1)
    async with voice_app(options.model, options.device) as (harness, pipeline):
        inner: Any = pipeline.transcriber
        real = inner.inner
        bare = WhisperModel(
            str(models.ensure(options.model)),
            device=real.device,
            compute_type=real.compute_type,
        )

        def transcribe(**kwargs: Any) -> str:
            segments, _ = bare.transcribe(io.BytesIO(audio), language="en", **kwargs)
            return " ".join(s.text.strip() for s in segments)

        store_total = harness.services.store.total
        decision_s, bare_s, greedy_s, store_s, answers = [], [], [], [], []
        for i in range(warmup + repetitions):
            device, pending = await ready_answer(harness, f"p1-user-{i}")
            before = store_total[0]
            elapsed, body = await upload(harness, device, pending, audio)
            spent_in_store = store_total[0] - before
            start = time.perf_counter()
            heard_bare = await asyncio.to_thread(transcribe)
            bare_elapsed = time.perf_counter() - start
            start = time.perf_counter()
            await asyncio.to_thread(transcribe, beam_size=1, without_timestamps=True)
            greedy_elapsed = time.perf_counter() - start
            if i < warmup:
                continue
            decision_s.append(elapsed)
            bare_s.append(bare_elapsed)
            greedy_s.append(greedy_elapsed)
            store_s.append(spent_in_store)
            answers.append(body)
        results = pipeline.results[warmup:]
    steps = {step: median([r.timings_ms.get(step, 0.0) for r in results]) for step in STEPS}
    steps["store"] = median([ms(s) for s in store_s])
    # What the steps leave of each request (HTTP, signature, the gate's checks), per request:
    # medians of the parts need not add up to the median of the whole.
    steps["http_signature_gate"] = median(
        [
            ms(total - spent) - sum(r.timings_ms.get(step, 0.0) for step in STEPS)
            for total, spent, r in zip(decision_s, store_s, results, strict=True)
        ]
    )
    decision_ms = median([ms(s) for s in decision_s])
    bare_ms = median([ms(s) for s in bare_s])
    greedy_ms = median([ms(s) for s in greedy_s])
    return {
        "model": options.model,
        "device": real.device,
        "compute_type": real.compute_type,
        "clip_s": 1.0,
        "repetitions": repetitions,
        "warmup": warmup,
        "decision_ms": decision_ms,
        "bare_ms": bare_ms,
        "bare_greedy_ms": greedy_ms,
        "ratio": round(decision_ms / bare_ms, 3),
        "ratio_vs_greedy": round(decision_ms / greedy_ms, 3),
        "steps_ms": steps,
        "released": sum(bool(a.get("released")) for a in answers),
        "heard": sorted({" ".join(a.get("heard", [])) for a in answers}),
        "heard_bare": heard_bare,
    }


def lines(figures: dict[str, Any]) -> list[str]:
    """The human summary."""
    steps = figures["steps_ms"]
    return [
        f"model {figures['model']} on {figures['device']} ({figures['compute_type']}), "
        f"1 s clip, {figures['repetitions']} repetitions after {figures['warmup']} warm-up",
        f"voice decision {figures['decision_ms']:.0f} ms; bare transcribe {figures['bare_ms']:.0f}"
        f" ms (defaults), {figures['bare_greedy_ms']:.0f} ms (greedy, no timestamps)",
        f"ratio {figures['ratio']} vs defaults, {figures['ratio_vs_greedy']} vs greedy "
        f"(goal <= 1.2); released {figures['released']}/{figures['repetitions']}, heard "
        f"{figures['heard']}",
        "steps " + ", ".join(f"{k} {v:.1f}" for k, v in steps.items()) + " (ms, medians)",
    ]
