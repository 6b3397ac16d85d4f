"""Reaching an owner from another process: the kernel's local channel vs HTTP to the same server (issue 38).

    .venv/bin/python bench/channel.py [--n 300]

One throwaway entity (sqlite + crystals + http, 50 turns stored) served by a real ``pps serve http`` subprocess:
it answers on its HTTP port and, like every owner now, on the kernel's local channel (a Unix socket). Each
operation is timed N times (after a warm-up) four ways, interleaved round by round so other load on the machine
falls on every path alike, one connection per call as ``pps call`` and the hooks make them:

- channel: ``pps_core.forward.call("unix:<socket>", ...)`` (the path ``pps call``, ``pps health`` and the hooks'
  fast path take now);
- HTTP, hand-written: the HTTP/1.1 client ``pps_core.forward`` had until this change (copied here as the
  baseline: the hooks' old path to the owner);
- HTTP, urllib: ``pps_core.forward.call("http://...", ...)`` (what a server elsewhere, a fleet's server_url,
  gets now);
- floor: ``{"op": "ping"}`` on the channel (connect, one line each way, no operation).

Also the import cost of the client a hook pays under ``python -S`` (``pps_core.forward`` with ``socket``),
against ``urllib.request`` (which the HTTP path imports) as the same-run baseline.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pps_core.forward import call, health
from pps_core.owner import read_owner
from pps_core.testing.server import init_entity, start_server

OPS = [("get_turns_since_summary", {"limit": 5}), ("raw_search", {"query": "lighthouse door", "limit": 5})]


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def old_http(address: str, path: str, token: str, body: dict) -> object:
    """The hand-written HTTP/1.1 exchange pps_core.forward used before (one socket, Connection: close)."""
    rest = address.partition("://")[2]
    netloc, _, base = rest.partition("/")
    host, _, port = netloc.partition(":")
    data = json.dumps(body).encode()
    head = [f"POST /{base}{path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
            f"Content-Length: {len(data)}", "Accept: application/json", "Content-Type: application/json",
            f"Authorization: Bearer {token}"]
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        sock.settimeout(120)
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    header, _, raw = b"".join(chunks).partition(b"\r\n\r\n")
    if b"chunked" in header.lower():
        out, rest_b = [], raw
        while rest_b:
            size_line, _, rest_b = rest_b.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out.append(rest_b[:size])
            rest_b = rest_b[size + 2:]
        raw = b"".join(out)
    return json.loads(raw)


def import_ms(code: str, runs: int = 15) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-S", "-c", code], check=True)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    import compileall

    import pps_core

    # bytecode as `pip install` leaves it (PYTHONDONTWRITEBYTECODE would otherwise recompile every run)
    compileall.compile_dir(str(Path(pps_core.__file__).parent), quiet=1)
    root = Path(tempfile.mkdtemp(prefix="pps-bench-channel-"))
    home = init_entity(root, "lyra", "sqlite,crystals,http")
    server = start_server(root, "--entity", "lyra")
    try:
        owner = read_owner(home) or {}
        channel, http = f"unix:{owner['channel']}", owner["address"]
        token = (home / "token").read_text().strip()
        for i in range(50):
            call(channel, "store_message", {"content": f"turn {i}: the lighthouse door is cobalt blue",
                                            "author_name": "Jeff", "channel": "terminal"})
        print(f"load average {Path('/proc/loadavg').read_text().split()[:3]}; n={args.n}, one connection per call")
        print(f"{'operation':28} {'path':22} {'p50 ms':>8} {'p95 ms':>8} {'p50 vs channel':>15} "
              f"{'p95 vs channel':>15}")
        for op, params in OPS:
            ways = {
                "channel": lambda op=op, params=params: call(channel, op, params),
                "HTTP, hand-written": lambda op=op, params=params: old_http(http, f"/tools/{op}", token, params),
                "HTTP, urllib": lambda op=op, params=params: call(http, op, params, token),
                "floor: channel ping": lambda: health(channel),
            }
            samples: dict[str, list[float]] = {k: [] for k in ways}
            for fn in ways.values():
                for _ in range(20):
                    fn()
            for _ in range(args.n):
                for name, fn in ways.items():
                    started = time.perf_counter()
                    fn()
                    samples[name].append((time.perf_counter() - started) * 1000)
            p50, p95 = pct(samples["channel"], 0.5), pct(samples["channel"], 0.95)
            for name, values in samples.items():
                print(f"{op:28} {name:22} {pct(values, 0.5):8.2f} {pct(values, 0.95):8.2f} "
                      f"{pct(values, 0.5) / p50:14.2f}x {pct(values, 0.95) / p95:14.2f}x")
        forward = import_ms("import socket, pps_core.forward")
        urllib = import_ms("import socket, pps_core.forward, urllib.request")
        floor = import_ms("pass")
        print(f"python -S start + import: nothing {floor:.1f} ms; pps_core.forward + socket {forward:.1f} ms; "
              f"+ urllib.request {urllib:.1f} ms ({(urllib - floor) / max(forward - floor, 0.01):.1f}x the "
              "client's own import)")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
