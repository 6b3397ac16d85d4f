"""A real `pps serve http` on 127.0.0.1 (a free port), hosting three entities with different plugin sets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pps_core.testing.server import Server, pps, pps_env, start_server

ENTITIES = {"lyra": "sqlite,crystals,mcp,http", "nexus": "crystals,mcp", "orion": "crystals"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("pps_http")
    for name, plugins in ENTITIES.items():
        pps(root, "init", "--entity", name, "--plugins", plugins, "--timezone", "UTC")
        with open(root / name / "pps.toml", "a") as fh:  # every tool listed: the tests compare MCP and HTTP sets
            fh.write('\n[mcp]\ntools = "all"\n')
    with open(root / "lyra" / "pps.toml", "a") as fh:
        fh.write("\n[limits]\nmax_request_bytes = 4096\n")
    srv = start_server(root, "--entity", "lyra", "--entities", ",".join(ENTITIES))
    yield srv
    srv.stop()
    assert srv.proc.returncode in (0, -15), (root / "server.log").read_text()  # uvicorn re-raises SIGTERM
    assert "Traceback" not in (root / "server.log").read_text()
    from pps_core.owner import read_owner

    assert all(read_owner(root / name) is None for name in ENTITIES)  # a stopped server frees its entities


@pytest.fixture
def pps_cli():
    """``pps_cli(root, *args)``: run the ``pps`` command with ``PPS_ROOT=root``; ``pps_cli.env(root)``."""
    def run(root: Path, *args: str, **kw: Any):
        return pps(root, *args, **kw)

    run.env = pps_env
    return run


@pytest.fixture
def start_http():
    """``start_http(root, *serve_args)``: a `pps serve http` of its own, stopped after the test."""
    started: list[Server] = []

    def start(root: Path, *args: str) -> Server:
        started.append(start_server(root, *args))
        return started[-1]

    yield start
    for srv in started:
        srv.stop()
