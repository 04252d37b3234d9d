"""``voicegate demo`` starts with no flags and no network, with the real recogniser on."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, require


@pytest.mark.slow
@pytest.mark.whisper
def test_demo_starts_offline_with_no_flags_and_voice_on(tmp_path: Path) -> None:
    require(shutil.which("unshare") is not None and shutil.which("ip") is not None, "unshare/ip")
    require(os.geteuid() == 0, "root, to make a network namespace")
    env = {**os.environ, "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    probe = f"ip link set lo up && exec {sys.executable} -m tests.mcp.demo_probe"
    done = subprocess.run(
        ["unshare", "--net", "sh", "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    banner = report["banner"]
    endpoint = re.search(r"Agent MCP endpoint:\s+(http://127\.0\.0\.1:\d+)/mcp$", banner, re.M)
    assert endpoint is not None, banner
    assert re.search(r"^\s*Bearer token:\s+\S{20,}$", banner, re.M), banner
    assert re.search(rf"Approve page:\s+{re.escape(endpoint.group(1))}/approve$", banner, re.M)
    assert "Pairing code:" in report["banner"]
    assert "Voice:              on" in report["banner"]
    # the pair command names the demo's own temporary store and address, so its code works there
    pair = (
        rf"Another device:\s+voicegate pair --user \S+ --db \S+demo\.db --url {endpoint.group(1)}$"
    )
    assert re.search(pair, banner, re.M), banner
    assert report["health"]["status"] == "ok"
    assert report["approve"] == 200
