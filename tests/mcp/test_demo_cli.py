"""``voicegate demo`` as a process: its port, its log, and the temporary store it leaves behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT
from voicegate.cli.serve import demo_banner
from voicegate.settings import ServerConfig
from voicegate.store import open_store

BANNER_LINES = 9


def demo(tmp_path: Path, *flags: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path), "HOME": str(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-m", "voicegate.cli", "demo", "--no-voice", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )


@pytest.mark.slow
def test_an_explicit_busy_port_is_an_error_that_names_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = demo(tmp_path, "--port", str(port))
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, out + err
    assert f"port {port}" in err
    assert "Agent MCP endpoint" not in out
    assert not list(tmp_path.glob("voicegate-demo-*"))


@pytest.mark.slow
def test_the_demo_logs_each_event_once_to_its_file_and_removes_its_store_on_sigterm(
    tmp_path: Path,
) -> None:
    """The events go to the log file the banner names, not to the terminal, where they would
    push the banner (token, pairing code) off screen."""
    proc = demo(tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        banner = "".join(proc.stdout.readline() for _ in range(BANNER_LINES))
        found = re.search(r"Approve page:\s+(http://\S+)/approve", banner)
        log = re.search(r"Events log:\s+(\S+)", banner)
        assert found is not None and log is not None, banner
        assert len(list(tmp_path.glob("voicegate-demo-*"))) == 1
        refused = httpx.post(found.group(1) + "/device/pair", json={"code": "x"}, timeout=10)
        assert refused.status_code == 400
        logged = Path(log.group(1)).read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert logged.count("confirm refused") == 1, logged
    assert "confirm" not in err and "Traceback" not in err, err
    assert not list(tmp_path.glob("voicegate-demo-*"))


@pytest.mark.slow
def test_sigterm_before_serving_closes_the_stdio_upstream_and_exits_143(tmp_path: Path) -> None:
    """The upstream starts and never answers, so the gate is still starting when SIGTERM comes:
    the upstream's process is closed on the way out, not left running, and no traceback."""
    pid_file = tmp_path / "upstream.pid"
    upstream = tmp_path / "silent.py"
    upstream.write_text(
        "import os, sys, time\n"
        "os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # not the gate's stderr: the test reads it\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "sys.stdin.read()\n"
        "time.sleep(120)\n"
    )
    env = {**os.environ, "HOME": str(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "voicegate.cli", "serve", "--no-voice", "--port", "0"]
    command += ["--db", str(tmp_path / "gate.db"), "--upstream-cmd", f"{sys.executable} {upstream}"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path)  # fmt: skip
    child = None
    try:
        deadline = time.monotonic() + 60
        while child is None and proc.poll() is None and time.monotonic() < deadline:
            if pid_file.exists() and pid_file.read_text():
                child = int(pid_file.read_text())
            time.sleep(0.1)
        assert child is not None, "the upstream never started"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, out + err
        assert "stopped by SIGTERM before it served" in err
        assert "Traceback" not in err and "Agent MCP endpoint" not in out
        assert not _alive(child), "the upstream's process outlived the gate"
    finally:
        proc.kill()
        proc.communicate()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True  # the gate reaps the upstream it closes; one it left is still running


async def test_the_banner_says_a_store_the_demo_made_goes_when_it_stops(
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = await open_store("memory")
    try:
        await demo_banner(ServerConfig(db="/tmp/voicegate-demo-x/demo.db"), store, None)
        kept = capsys.readouterr().out
        await demo_banner(ServerConfig(db="/tmp/x.db"), store, None, temporary=True)
        temporary = capsys.readouterr().out
    finally:
        await store.close()
    assert "removed when the demo stops" not in kept
    store_line = next(line for line in temporary.splitlines() if "Store:" in line)
    assert "removed when the demo stops, taught answers too; --db PATH keeps it" in store_line
