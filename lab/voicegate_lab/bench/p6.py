"""P6 personal answers: the time 30 enrolled templates add to one voice decision.

One user on a real SQLite store has taught 30 templates: takes 0-5 of "one".."five" by FSDD's
jackson, as tiny.en's encoder frames. Each check is the pipeline's ``templates`` step
(``VoicePipeline._taught``): read the user's templates and flag from the store, then DTW of the
answer's frames (which come with its hearing, from the decision's own encoder pass) against
every template. The first check also computes the radii (``cold_ms``); the median of the
following ones, over other takes of jackson, is the figure.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from voicegate.store import open_store
from voicegate.voice import audio, templates
from voicegate.voice.enrolment import StoreEnrolments, stored
from voicegate_lab.bench.measure import Options, median, ms
from voicegate_lab.bench.p4 import CORPUS

MODEL = "tiny.en"
TEMPLATES = 30
CARDS = 5


def run(options: Options) -> dict[str, Any]:
    """Cold and warm time of the templates step with ``TEMPLATES`` enrolled."""
    if not any(CORPUS.glob("*_jackson_*.wav")):
        return {"error": f"no FSDD clips of jackson in {CORPUS}"}
    return asyncio.run(_run(options.pick(50, 10)))


async def _run(checks: int) -> dict[str, Any]:
    from voicegate.voice.whisper import FasterWhisperTranscriber

    per = TEMPLATES // CARDS
    recogniser = FasterWhisperTranscriber(MODEL)
    samples = {
        (d, k): recogniser.frames(
            audio.decode((CORPUS / f"{d}_jackson_{k}.wav").read_bytes()).samples
        )
        for d in range(1, CARDS + 1)
        for k in range(per + checks // CARDS + 1)
    }
    queries = [s for (d, k), s in samples.items() if k >= per][:checks]
    figures: dict[str, Any] = {"templates": TEMPLATES, "checks": len(queries), "store": "sqlite"}
    with tempfile.TemporaryDirectory(prefix="voicegate-p6-") as folder:
        store = await open_store(str(Path(folder) / "gate.db"))
        try:
            for (d, k), s in samples.items():
                if k < per:
                    row = stored("u", f"choose:{d}", "", s, kind=MODEL, now=k, device="b")
                    await store.templates.add(row)
            source = StoreEnrolments(store.templates, MODEL)
            times = []
            for query in [queries[0], *queries]:
                start = time.perf_counter()
                enrolment = await source.enrolment("u")
                if enrolment is None:
                    return {"error": "the templates did not reach the store"}
                await asyncio.to_thread(
                    templates.match,
                    query,
                    enrolment.templates,
                    dict(enrolment.radii),
                )
                times.append(ms(time.perf_counter() - start))
        finally:
            await store.close()
    figures["cold_ms"] = times[0]
    figures["ms"] = median(times[1:])
    return figures


def lines(figures: dict[str, Any]) -> list[str]:
    """The human summary."""
    if "error" in figures:
        return [figures["error"]]
    return [
        f"{figures['templates']} templates: {figures['ms']:.1f} ms added per decision "
        f"(median of {figures['checks']}); first, with the radii: {figures['cold_ms']:.0f} ms"
    ]
