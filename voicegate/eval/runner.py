"""``voicegate eval``: every manifest case end to end through the real app and a real upstream.

For each case the runner opens a pending set of ``cards`` distinct ``write_note`` actions for
the case's user (high risk and advanced to the final card by a signed tap when the case is at
``stage: final``), uploads the clip as a signed voice answer from that user's paired device,
and then asks the upstream itself which note, if any, was written. By default the app runs in
this process over an ASGI transport, with a memory store and the demo notes server as the
upstream. With ``--url`` it is a running ``voicegate serve`` in front of the notes server
(``python -m voicegate.mcp.notes``): devices pair and answer over HTTP, the upstream is read
through the server's MCP endpoint, and sets are proposed in the server's store (``--db``),
since over MCP each write call opens a set of one card.
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import shlex
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from cryptography.hazmat.primitives.asymmetric import ec

from voicegate.device import signing
from voicegate.errors import ConfigError, StoreUnavailable
from voicegate.eval import enrol, report
from voicegate.eval.manifest import Case, ManifestError, load
from voicegate.gate.quota import ProposalLimits
from voicegate.gate.types import DeviceKind, Risk, Stage
from voicegate.limits import RateLimits
from voicegate.reasons import Kind, Reason
from voicegate.settings import TOKEN_ENV

if TYPE_CHECKING:
    from fastapi import FastAPI
    from mcp import Client

    from voicegate.gate.core import Gate
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


def note_name(case: Case, card: int, tag: str = "") -> str:
    """The note card ``card`` of ``case`` writes: unique across the run (``tag`` keeps it unique
    across runs against one long-lived upstream)."""
    return f"{tag}{case.id}#{card}"


@dataclass(slots=True)
class PairedDevice:
    """A voice device the runner paired for one user; its private key never leaves here."""

    id: str
    user: str
    key: ec.EllipticCurvePrivateKey


class BaseHarness(abc.ABC):
    """What a case needs of a server: devices, sets, signed uploads and the upstream's notes.

    Sets are proposed through ``gate`` over the server's ``store``; everything a device does goes
    over HTTP through ``client``. Subclasses say how a pairing phone reaches the server and how
    the upstream is read.
    """

    def __init__(
        self, client: httpx.AsyncClient, store: Store, gate: Gate, *, tag: str = ""
    ) -> None:
        self.client = client
        self.store = store
        self.gate = gate
        self.tag = tag
        self.devices: dict[str, PairedDevice] = {}
        # Enrolment lines of the manifest, in order: not cases (``voicegate.eval.enrol``).
        self.taught: list[enrol.Taught] = []

    @abc.abstractmethod
    def phone(self, n: int) -> contextlib.AbstractAsyncContextManager[httpx.AsyncClient]:
        """The HTTP client the ``n``-th user's phone pairs with."""

    @abc.abstractmethod
    async def notes(self) -> set[str]:
        """The names of the notes the upstream holds now."""

    async def signed(
        self,
        device: PairedDevice,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One request signed by ``device`` over method, path, timestamp, body and headers."""
        sig = signing.sign(device.key, device.id, method, path, body, time.time(), headers)
        return await self.client.request(method, path, content=body, headers=sig)

    async def device(self, user: str) -> PairedDevice:
        """The paired voice device of ``user``, pairing it the first time.

        The code is made in the store as ``voicegate pair`` makes it and redeemed over
        ``POST /device/pair``. Past the pairing budgets (5 per address and 30 in all in 10
        minutes) the device is registered in the store directly, as an operator could.
        """
        if user in self.devices:
            return self.devices[user]
        from voicegate.device.pairing import start_pairing
        from voicegate.gate.types import Device

        code = await start_pairing(self.store, user, DeviceKind.VOICE, keys=self.gate.receipt_keys)
        key = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(signing.normalise_public_key(_spki(key)))
        async with self.phone(len(self.devices) + 2) as phone:
            answer = await phone.post(
                "/device/pair", json={"code": code, "public_key": jwk, "name": f"eval {user}"}
            )
        if answer.status_code == 429:
            device_id = f"dev_eval_{secrets.token_hex(6)}"
            await self.store.devices.add(
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
        elif answer.is_success:
            device_id = answer.json()["device_id"]
        else:
            raise ConfigError(
                f"pairing a device for {user} failed ({answer.status_code} {answer.text[:200]}); "
                "the server must use the same store and signing keys as the eval"
            )
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
            ActionRequest(WRITE_TOOL, {"name": note_name(case, k, self.tag), "text": f"card {k}"})
            for k in range(1, case.cards + 1)
        ]
        risk = Risk.HIGH if case.stage is Stage.FINAL else Risk.LOW
        pending = await self.gate.propose(case.user, actions, risk=risk)
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
        notes = await self.notes()
        done = [k for k in range(1, case.cards + 1) if note_name(case, k, self.tag) in notes]
        if len(done) > 1:
            raise RuntimeError(f"{case.id}: several writes ran: {done}")
        return done[0] if done else None

    async def settle(self, pending_id: str, user: str) -> None:
        """Cancel what the answer left waiting, so each case starts alone."""
        from voicegate.gate.types import Status

        if (await self.gate.status(pending_id)).status is Status.WAITING:
            await self.gate.cancel(pending_id, user=user)


class Harness(BaseHarness):
    """The real app in this process: memory store, notes upstream, one device per user."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient) -> None:
        assembly = app.state.voicegate
        super().__init__(client, assembly.services.store, assembly.services.gate)
        self.app = app
        self.services = assembly.services
        self.pool = assembly.pool

    def phone(self, n: int) -> contextlib.AbstractAsyncContextManager[httpx.AsyncClient]:
        """Each user pairs from its own loopback address, as separate phones would, so the
        per-address guessing budget is not what limits a run."""
        transport = httpx.ASGITransport(app=self.app, client=(f"127.0.{n // 250}.{n % 250}", 5))
        return httpx.AsyncClient(transport=transport, base_url=self.client.base_url)

    async def notes(self) -> set[str]:
        """The notes of the in-process upstream, read through the app's upstream session."""
        result = await self.pool.call_tool(READ_TOOL, {})
        return _notes(result.structured_content, result.content)


class RemoteHarness(BaseHarness):
    """A running ``voicegate serve``: its store shared, its device API and MCP endpoint over
    HTTP. The upstream is read through the server's read pass-through as an agent reads it."""

    def __init__(
        self, client: httpx.AsyncClient, store: Store, gate: Gate, agent: Client, *, tag: str
    ) -> None:
        super().__init__(client, store, gate, tag=tag)
        self.agent = agent

    def phone(self, n: int) -> contextlib.AbstractAsyncContextManager[httpx.AsyncClient]:
        """Every phone pairs from this machine's address (past its budget, see ``device``)."""
        return contextlib.nullcontext(self.client)

    async def notes(self) -> set[str]:
        """The upstream's notes, through ``list_notes`` on the server's MCP endpoint."""
        result = await self.agent.call_tool(READ_TOOL, {})
        if result.is_error:
            raise RuntimeError(f"{READ_TOOL} failed through {self.client.base_url}: {result}")
        return _notes(result.structured_content, result.content)


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
    harness: BaseHarness, case: Case, *, timer: Callable[[], float] = time.perf_counter
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
# Budgets no manifest reaches: the in-process eval decides every answer it uploads.
UNTHROTTLED = RateLimits(10**9, 10**9, 10**9, 10**9)
# The same for proposals: a refused answer leaves its set open until its deadline.
UNBOUNDED = ProposalLimits(open_per_user=10**9, per_agent=10**9)


@contextlib.asynccontextmanager
async def in_process(make_voice: VoiceFactory) -> AsyncIterator[Harness]:
    """The real app around a memory store and the notes upstream, lifespan and all.

    ``make_voice(store)`` builds the voice pipeline over the app's own store, so the replay
    guard remembers every upload of the run. The eval measures decisions, so the voice and
    answer budgets are lifted (``UNTHROTTLED``, ``UNBOUNDED``): a manifest of a hundred answers
    from one user must not come back ``rate_limited`` or ``too_many_open``.
    """
    from voicegate.mcp.notes import build_notes_server
    from voicegate.mcp.policy import Policy
    from voicegate.mcp.upstream import UpstreamSpec
    from voicegate.settings import ServerConfig
    from voicegate.store import open_store
    from voicegate.web.app import build_app

    store = await open_store("memory")
    config = ServerConfig(rate_limits=UNTHROTTLED, proposal_limits=UNBOUNDED)
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


# A voice answer on a loaded server waits for the recogniser; the first loads the model.
REMOTE_TIMEOUT = 300.0
DB_ENV = "VOICEGATE_DB"


@contextlib.asynccontextmanager
async def remote(url: str, db: str, token: str) -> AsyncIterator[RemoteHarness]:
    """A running ``voicegate serve`` at ``url``, over its store ``db``, with the agent ``token``.

    The MCP endpoint opens one-card sets only, so sets are proposed by a gate in this process
    over the server's own store (SQLite file or PostgreSQL), where the server finds them. That
    gate only proposes, reads and cancels; releasing is the server's. Its key ring is the
    server's own (``VOICEGATE_SECRET_KEYS`` or the key file beside a SQLite store), since pairing
    codes are hashed under it. Raises ``ConfigError`` when the server, its token or its store is
    wrong.
    """
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from voicegate.gate.core import Gate
    from voicegate.secrets import KeyRing
    from voicegate.settings import keys_for
    from voicegate.store import MemoryStore, SqliteStore, store_for

    store = store_for(db)
    if isinstance(store, MemoryStore):
        raise ConfigError("--db memory is this process's alone; give the store the server uses")
    if isinstance(store, SqliteStore) and not store.runner.path.is_file():
        raise ConfigError(f"no SQLite store at {store.runner.path}; give the server's --db")
    bearer = {"Authorization": f"Bearer {token}"}
    base = url.rstrip("/")
    async with httpx.AsyncClient(base_url=base, timeout=REMOTE_TIMEOUT) as client:
        await _check_server(client, bearer)
        await store.start()
        try:
            gate = Gate(
                store,
                executor=_no_release,
                is_write=WRITE_TOOL.__eq__,
                receipt_keys=keys_for(db) or KeyRing.generate(),
                # The eval proposes its cases itself and measures decisions, not agent bounds.
                limits=None,
            )
            async with create_mcp_http_client(headers=bearer) as http:
                transport = streamable_http_client(base + "/mcp", http_client=http)
                async with Client(transport, cache=None) as agent:
                    # A fresh prefix per run: a long-lived upstream keeps earlier runs' notes.
                    tag = f"eval-{secrets.token_hex(4)}/"
                    yield RemoteHarness(client, store, gate, agent, tag=tag)
        finally:
            await store.close()


async def _check_server(client: httpx.AsyncClient, bearer: dict[str, str]) -> None:
    """The server answers and takes the token; ``ConfigError`` saying which is wrong, if not."""
    try:
        health = await client.get("/healthz")
        probe = await client.post("/mcp", json={}, headers=bearer)
    except httpx.HTTPError as exc:
        raise ConfigError(f"cannot reach {client.base_url}: {exc!r}") from exc
    if health.status_code != 200:
        raise ConfigError(f"{client.base_url}/healthz answered {health.status_code}")
    if probe.status_code == 401:
        raise ConfigError(f"the server refused the bearer token (--token or ${TOKEN_ENV})")


async def _no_release(tool: str, arguments: Mapping[str, Any]) -> Any:
    raise RuntimeError(f"the eval never releases {tool}; the server does")


def whisper_voice(model: str | None, langs: Sequence[str], device: str = "auto") -> VoiceFactory:
    """The server's own pipeline: faster-whisper from disk and the replay guard on the store."""

    def make(store: Store) -> VoicePipeline:
        from voicegate.voice.pipeline import default_pipeline

        return default_pipeline(
            store.fingerprints,
            model=model,
            languages=langs,
            device=device,
            templates=store.templates,
        )

    return make


async def evaluate(
    cases: Sequence[Case], harness: BaseHarness, *, progress: bool = True
) -> list[report.Result]:
    """Run ``cases`` in order (a replay must follow its original) and collect the results."""
    from tqdm import tqdm

    results: list[report.Result] = []
    bar = tqdm(cases, desc="eval", unit="case", disable=not progress, file=sys.stderr)
    false_releases = 0
    for case in bar:
        if case.enrol:
            harness.taught.append(await enrol.teach(harness, case, CONTENT_TYPES))
            continue
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
    parser.add_argument(
        "--url", help="a running voicegate serve (in front of the notes upstream) instead"
    )
    parser.add_argument(
        "--db",
        help="with --url: the server's store, as its --db gives it (default: $VOICEGATE_DB)",
    )
    parser.add_argument(
        "--token", help=f"with --url: the server's agent bearer token (default: ${TOKEN_ENV})"
    )
    parser.add_argument("--limit", type=int, help="run only the first N cases")
    parser.add_argument(
        "--case-lang",
        action="append",
        dest="case_langs",
        metavar="LANG",
        help="run only the cases of this manifest language (en, hi-Latn, hi-Deva, none; "
        "repeat for several), e.g. the Hindi cases against a server with Hindi on",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="recogniser model, as voicegate serve chooses it: tiny.en for English alone, "
        "base with Hindi (not with --url)",
    )
    parser.add_argument(
        "--lang",
        action="append",
        dest="langs",
        choices=["en", "hi"],
        help="recogniser languages, repeat for several (default: en, as voicegate serve; "
        "with --url the server's own)",
    )
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def write_outputs(
    results: Sequence[report.Result],
    args: argparse.Namespace,
    taught: Sequence[enrol.Taught] = (),
) -> dict[str, Any]:
    """The JSON summary and the Markdown report, where asked for; enrolment takes apart."""
    doc = report.summary(results)
    doc["enrolment"] = enrol.counts(taught)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", "utf-8")
    if args.report:
        plots = report.write_plots(results, args.report)
        shown = _shown(sys.argv[2:])
        command = "voicegate eval " + shlex.join(shown) if shown else ""
        text = report.markdown(results, command=command, plots=plots)
        if taught:
            e = doc["enrolment"]
            text += (
                f"\nEnrolment takes (not cases): {e['takes']} from {e['users']} users, "
                f"{e['taught']} taught, {e['refused']} refused {e['reasons']}.\n"
            )
        (args.report / "report.md").write_text(text, encoding="utf-8")
    return doc


def _shown(argv: Sequence[str]) -> list[str]:
    """The command line fit for a report: the token masked, a store password redacted."""
    from voicegate.store import redact

    def hide(flag: str, value: str) -> str:
        return "***" if flag == "--token" else redact(value)

    shown: list[str] = []
    for word in argv:
        flag, eq, value = word.partition("=")
        if shown and shown[-1] in ("--token", "--db") and not word.startswith("-"):
            word = hide(shown[-1], word)
        elif eq and flag in ("--token", "--db"):
            word = f"{flag}={hide(flag, value)}"
        shown.append(word)
    return shown


def remote_options(args: argparse.Namespace) -> tuple[str, str, str] | None:
    """``(url, db, token)`` for a run against a running server, None for the in-process app;
    ``ConfigError`` when ``--url`` lacks what it needs."""
    url = getattr(args, "url", None)
    db = getattr(args, "db", None)
    token = getattr(args, "token", None)
    if not url:
        if db or token:
            raise ConfigError("--db and --token go with --url; the in-process app has its own")
        return None
    db = db or os.environ.get(DB_ENV, "")
    token = token or os.environ.get(TOKEN_ENV, "")
    missing = []
    if not db:
        missing.append(
            f"--db, the store the server was started with (a SQLite file or a PostgreSQL DSN; "
            f"default ${DB_ENV}): sets of several cards are proposed there"
        )
    if not token:
        missing.append(f"--token, the server's agent bearer token (default ${TOKEN_ENV})")
    if missing:
        raise ConfigError("--url needs " + " and ".join(missing))
    return url, db, token


def _problem(exc: BaseException) -> ConfigError | StoreUnavailable | None:
    """The setup error behind ``exc``, looking inside the groups a task group raises."""
    if isinstance(exc, ConfigError | StoreUnavailable):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _problem(inner)) is not None:
                return found
    return None


