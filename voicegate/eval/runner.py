"""``voicegate eval``: every manifest case end to end through the real app and a real upstream.

For each case the runner opens a pending set of ``cards`` distinct ``write_note`` actions for
the case's user (high risk and advanced to the final card by a signed tap when the case is at
``stage: final``), uploads the clip as a signed voice answer from that user's paired device,
and then asks the upstream itself which note, if any, was written. The app runs in this process
over an ASGI transport, with a memory store and the demo notes server as the upstream.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import shlex
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from cryptography.hazmat.primitives.asymmetric import ec

from voicegate.device import signing
from voicegate.eval import report
from voicegate.eval.manifest import Case, ManifestError, load
from voicegate.gate.types import DeviceKind, Risk, Stage
from voicegate.reasons import Kind, Reason

if TYPE_CHECKING:
    from fastapi import FastAPI

    from voicegate.store.base import Store
    from voicegate.voice.pipeline import VoicePipeline

CONTENT_TYPES = {
    ".ogg": "audio/ogg",
    ".opus": "audio/ogg",
    ".webm": "audio/webm",
    ".flac": "audio/flac",
    ".wav": "audio/wav",
}
WRITE_TOOL = "write_note"
READ_TOOL = "list_notes"


def note_name(case: Case, card: int) -> str:
    """The note card ``card`` of ``case`` writes: unique across the run."""
    return f"{case.id}#{card}"


@dataclass(slots=True)
class PairedDevice:
    """A voice device the runner paired for one user; its private key never leaves here."""

    id: str
    user: str
    key: ec.EllipticCurvePrivateKey


class Harness:
    """The real app in this process: memory store, notes upstream, one device per user."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient) -> None:
        self.app = app
        self.client = client
        self.devices: dict[str, PairedDevice] = {}
        assembly = app.state.voicegate
        self.services = assembly.services
        self.pool = assembly.pool

    async def signed(
        self,
        device: PairedDevice,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One request signed by ``device`` over method, path, timestamp and body."""
        sig = signing.sign(device.key, device.id, method, path, body, time.time())
        return await self.client.request(
            method, path, content=body, headers={**(headers or {}), **sig}
        )

    async def device(self, user: str) -> PairedDevice:
        """The paired voice device of ``user``, pairing it the first time.

        Each user pairs from its own loopback address, as separate phones would, so the
        per-address guessing budget is not what limits a run; past the global budget
        (30 pairings in 10 minutes) the device is registered in the store directly, as an
        operator could.
        """
        if user in self.devices:
            return self.devices[user]
        from voicegate.device.pairing import start_pairing
        from voicegate.gate.types import Device

        store = self.services.store
        code = await start_pairing(store, user, DeviceKind.VOICE)
        key = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(signing.normalise_public_key(_spki(key)))
        n = len(self.devices) + 2
        transport = httpx.ASGITransport(app=self.app, client=(f"127.0.{n // 250}.{n % 250}", 5))
        async with httpx.AsyncClient(transport=transport, base_url=self.client.base_url) as phone:
            answer = await phone.post(
                "/device/pair", json={"code": code, "public_key": jwk, "name": f"eval {user}"}
            )
        if answer.status_code == 429:
            device_id = f"dev_eval_{len(self.devices)}"
            await store.devices.add(
                Device(
                    device_id,
                    user,
                    DeviceKind.VOICE,
                    json.dumps(jwk),
                    signing.ALGORITHM,
                    time.time(),
                    name=f"eval {user}",
                )
            )
        else:
            answer.raise_for_status()
            device_id = answer.json()["device_id"]
        paired = PairedDevice(device_id, user, key)
        self.devices[user] = paired
        return paired

    async def nonce(self, device: PairedDevice, pending_id: str) -> str:
        """The set's current nonce, as the device sees it in its pending list."""
        answer = await self.signed(device, "GET", "/device/pending")
        answer.raise_for_status()
        for s in answer.json()["sets"]:
            if s["id"] == pending_id:
                return str(s["nonce"])
        raise RuntimeError(f"pending set {pending_id} is not listed for {device.user}")

    async def open_set(self, case: Case) -> str:
        """Propose ``cards`` distinct writes through the gate; at ``final``, tap the last card."""
        from voicegate.gate.core import ActionRequest

        actions = [
            ActionRequest(WRITE_TOOL, {"name": note_name(case, k), "text": f"card {k}"})
            for k in range(1, case.cards + 1)
        ]
        risk = Risk.HIGH if case.stage is Stage.FINAL else Risk.LOW
        pending = await self.services.gate.propose(case.user, actions, risk=risk)
        return str(pending.id)

    async def advance(self, device: PairedDevice, case: Case, pending_id: str) -> None:
        """The tap that moves a high-risk set to its final card."""
        body = {
            "pending_id": pending_id,
            "nonce": await self.nonce(device, pending_id),
            "decision": "choose",
            "card": report.final_card(case.cards),
            "input": "touch",
        }
        answer = await self.signed(
            device,
            "POST",
            "/device/tap",
            body=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        if answer.json().get("stage") != Stage.FINAL.value:
            raise RuntimeError(f"the tap did not reach the final card: {answer.text}")

    async def written(self, case: Case) -> int | None:
        """Which of the case's cards the upstream wrote (asked of the upstream, not the gate)."""
        result = await self.pool.call_tool(READ_TOOL, {})
        notes = _notes(result.structured_content, result.content)
        done = [k for k in range(1, case.cards + 1) if note_name(case, k) in notes]
        if len(done) > 1:
            raise RuntimeError(f"{case.id}: several writes ran: {done}")
        return done[0] if done else None

    async def settle(self, pending_id: str, user: str) -> None:
        """Cancel what the answer left waiting, so each case starts alone."""
        from voicegate.gate.types import Status

        if (await self.services.gate.status(pending_id)).status is Status.WAITING:
            await self.services.gate.cancel(pending_id, user=user)


def _spki(key: ec.EllipticCurvePrivateKey) -> str:
    from cryptography.hazmat.primitives import serialization

    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem.decode("ascii")


def _notes(structured: Any, content: Sequence[Any]) -> set[str]:
    data = structured
    if not isinstance(data, dict):
        texts = [getattr(c, "text", "") for c in content]
        data = json.loads(texts[0]) if texts and texts[0] else {}
    if "notes" not in data and isinstance(data.get("result"), dict):
        data = data["result"]
    return set(data.get("notes", {}))


def parse_answer(status: int, body: Any) -> tuple[str, int | None, str | None, tuple[str, ...]]:
    """(decision, card, reason, heard) from a /device/voice answer, whatever its status."""
    if not isinstance(body, dict):
        return Kind.REFUSE.value, None, Reason.BAD_REQUEST.value, ()
    decision = str(body.get("decision") or Kind.REFUSE.value)
    if decision not in report.KINDS or (status >= 400 and "decision" not in body):
        decision = Kind.REFUSE.value
    card = body.get("card") if decision == Kind.CHOOSE.value else None
    heard = tuple(str(h) for h in body.get("heard", ()) or ())
    return decision, card, body.get("reason"), heard


async def run_case(
    harness: Harness, case: Case, *, timer: Callable[[], float] = time.perf_counter
) -> report.Result:
    """One case end to end; the latency is the voice upload's round trip."""
    device = await harness.device(case.user)
    pending_id = await harness.open_set(case)
    if case.stage is Stage.FINAL:
        await harness.advance(device, case, pending_id)
    nonce = await harness.nonce(device, pending_id)
    audio = case.path.read_bytes()
    headers = {
        "content-type": CONTENT_TYPES.get(case.path.suffix.lower(), "application/octet-stream"),
        "X-Voicegate-Pending": pending_id,
        "X-Voicegate-Nonce": nonce,
    }
    start = timer()
    answer = await harness.signed(device, "POST", "/device/voice", body=audio, headers=headers)
    latency_ms = (timer() - start) * 1000.0
    try:
        body = answer.json()
    except ValueError:
        body = None
    decision, card, reason, heard = parse_answer(answer.status_code, body)
    write = await harness.written(case)
    await harness.settle(pending_id, case.user)
    return report.Result(
        id=case.id,
        label=case.label,
        lang=case.lang,
        expect=case.expect_text,
        decision=decision,
        card=card,
        reason=reason,
        write=write,
        expected_write=report.expected_write(case),
        latency_ms=latency_ms,
        heard=heard,
        single_card=case.cards == 1 and case.stage is Stage.CHOOSE,
    )


VoiceFactory = Callable[["Store"], Any]


@contextlib.asynccontextmanager
async def in_process(make_voice: VoiceFactory) -> AsyncIterator[Harness]:
    """The real app around a memory store and the notes upstream, lifespan and all.

    ``make_voice(store)`` builds the voice pipeline over the app's own store, so the replay
    guard remembers every upload of the run.
    """
    from voicegate.mcp.notes import build_notes_server
    from voicegate.mcp.policy import Policy
    from voicegate.mcp.upstream import UpstreamSpec
    from voicegate.settings import ServerConfig
    from voicegate.store import open_store
    from voicegate.web.app import build_app

    store = await open_store("memory")
    config = ServerConfig()
    app = build_app(
        config,
        upstream=UpstreamSpec.in_process(build_notes_server()),
        policy=Policy(writes=(WRITE_TOOL,)),
        store=store,
        voice=make_voice(store),
    )
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
            async with httpx.AsyncClient(transport=transport, base_url=config.base_url) as client:
                yield Harness(app, client)
    finally:
        await store.close()


def whisper_voice(model: str, langs: Sequence[str], device: str = "auto") -> VoiceFactory:
    """The server's own pipeline: faster-whisper from disk and the replay guard on the store."""

    def make(store: Store) -> VoicePipeline:
        from voicegate.voice.pipeline import default_pipeline

        return default_pipeline(store.fingerprints, model=model, languages=langs, device=device)

    return make


async def evaluate(
    cases: Sequence[Case], harness: Harness, *, progress: bool = True
) -> list[report.Result]:
    """Run ``cases`` in order (a replay must follow its original) and collect the results."""
    from tqdm import tqdm

    results: list[report.Result] = []
    bar = tqdm(cases, desc="eval", unit="case", disable=not progress, file=sys.stderr)
    false_releases = 0
    for case in bar:
        result = await run_case(harness, case)
        results.append(result)
        if result.false_release:
            false_releases += 1
            # Said at once, so a long run shows its worst news before it ends.
            bar.write(
                f"FALSE RELEASE {case.id}: expected {case.expect_text}, decided "
                f"{result.actual}, wrote card {result.write}, heard {list(result.heard)}",
                file=sys.stderr,
            )
        bar.set_postfix(false_releases=false_releases, refresh=False)
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``voicegate eval``."""
    parser.add_argument("--manifest", type=Path, help="JSON Lines manifest")
    parser.add_argument(
        "--agent", action="store_true", help="run the scripted worst-case agent suite instead"
    )
    parser.add_argument("--json", type=Path, help="write the JSON summary here")
    parser.add_argument("--report", type=Path, help="write report.md and PNG plots here")
    parser.add_argument("--url", help="a running server instead of the in-process app")
    parser.add_argument("--limit", type=int, help="run only the first N cases")
    parser.add_argument("--model", default="base", help="recogniser model (default: base)")
    parser.add_argument(
        "--lang",
        action="append",
        dest="langs",
        choices=["en", "hi"],
        help="recogniser languages (default: en and hi)",
    )
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def write_outputs(results: Sequence[report.Result], args: argparse.Namespace) -> dict[str, Any]:
    """The JSON summary and the Markdown report, where asked for."""
    doc = report.summary(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", "utf-8")
    if args.report:
        plots = report.write_plots(results, args.report)
        command = "voicegate eval " + shlex.join(sys.argv[2:]) if len(sys.argv) > 2 else ""
        text = report.markdown(results, command=command, plots=plots)
        (args.report / "report.md").write_text(text, encoding="utf-8")
    return doc


def run(args: argparse.Namespace) -> int:
    """Run the manifest; exit 1 on any false release, 2 on a bad manifest."""
    if args.agent:
        from voicegate.eval import agent

        return agent.run(args)
    if args.manifest is None:
        print("voicegate eval: --manifest or --agent is required", file=sys.stderr)
        return 2
    try:
        cases = load(args.manifest)
    except ManifestError as exc:
        print(f"{args.manifest}: {exc}", file=sys.stderr)
        return 2
    if args.limit is not None:
        cases = cases[: args.limit]
    # One line per refused answer would bury the progress bar.
    logging.getLogger("voicegate").setLevel(logging.WARNING)
    if args.url:
        print("--url: running against a remote server is not supported yet", file=sys.stderr)
        return 2

    async def go() -> list[report.Result]:
        voice = whisper_voice(args.model, tuple(args.langs or ("en", "hi")), args.device)
        async with in_process(voice) as harness:
            return await evaluate(cases, harness, progress=not args.no_progress)

    results = asyncio.run(go())
    doc = write_outputs(results, args)
    lat = doc["latency_ms"]
    print(
        f"{doc['cases']} cases, {doc['correct']} correct, {doc['false_releases']} false "
        f"releases, latency p50 {lat['p50']} ms p95 {lat['p95']} ms"
    )
    return 1 if doc["false_releases"] else 0
