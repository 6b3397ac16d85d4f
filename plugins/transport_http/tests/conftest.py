"""A real `pps serve http` on 127.0.0.1 (a free port), hosting three entities with different plugin sets."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

ENTITIES = {"lyra": "sqlite,crystals,mcp,http", "nexus": "crystals,mcp", "orion": "crystals"}


def pps_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPS_")}
    env["PPS_ROOT"] = str(root)
    return env


def pps(root: Path, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pps_core.cli", *args], env=pps_env(root), capture_output=True,
                          text=True, check=check, timeout=timeout, stdin=subprocess.DEVNULL)


@dataclass
class Server:
    url: str
    root: Path
    proc: subprocess.Popen
    tokens: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        stop_server(self)

    def token(self, entity: str) -> str:
        return (self.root / entity / "token").read_text().strip()

    def auth(self, entity: str = "lyra") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(entity)}"}

    def call(self, op: str, params=None, entity: str | None = None, token_of: str | None = "lyra", **kw):
        prefix = f"/entities/{entity}" if entity else ""
        headers = {**(self.auth(token_of) if token_of else {}), **kw.pop("headers", {})}
        return httpx.post(f"{self.url}{prefix}/tools/{op}", json=params if params is not None else {},
                          headers=headers, timeout=10, **kw)


def start_server(root: Path, *args: str) -> Server:
    log = open(root / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "pps_core.cli", "serve", "http", "--port", "0", *args],
                            env=pps_env(root), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    url = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {(root / 'server.log').read_text()}")
        if url is None:
            found = re.search(r"at (http://[\d.]+:\d+)", (root / "server.log").read_text())
            url = found.group(1) if found else None
        if url:
            try:
                if httpx.get(f"{url}/health", timeout=1).json().get("ok"):
                    return Server(url=url, root=root, proc=proc)
            except httpx.HTTPError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"server did not start: {(root / 'server.log').read_text()}")


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:  # pragma: no cover
        server.proc.kill()
        server.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("pps_http")
    for name, plugins in ENTITIES.items():
        pps(root, "init", "--entity", name, "--plugins", plugins, "--timezone", "UTC")
    with open(root / "lyra" / "pps.toml", "a") as fh:
        fh.write("\n[limits]\nmax_request_bytes = 4096\n")
    srv = start_server(root, "--entity", "lyra", "--entities", ",".join(ENTITIES))
    yield srv
    stop_server(srv)
    assert srv.proc.returncode in (0, -15), (root / "server.log").read_text()  # uvicorn re-raises SIGTERM
    assert "Traceback" not in (root / "server.log").read_text()
    from pps_core.owner import read_owner

    assert all(read_owner(root / name) is None for name in ENTITIES)  # a stopped server frees its entities


@pytest.fixture
def pps_cli():
    """``pps_cli(root, *args)``: run the ``pps`` command with ``PPS_ROOT=root``; ``pps_cli.env(root)``."""
    pps.env = pps_env
    return pps


@pytest.fixture
def start_http():
    """``start_http(root, *serve_args)``: a `pps serve http` of its own, stopped after the test."""
    started: list[Server] = []

    def start(root: Path, *args: str) -> Server:
        started.append(start_server(root, *args))
        return started[-1]

    yield start
    for srv in started:
        if srv.proc.poll() is None:
            stop_server(srv)