def run(args: argparse.Namespace) -> int:
    """Run the manifest; exit 1 on any false release, 2 on a bad manifest or setup."""
    if args.agent:
        from voicegate.eval import agent

        return agent.run(args)
    if args.manifest is None:
        print("voicegate eval: --manifest or --agent is required", file=sys.stderr)
        return 2
    try:
        server = remote_options(args)
    except ConfigError as exc:
        print(f"voicegate eval: {exc}", file=sys.stderr)
        return 2
    try:
        cases = load(args.manifest)
    except ManifestError as exc:
        print(f"{args.manifest}: {exc}", file=sys.stderr)
        return 2
    if args.case_langs:
        cases = [c for c in cases if c.lang in args.case_langs]
    if args.limit is not None:
        cases = cases[: args.limit]
    # One line per refused answer would bury the progress bar.
    logging.getLogger("voicegate").setLevel(logging.WARNING)

    async def go() -> tuple[list[report.Result], list[enrol.Taught]]:
        progress = not args.no_progress
        if server is not None:
            async with remote(*server) as harness:
                return await evaluate(cases, harness, progress=progress), harness.taught
        voice = whisper_voice(args.model, tuple(args.langs or ("en",)), args.device)
        async with in_process(voice) as local:
            return await evaluate(cases, local, progress=progress), local.taught

    try:
        results, taught = asyncio.run(go())
    except (ConfigError, StoreUnavailable, ExceptionGroup) as exc:
        problem = _problem(exc)
        if problem is None:
            raise
        print(f"voicegate eval: {problem}", file=sys.stderr)
        return 2
    doc = write_outputs(results, args, taught)
    lat = doc["latency_ms"]
    print(
        f"{doc['cases']} cases, {doc['correct']} correct, {doc['false_releases']} false "
        f"releases, latency p50 {lat['p50']} ms p95 {lat['p95']} ms"
    )
    if taught:
        e = doc["enrolment"]
        print(
            f"{e['takes']} enrolment takes (not cases): {e['taught']} taught, "
            f"{e['refused']} refused"
        )
    return 1 if doc["false_releases"] else 0
