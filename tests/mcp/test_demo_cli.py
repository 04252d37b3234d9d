"""``voicegate demo`` as a process: its port, its log, and the temporary store it leaves behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import ROOT

BANNER_LINES = 7


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


def test_the_demo_logs_each_event_once_and_removes_its_store_on_sigterm(tmp_path: Path) -> None:
    proc = demo(tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        banner = "".join(proc.stdout.readline() for _ in range(BANNER_LINES))
        found = re.search(r"Approve page:\s+(http://\S+)/approve", banner)
        assert found is not None, banner
        assert len(list(tmp_path.glob("voicegate-demo-*"))) == 1
        refused = httpx.post(found.group(1) + "/device/pair", json={"code": "x"}, timeout=10)
        assert refused.status_code == 400
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err.count("confirm refused") == 1, err
    assert "Traceback" not in err
    assert not list(tmp_path.glob("voicegate-demo-*"))
