"""A private PostgreSQL server that a test starts, stops and starts again, in a folder of its own.

Built from the server binaries in ``/usr/lib/postgresql/<version>/bin`` (``initdb``, ``pg_ctl``)
on a free port, listening on 127.0.0.1 only, with trust authentication for the ``postgres``
role. PostgreSQL refuses to run as root, so under root every command runs as the ``postgres``
OS user (``runuser``) in a folder that user owns, outside pytest's root-only temp tree.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.reliability.cluster import free_port

BIN_GLOB = "/usr/lib/postgresql/*/bin"
SERVER_USER = "postgres"


def server_bin() -> Path | None:
    """The newest installed PostgreSQL server binaries, or None."""
    found = [p for p in Path("/").glob(BIN_GLOB.lstrip("/")) if (p / "pg_ctl").exists()]
    if not found:
        return None
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)


def can_run() -> bool:
    """Whether this machine can start a private server (binaries, and a user to run it as)."""
    if server_bin() is None:
        return False
    if os.geteuid() != 0:
        return True
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        return False
    return shutil.which("runuser") is not None


class PrivatePostgres:
    """One throw-away PostgreSQL cluster; ``start`` and ``stop`` as often as a test likes."""

    def __init__(self) -> None:
        bindir = server_bin()
        assert bindir is not None
        self.bindir = bindir
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="vg-pg-"))
        self.data = self.folder / "data"
        if os.geteuid() == 0:
            owner = pwd.getpwnam(SERVER_USER)
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    @property
    def dsn(self) -> str:
        """A DSN for the ``postgres`` database as the ``postgres`` role."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server now, ending every client connection (fast shutdown)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def remove(self) -> None:
        """Stop the server if it runs, and delete its folder."""
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        argv = [str(self.bindir / program), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", SERVER_USER, "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}):\n{done.stderr}")
