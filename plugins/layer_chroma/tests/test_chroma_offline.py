"""No network at run time: only loopback sockets may be opened while the model loads, Chroma opens,
word-photos are saved and searched."""

import ipaddress
import socket

import pytest

PLUGINS = ["chroma", "embeddings"]


def _loopback(address) -> bool:
    if isinstance(address, tuple | list):
        host = address[0]
    else:
        return True  # AF_UNIX paths
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def no_network(monkeypatch):
    attempts = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_create, real_getaddrinfo = socket.create_connection, socket.getaddrinfo

    def connect(self, address):
        if not _loopback(address):
            attempts.append(("connect", address))
            raise OSError(f"test: network access to {address!r} is forbidden")
        return real_connect(self, address)

    def connect_ex(self, address):
        if not _loopback(address):
            attempts.append(("connect_ex", address))
            return 101
        return real_connect_ex(self, address)

    def create_connection(address, *args, **kwargs):
        if not _loopback(address):
            attempts.append(("create_connection", address))
            raise OSError(f"test: network access to {address!r} is forbidden")
        return real_create(address, *args, **kwargs)

    def getaddrinfo(host, *args, **kwargs):
        if not _loopback((host,)):
            attempts.append(("getaddrinfo", host))
            raise socket.gaierror(f"test: name lookup of {host!r} is forbidden")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return attempts


def test_the_guard_tells_loopback_from_the_rest(no_network):
    assert _loopback(("127.0.0.1", 80)) and _loopback(("::1", 80, 0, 0)) and _loopback(("localhost", 80))
    assert _loopback("/tmp/some.sock")
    assert not _loopback(("192.0.2.1", 80)) and not _loopback(("example.com", 443))
    assert socket.create_connection.__module__ == __name__ and socket.socket.connect.__module__ == __name__


async def test_cold_open_save_and_search_touch_no_network(no_network, make_memory):
    # batch_size 7 is a configuration no other test uses: the model is loaded afresh under the guard
    memory = await make_memory(plugins=PLUGINS, embeddings={"batch_size": 7})
    assert not memory.embedder.loaded
    await memory.call("anchor_save", {"title": "Harbour", "content": "Fishing boats in the harbour at dawn."})
    out = await memory.call("anchor_search", {"query": "boats at sunrise", "limit": 1})
    assert out["results"][0]["source"] == "harbour.md"
    assert memory.embedder.loaded
    await memory.call("ambient_recall", {"context": "boats"})
    await memory.close()
    assert no_network == []


PROBE = """
import asyncio, sys
from pps_core import Memory

async def main(home):
    async with Memory.for_entity("probe", home=home, plugins=["chroma", "embeddings"], timezone="UTC") as m:
        await m.call("anchor_save", {"title": "Harbour", "content": "Fishing boats in the harbour at dawn."})
        out = await m.call("anchor_search", {"query": "boats at sunrise", "limit": 1})
        assert out["results"][0]["source"] == "harbour.md"

asyncio.run(main(sys.argv[1]))
"""


def test_no_process_level_socket_leaves_the_machine(tmp_path):
    """The same run seen by strace: catches sockets opened by native code (Chroma's Rust core, onnxruntime)."""
    import re
    import shutil
    import subprocess
    import sys

    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    trace = tmp_path / "trace.txt"
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("PPS_")}
    proc = subprocess.run([strace, "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o", str(trace),
                           sys.executable, str(script), str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=300, env=env)
    if proc.returncode != 0 and "ptrace" in proc.stderr:
        pytest.skip(f"strace cannot trace here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    outside = []
    for line in trace.read_text().splitlines():
        if "AF_INET" not in line:
            continue
        hosts = re.findall(r'inet_(?:addr|pton)\((?:AF_INET6?, )?"([^"]+)"', line)
        if not hosts or not all(ipaddress.ip_address(h).is_loopback for h in hosts):
            outside.append(line)
    assert outside == []
