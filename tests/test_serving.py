"""``pps serve``: one plugin manager per process start, and a server started on demand stops when idle."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pluggy
import pytest

from pps_core import cli
from pps_core.owner import read_owner
from pps_core.testing.server import init_entity


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suite_plugins: None) -> Path:
    home = init_entity(tmp_path, "lyra", "ledger,http,mcp")
    for key in [k for k in os.environ if k.startswith("PPS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PPS_ROOT", str(tmp_path))
    return home


def _count_plugin_managers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []
    init = pluggy.PluginManager.__init__

    def counting(self: pluggy.PluginManager, project_name: str) -> None:
        built.append(project_name)
        init(self, project_name)

    monkeypatch.setattr(pluggy.PluginManager, "__init__", counting)
    return built


def _sigterm_once_served(home: Path) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + 60
        while not (read_owner(home) or {}).get("address") and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_pps_serve_starts_one_plugin_manager(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pps serve http` (the CLI, the transport lookup, the entity's memory) builds the plugin manager once."""
    built = _count_plugin_managers(monkeypatch)

    def interrupt(*_: object) -> None:  # the server's own handler replaces it while it serves
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        watcher = _sigterm_once_served(home)
        code = cli.main(["serve", "http", "--entity", "lyra", "--port", "0"])
        watcher.join()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert built == ["pps"], f"{len(built)} plugin managers for one process start"
    assert code == 0
    assert read_owner(home) is None


def test_a_server_started_on_demand_stops_when_idle(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pps_core.serving import run
    from pps_core.settings import load_settings

    seen: list[str] = []

    def on_served(served) -> bool:  # noqa: ANN001 - pps_core.transport.Served
        seen.append(served.primary.name)
        return True

    started = time.monotonic()
    assert run("http", load_settings("lyra"), ["--port", "0"], on_served=on_served, idle_s=0.5) == 0
    assert seen == ["lyra"] and time.monotonic() - started < 30
    assert "idle for 0.5s: stopping" in capsys.readouterr().err
    assert read_owner(home) is None


def test_on_served_may_decline(home: Path) -> None:
    from pps_core.serving import run
    from pps_core.settings import load_settings

    assert run("http", load_settings("lyra"), ["--port", "0"], on_served=lambda served: False) == 0
    assert read_owner(home) is None


def test_the_ledger_store_loads_without_pytest() -> None:
    """`ledger` (the contract suites' store) is served by `pps serve` processes that have no pytest: loading it
    must not need the test tools."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['pytest'] = sys.modules['pytest_asyncio'] = None; "
            "import pps_core.testing.ledger as m; print(m.pps_layers.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "pps_layers", out.stderr[-2000:]


@pytest.mark.parametrize("address", ["ftp://127.0.0.1:1", "http://:80", "http://user@127.0.0.1:80",
                                     "http://127.0.0.1:99999", "http://127.0.0.1:x", "127.0.0.1:8765"])
def test_forwarding_refuses_an_unusable_owner_address(address: str) -> None:
    from pps_core import errors
    from pps_core.forward import request

    with pytest.raises(errors.ConfigError, match="unusable server address"):
        request(address, "GET", "/tools", None)


def test_forwarding_reaches_a_real_server_over_ipv4_and_ipv6(tmp_path: Path) -> None:
    """The HTTP client (urllib: a server elsewhere, the fleet's server_url) against a real HTTP server on loopback, both
    families."""
    import http.server
    import json
    import socket

    from pps_core import errors
    from pps_core.forward import request

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status = 422 if body.get("bad") else 200
            answer = ({"error": "invalid_params", "message": "bad: no", "param": "bad"} if status == 422
                      else {"path": self.path, "auth": self.headers.get("Authorization"), "echo": body})
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    class V6(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6

    for cls, host, shown in ((http.server.ThreadingHTTPServer, "127.0.0.1", "127.0.0.1"), (V6, "::1", "[::1]")):
        try:
            server = cls((host, 0), Handler)
        except OSError:  # no IPv6 on this machine's loopback
            assert host == "::1"
            continue
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            base = f"http://{shown}:{server.server_address[1]}/entities/lyra"
            answer = request(base, "POST", "/tools/raw_search", "tok", {"q": "ünï ✓"}, timeout=10)
            assert answer == {"path": "/entities/lyra/tools/raw_search", "auth": "Bearer tok", "echo": {"q": "ünï ✓"}}
            with pytest.raises(errors.InvalidParams) as err:
                request(base, "POST", "/tools/raw_search", "tok", {"bad": 1}, timeout=10)
            assert err.value.param == "bad"
        finally:
            server.shutdown()
            server.server_close()
