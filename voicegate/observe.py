"""What the gate tells its operator: Prometheus metrics and confirm events as JSON log lines.

One ``Events`` per app holds its own ``CollectorRegistry`` (never the global one, so two apps in
one process, as in the tests, count apart). The edges call it: the device routes with every
answer and refusal, the MCP server with every proposal, token and refusal.

Confirm events (``issued``, ``accepted``, ``refused``, ``replay_detected``) go to the
``voicegate.events`` logger at INFO, every one of them: nothing is sampled, and the logger's own
level is pinned so a quieter root logger cannot drop them. An event carries only the fields named
in ``FIELDS``, values the agent may see anyway (ids, reason codes, kinds); a token, a nonce, a
signature or a key is never one of them, whatever a caller passes.

Every metric label takes its values from a closed set (``Reason``, ``Kind``, the edge names), so
no request can grow the number of series.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from voicegate.reasons import Kind, Reason

__all__ = [
    "CONTENT_TYPE",
    "EVENTS_LOGGER",
    "FIELDS",
    "REPLAYS",
    "TOKEN_REASONS",
    "Events",
    "JsonFormatter",
    "configure_logging",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
EVENTS_LOGGER = "voicegate.events"

# Reasons that mean "this was already used": a replayed request, recording, answer or approval.
REPLAYS = frozenset(
    {Reason.REQUEST_REPLAYED, Reason.AUDIO_REUSED, Reason.EVIDENCE_REUSED, Reason.ALREADY_USED}
)
# Refusals only a confirmation token earns: at the MCP edge, each is a token-mode answer refused.
TOKEN_REASONS = frozenset(
    {
        Reason.MISSING,
        Reason.MALFORMED,
        Reason.BAD_SIGNATURE,
        Reason.EXPIRED,
        Reason.WRONG_USER,
        Reason.WRONG_TOOL,
        Reason.PLAN_CHANGED,
        Reason.ALREADY_USED,
    }
)
# The only fields an event may carry. Nothing here is a secret: the agent sees pending ids and
# receipt ids, and reason codes are public. Nonces, tokens, signatures and keys are left out.
FIELDS = frozenset(
    {
        "edge",
        "route",
        "reason",
        "kind",
        "card",
        "released",
        "outcome",
        "pending_id",
        "receipt_id",
        "device_id",
        "user",
        "modality",
        "stage",
        "status",
        "risk",
        "mode",
        "tool",
        "cards",
    }
)
EDGES = ("device", "gate", "mcp")

Executor = Callable[[str, Mapping[str, Any]], Awaitable[Any]]

# Seconds: a voice answer takes from tens of milliseconds (a refusal) to seconds (a cold model).
_TRANSCRIPTION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
_UPSTREAM_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Events:
    """The metrics of one app and its confirm-event log."""

    def __init__(
        self,
        *,
        timer: Callable[[], float] = time.perf_counter,
        logger: logging.Logger | None = None,
    ) -> None:
        self.timer = timer
        self.logger = logger or logging.getLogger(EVENTS_LOGGER)
        # Pinned, so that a root logger at WARNING never drops a confirm event.
        if self.logger.level == logging.NOTSET or self.logger.level > logging.INFO:
            self.logger.setLevel(logging.INFO)
        self.registry = CollectorRegistry()
        r = self.registry
        self.decisions = Counter(
            "voicegate_decisions",
            "Answers that reached the gate, by the decision taken and its refusal reason",
            ["kind", "reason"],
            registry=r,
        )
        self.refusals = Counter(
            "voicegate_refusals",
            "Refusals, by where they happened and why",
            ["edge", "reason"],
            registry=r,
        )
        self.replays = Counter(
            "voicegate_replays_detected",
            "Requests, recordings, answers or approvals presented a second time",
            ["reason"],
            registry=r,
        )
        self.confirm_events = Counter(
            "voicegate_confirm_events", "Confirm events written to the log", ["event"], registry=r
        )
        self.released = Counter(
            "voicegate_confirms_released",
            "Writes released after a confirm, by what the upstream did",
            ["edge", "outcome"],
            registry=r,
        )
        self.transcription = Histogram(
            "voicegate_transcription_seconds",
            "Time to decide one voice answer: decode, replay check, recogniser and grammar",
            buckets=_TRANSCRIPTION_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "voicegate_transcription_queue_depth",
            "Signed voice answers admitted and not yet answered (waiting or being heard)",
            registry=r,
        )
        self.upstream = Histogram(
            "voicegate_upstream_seconds",
            "Time the upstream took to run one released write",
            ["outcome"],
            buckets=_UPSTREAM_BUCKETS,
            registry=r,
        )

    # -- confirm events ----------------------------------------------------------------------

    def issued(self, **fields: Any) -> None:
        """A pending set was opened or a confirmation token minted."""
        self._emit("issued", fields)

    def accepted(self, **fields: Any) -> None:
        """An answer or approval passed every check (released, advanced, cancelled, extended).

        A redeemed confirmation token is also counted as a ``confirm`` decision: the device
        routes count their own answers, token mode has no route of its own.
        """
        if fields.get("released"):
            self.released.labels(
                str(fields.get("edge", "gate")), str(fields.get("outcome", "executed"))
            ).inc()
            if fields.get("mode") == "token":
                self.decided(Kind.CONFIRM.value, None)
        self._emit("accepted", fields)

    def refused(self, reason: Reason, **fields: Any) -> None:
        """Something was refused with ``reason``; a reuse is also logged as ``replay_detected``."""
        edge = str(fields.get("edge", "gate"))
        self.refusals.labels(edge if edge in EDGES else "gate", reason.value).inc()
        if edge == "mcp" and reason in TOKEN_REASONS:
            self.decided(Kind.REFUSE.value, reason)
        self._emit("refused", {**fields, "reason": reason.value})
        if reason in REPLAYS:
            self.replays.labels(reason.value).inc()
            self._emit("replay_detected", {**fields, "reason": reason.value})

    def decided(self, kind: str, reason: Reason | None) -> None:
        """Count one decision of the gate on an answer."""
        self.decisions.labels(kind, reason.value if reason else "").inc()

    def _emit(self, event: str, fields: Mapping[str, Any]) -> None:
        safe = {k: _plain(v) for k, v in fields.items() if k in FIELDS}
        self.confirm_events.labels(event).inc()
        self.logger.info("confirm %s", event, extra={"event": event, "fields": safe})

    # -- timings -----------------------------------------------------------------------------

    @contextmanager
    def transcribing(self) -> Iterator[None]:
        """Time one voice decision into the transcription histogram."""
        start = self.timer()
        try:
            yield
        finally:
            self.transcription.observe(max(0.0, self.timer() - start))

    def watch_hearing(
        self, workers: Callable[[], float], waiting: Callable[[], float]
    ) -> Callable[[float], None]:
        """Report hearing on workers (``serve --hearing``): the workers a gate hears from and
        the utterances waiting for one, read at each scrape; the returned callable times one
        utterance's round trip to a worker and back."""
        r = self.registry
        Gauge(
            "voicegate_hearing_workers",
            "Recogniser workers that said they are alive in the last three beats (6 s)",
            registry=r,
        ).set_function(workers)
        Gauge(
            "voicegate_hearing_queue_depth",
            "Utterances waiting in the work stream for a worker",
            registry=r,
        ).set_function(waiting)
        trip = Histogram(
            "voicegate_hearing_seconds",
            "Time from publishing one utterance to its hearing coming back",
            buckets=_TRANSCRIPTION_BUCKETS,
            registry=r,
        )
        return trip.observe

    def timed(self, executor: Executor) -> Executor:
        """``executor`` with each call's duration in the upstream histogram."""

        async def run(tool: str, arguments: Mapping[str, Any]) -> Any:
            start = self.timer()
            outcome = "failed"
            try:
                result = await executor(tool, arguments)
                outcome = "executed"
                return result
            finally:
                self.upstream.labels(outcome).observe(max(0.0, self.timer() - start))

        return run

    def render(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


def _plain(value: Any) -> str | int | float | bool | None:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    # Ids and codes are short; a long value is someone else's text and is cut.
    return str(value)[:200]


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and an event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        event = getattr(record, "event", None)
        if isinstance(event, str):
            line["event"] = event
            fields = getattr(record, "fields", None)
            if isinstance(fields, Mapping):
                line.update({k: v for k, v in fields.items() if k not in line})
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(
    level: int = logging.INFO, stream: IO[str] | None = None, *, echo: IO[str] | None = None
) -> None:
    """Send voicegate's log records from ``level`` up to ``stream`` (stderr) as JSON lines, once
    per process; with ``echo``, warnings and errors go there as well (the demo's terminal, while
    its every event goes to a file)."""
    root = logging.getLogger("voicegate")
    if any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        return
    # These echo whole response streams at DEBUG, confirmation tokens included; keep them out
    # even when someone turns the root logger up.
    for chatty in ("sse_starlette", "httpcore", "httpx"):
        quiet = logging.getLogger(chatty)
        quiet.setLevel(max(logging.INFO, quiet.getEffectiveLevel()))
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    # On the handler, not only the logger: confirm events pin their own logger at INFO.
    handler.setLevel(level)
    root.addHandler(handler)
    if echo is not None:
        shown = logging.StreamHandler(echo)
        shown.setFormatter(JsonFormatter())
        shown.setLevel(logging.WARNING)
        root.addHandler(shown)
    root.setLevel(min(level, logging.WARNING) if echo is not None else level)
    # Once: a handler that a library puts on the root logger would print every record again.
    root.propagate = False
