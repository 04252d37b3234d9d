"""P3 read pass-through: reads through a real ``voicegate serve`` vs straight to the upstream.

The upstream is the notes server over stdio (``python -m voicegate.mcp.notes``). The gate runs
as its own process and the agent is the MCP SDK's client over Streamable HTTP, and again with
the agent on the gate's stdin and stdout (``serve --stdio``, as an MCP host starts a server);
the direct path is the same SDK client over stdio to another copy of the upstream. Reads
alternate between the paths, so a change in machine load hits all alike, and the added time is
the median of the paired differences; a gate process's CPU time per read it served (from
``/proc``) is the figure load changes least. ``confirm-gate-mcp`` 0.8.0 gates the same upstream
for comparison; it is installed from PyPI into its own virtual environment under the bench
cache on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from voicegate.mcp.http_client import mcp_http_client
from voicegate_lab.bench.measure import Options, median, ms

READ = "list_notes"
# A read with an argument: the SDK checks a 2026-07-28 call's arguments against the tool's schema.
READ_ARG = ("read_note", {"name": "groceries"})
TOKEN = "bench-token-0123456789abcdef"
CONFIRM_GATE = "confirm-gate-mcp==0.8.0"
UPSTREAM = (sys.executable, "-m", "voicegate.mcp.notes")
START_TIMEOUT = 90.0


def run(options: Options) -> dict[str, Any]:
    """Reads through voicegate, direct, and through confirm-gate-mcp where it can be had."""
    return asyncio.run(_run(options))


async def _run(options: Options) -> dict[str, Any]:
    reads = options.pick(100, 5)
    figures: dict[str, Any] = {"reads": reads, "tool": READ, "upstream": "notes over stdio"}
    gate_cmd = [
        sys.executable, "-m", "voicegate.cli", "serve",
        "--upstream-cmd", " ".join(UPSTREAM), "--reads", f"{READ},{READ_ARG[0]}",
        "--db", "memory", "--token", TOKEN, "--port", "{port}",
    ]  # fmt: skip
    floor_cmd = [
        sys.executable, "-m", "uvicorn", "--factory", "voicegate_lab.bench.p3:notes_http_app",
        "--port", "{port}", "--log-level", "warning",
    ]  # fmt: skip
    # The same gate with the agent on its stdin and stdout, as an MCP host starts a server.
    stdio_cmd = [c for c in gate_cmd if c not in ("--token", TOKEN)]
    stdio_cmd[stdio_cmd.index("{port}")] = "0"
    stdio_log, stdio_pidfile = options.work / "p3-voicegate-stdio.log", options.work / "p3.pid"
    stdio_log.parent.mkdir(parents=True, exist_ok=True)
    shell = f"echo $$ > {shlex.quote(str(stdio_pidfile))}; exec {shlex.join(stdio_cmd)} --stdio"
    shell += f" 2> {shlex.quote(str(stdio_log))}"
    async with (
        _server(gate_cmd, options.work / "p3-voicegate.log", "/healthz") as (gate_url, gate_pid),
        _server(floor_cmd, options.work / "p3-notes-http.log", "/mcp") as (floor_url, _),
        _http_agent(gate_url + "/mcp") as gate,
        _http_agent(floor_url + "/mcp") as floor,
        Client(StdioServerParameters(command=UPSTREAM[0], args=list(UPSTREAM[1:]))) as direct,
        Client(StdioServerParameters(command="/bin/sh", args=["-c", shell])) as gate_stdio,
    ):
        stdio_pid = int(stdio_pidfile.read_text())
        paths = {"gate": gate, "http_floor": floor, "direct": direct, "gate_stdio": gate_stdio}
        warmup = options.pick(10, 2)
        cpu_before = _cpu_seconds(gate_pid), _cpu_seconds(stdio_pid)
        seconds = await _alternate(paths, reads, warmup=warmup)
        with_arg = await _alternate(
            {"gate": gate, "direct": direct, "gate_stdio": gate_stdio},
            reads,
            warmup=warmup,
            call=READ_ARG,
        )
        cpu_after = _cpu_seconds(gate_pid), _cpu_seconds(stdio_pid)
    keys = ("gate_cpu_ms", "stdio_cpu_ms")
    for key, before, after in zip(keys, cpu_before, cpu_after, strict=True):
        if before is not None and after is not None:
            # CPU time a gate process spent per read it served: its own work, whatever the load.
            figures[key] = ms((after - before) / (2 * (reads + warmup)))
    for name, values in seconds.items():
        figures[f"{name}_ms"] = median([ms(s) for s in values])
    figures["added_ms"] = _paired(seconds["gate"], seconds["direct"])
    # The same upstream served over Streamable HTTP by the SDK alone: what the transport costs
    # without any gate, so the gate's own share is what remains.
    figures["transport_ms"] = _paired(seconds["http_floor"], seconds["direct"])
    figures["gate_own_ms"] = _paired(seconds["gate"], seconds["http_floor"])
    figures["vs_direct"] = round(figures["gate_ms"] / figures["direct_ms"], 3)
    # The agent on stdio against the same client on stdio straight to the upstream.
    figures["stdio_added_ms"] = _paired(seconds["gate_stdio"], seconds["direct"])
    figures["with_argument"] = {
        "tool": READ_ARG[0],
        "gate_ms": median([ms(s) for s in with_arg["gate"]]),
        "gate_stdio_ms": median([ms(s) for s in with_arg["gate_stdio"]]),
        "direct_ms": median([ms(s) for s in with_arg["direct"]]),
        "added_ms": _paired(with_arg["gate"], with_arg["direct"]),
        "stdio_added_ms": _paired(with_arg["gate_stdio"], with_arg["direct"]),
    }
    figures["confirm_gate"] = await _confirm_gate(options)
    cg_ms = figures["confirm_gate"].get("read_ms")
    for key, path in (("vs_confirm_gate", "gate_ms"), ("stdio_vs_confirm_gate", "gate_stdio_ms")):
        figures[key] = round(cg_ms / figures[path], 1) if cg_ms else None
    return figures


async def _alternate(
    paths: dict[str, Client],
    reads: int,
    *,
    warmup: int,
    call: tuple[str, dict[str, Any]] = (READ, {}),
) -> dict[str, list[float]]:
    """Seconds per read on each path, the paths taking turns in a rotating order."""
    tool, arguments = call
    for _ in range(warmup):
        for client in paths.values():
            await client.call_tool(tool, arguments)
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for i in range(reads):
        # Rotate who goes first, so no path always follows another's wake-up.
        for name in names[i % len(names) :] + names[: i % len(names)]:
            start = time.perf_counter()
            result = await paths[name].call_tool(tool, arguments)
            seconds[name].append(time.perf_counter() - start)
            if result.is_error:
                raise RuntimeError(f"{tool} failed on the {name} path: {result.content}")
    return seconds


def _paired(a: list[float], b: list[float]) -> float:
    """Median of the per-read differences a - b, in ms."""
    return median([ms(x - y) for x, y in zip(a, b, strict=True)])


def notes_http_app() -> Any:
    """The notes upstream served over Streamable HTTP by the SDK alone (for uvicorn --factory)."""
    from voicegate.mcp.notes import build_notes_server

    return build_notes_server().streamable_http_app()


async def _confirm_gate(options: Options) -> dict[str, Any]:
    """Per-read time through confirm-gate-mcp, or why it could not be measured."""
    venv = options.cache / "confirm-gate-0.8.0"
    program = venv / "bin" / "confirm-gate"
    out: dict[str, Any] = {"package": CONFIRM_GATE, "venv": str(venv)}
    if not program.exists():
        if options.quick:
            out["unavailable"] = "not installed; --quick does not install (run without --quick)"
            return out
        started = time.perf_counter()
        problem = await asyncio.to_thread(_install, venv)
        out["install_s"] = round(time.perf_counter() - started, 1)
        if problem:
            out["unavailable"] = problem
            return out
    reads = options.pick(10, 3)
    cmd = [
        str(program), "serve", "--upstream-cmd", " ".join(UPSTREAM), "--reads", READ,
        "--db", ":memory:", "--token", TOKEN, "--port", "{port}",
    ]  # fmt: skip
    async with (
        _server(cmd, options.work / "p3-confirm-gate.log", "/approve") as (url, _),
        _http_agent(url + "/mcp") as agent,
    ):
        await agent.call_tool(READ, {})
        times = []
        for _ in range(reads):
            start = time.perf_counter()
            result = await agent.call_tool(READ, {})
            times.append(time.perf_counter() - start)
            if result.is_error:
                out["unavailable"] = f"{READ} failed through confirm-gate: {result.content}"
                return out
    out["reads"] = reads
    out["read_ms"] = median([ms(s) for s in times])
    return out


def _install(venv: Path) -> str:
    """Create ``venv`` and install confirm-gate-mcp there; an error text, or "" when done."""
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "pip"), "install", "-q", "--ignore-requires-python", CONFIRM_GATE],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return f"{' '.join(step[:3])} failed ({done.returncode}): {' | '.join(tail)}"
    return ""


@contextlib.asynccontextmanager
async def _server(command: Sequence[str], log: Path, probe: str) -> AsyncIterator[tuple[str, int]]:
    """Start ``command`` on a free port (``{port}`` in it); yield its base URL and process id
    once it answers."""
    port = _free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [c.replace("{port}", str(port)) for c in command],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        base = f"http://127.0.0.1:{port}"
        try:
            await _wait_until_up(proc, base + probe, log)
            yield base, proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def _wait_until_up(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    async with httpx.AsyncClient(timeout=2.0) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{url} exited {proc.returncode}: {log.read_text()[-800:]}")
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(url)).status_code < 500:
                    return
            # Polling a starting server: the only wait here, and not part of any figure.
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {START_TIMEOUT:.0f} s")


@contextlib.asynccontextmanager
async def _http_agent(url: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        mcp_http_client(headers) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        yield client


def _cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of process ``pid`` so far (Linux ``/proc``), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # utime and stime, fields 14 and 15 of proc(5), counted from the state field (3).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def lines(figures: dict[str, Any]) -> list[str]:
    """The human summary."""
    out = [
        f"{figures['reads']} reads of {figures['tool']}: through voicegate "
        f"{figures['gate_ms']:.2f} ms, direct {figures['direct_ms']:.2f} ms (medians)",
        f"added per read {figures['added_ms']:.2f} ms (median of paired differences); "
        f"ratio {figures['vs_direct']}x direct",
        f"of which the SDK's Streamable HTTP transport alone {figures['transport_ms']:.2f} ms "
        f"(same upstream over HTTP, no gate: {figures['http_floor_ms']:.2f} ms), "
        f"the gate itself {figures['gate_own_ms']:.2f} ms",
    ]
    if "gate_cpu_ms" in figures:
        out.append(f"gate process CPU per read served {figures['gate_cpu_ms']:.3f} ms")
    out.append(
        f"agent on stdio (serve --stdio): {figures['gate_stdio_ms']:.2f} ms per read, added "
        f"{figures['stdio_added_ms']:.2f} ms against direct stdio"
        + (f", gate CPU {figures['stdio_cpu_ms']:.3f} ms" if "stdio_cpu_ms" in figures else "")
    )
    arg = figures["with_argument"]
    out.append(
        f"{arg['tool']} (one argument): through voicegate {arg['gate_ms']:.2f} ms (stdio "
        f"{arg['gate_stdio_ms']:.2f}), direct {arg['direct_ms']:.2f} ms, added "
        f"{arg['added_ms']:.2f} ms (stdio {arg['stdio_added_ms']:.2f})"
    )
    cg = figures["confirm_gate"]
    if "read_ms" in cg:
        out.append(
            f"confirm-gate-mcp 0.8.0: {cg['read_ms']:.0f} ms per read ({cg['reads']} reads); "
            f"voicegate is {figures['vs_confirm_gate']:,}x faster over HTTP, "
            f"{figures['stdio_vs_confirm_gate']:,}x on stdio"
        )
    else:
        out.append(f"confirm-gate-mcp 0.8.0: not measured: {cg['unavailable']}")
    return out
