"""The one harness for a real ``pps serve http`` subprocess on 127.0.0.1 (tests and benchmarks; loopback only).

    root = tmp_path / "root"
    init_entity(root, "lyra", "notes,http")
    server = start_server(root, "--entity", "lyra", "--entities", "nexus")
    server.call("note_add", {"content": "..."}).json()        # lyra's own token, lyra's routes
    server.call("pps_health", entity="nexus", token_of=None)  # another entity, no token
    server.stop()
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

#: Plugins that exist only for the suites' own processes, never in a user's install: ``ledger`` (the store
#: :class:`~pps_core.testing.TransportContract` serves). Registered by a distribution's metadata written to a
#: folder of this process (:func:`suite_plugins_path`) that :func:`pps_env` puts on the ``PYTHONPATH``.
SUITE_PLUGINS = {"ledger": "pps_core.testing.ledger"}
_SUITE_PATH: list[Path] = []


def suite_plugins_path() -> Path:
    """A folder holding the metadata of a distribution that registers :data:`SUITE_PLUGINS` (entry points
    ``pps.plugins``); on ``sys.path`` (or ``PYTHONPATH``), ``pps`` finds them like any installed plugin. Written
    once per process, removed when it exits."""
    if not _SUITE_PATH:
        import atexit
        import shutil
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="pps-suite-plugins-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        info = folder / "pps_core_suite_plugins-0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pps-core-suite-plugins\nVersion: 0\n")
        lines = "".join(f"{name} = {module}\n" for name, module in SUITE_PLUGINS.items())
        (info / "entry_points.txt").write_text("[pps.plugins]\n" + lines)
        _SUITE_PATH.append(folder)
    return _SUITE_PATH[0]


def pps_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``pps`` process of a suite: ``PPS_ROOT=root``, no other ``PPS_*`` of the developer's
    shell, and the suites' own plugins (:data:`SUITE_PLUGINS`) installed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPS_")}
    env["PPS_ROOT"] = str(root)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(suite_plugins_path()), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def pps(root: Path, *args: str, check: bool = True, timeout: float = 120,
        **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run the ``pps`` command as a user would, with ``PPS_ROOT=root``. ``-P``: the working directory stays off
    ``sys.path`` (not ``-I``: :func:`pps_env`'s ``PYTHONPATH`` carries the suite's own plugins)."""
    if "input" not in kw:  # no terminal to wait on
        kw["stdin"] = subprocess.DEVNULL
    return subprocess.run([sys.executable, "-P", "-m", "pps_core.cli", *args], env=kw.pop("env", None) or pps_env(root),
                          capture_output=True, text=True, check=check, timeout=timeout, **kw)


def init_entity(root: Path, entity: str, plugins: str, *extra_toml: str) -> Path:
    pps(root, "init", "--entity", entity, "--plugins", plugins, "--timezone", "UTC")
    home = root / entity
    if extra_toml:
        with open(home / "pps.toml", "a") as fh:
            fh.write("\n" + "\n".join(extra_toml) + "\n")
    return home


_OWN = "\x00own"


@dataclass
class Server:
    url: str
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path
    #: The entity served at the unprefixed routes (``--entity``), if one was named.
    entity: str | None = None

    def token(self, entity: str) -> str:
        return (self.root / entity / "token").read_text().strip()

    def headers(self, entity: str | None = None) -> dict[str, str]:
        """The Authorization header with ``entity``'s token (default: the server's entity)."""
        name = entity or self.entity
        if name is None:
            raise ValueError("name the entity: this server was started without --entity")
        return {"Authorization": f"Bearer {self.token(name)}"}

    auth = headers

    def call(self, op: str, params: Any = None, *, entity: str | None = None, token_of: str | None = _OWN,
             timeout: float = 30, client: httpx.Client | None = None, headers: dict[str, str] | None = None,
             **kw: Any) -> httpx.Response:
        """POST an operation: ``/entities/<entity>/tools/<op>``, or ``/tools/<op>`` (the server's entity) when
        ``entity`` is None. The token is the entity's own unless ``token_of`` names another (None: no token)."""
        if token_of == _OWN:
            token_of = entity or self.entity
        sent = {**(self.headers(token_of) if token_of else {}), **(headers or {})}
        prefix = f"/entities/{entity}" if entity else ""
        post = (client or httpx).post
        return post(f"{self.url}{prefix}/tools/{op}", json=params if params is not None else {},
                    headers=sent, timeout=timeout, **kw)

    def kill(self) -> None:
        """kill -9: no cleanup, no flush, no lock release."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.kill()
        return self.proc.returncode


def start_server(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
                 log_name: str = "server.log", preexec_fn: Callable[[], Any] | None = None,
                 program: tuple[str, ...] | None = None, cwd: Path | None = None) -> Server:
    """Start ``pps serve http --port 0 ARGS`` and wait until /health answers. ``program``: the command that
    runs ``pps`` (default ``python -P -m pps_core.cli``; the console script: ``(path of pps,)``), ``cwd``: the
    folder it starts in."""
    log = root / log_name
    start = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as fh:
        proc = subprocess.Popen([*(program or (sys.executable, "-P", "-m", "pps_core.cli")), "serve", "http",
                                 "--port", "0", *args], env=env or pps_env(root), stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=preexec_fn, cwd=cwd)
    deadline = time.monotonic() + timeout
    url = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}): {log.read_text()[-3000:]}")
        if url is None:
            with open(log, "rb") as fh:
                fh.seek(start)
                found = re.search(rb"at (http://[\d.]+:\d+)", fh.read())
            url = found.group(1).decode() if found else None
        if url:
            try:
                if httpx.get(f"{url}/health", timeout=1).json().get("ok"):
                    return Server(url=url, root=root, proc=proc, log=log, entity=_entity_arg(args))
            except (httpx.HTTPError, ValueError):
                pass
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"server did not start: {log.read_text()[-3000:]}")


def _entity_arg(args: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(args):
        if arg in ("--entity", "-e") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--entity="):
            return arg.split("=", 1)[1]
    return None
