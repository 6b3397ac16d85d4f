"""A full disk under a running server: Chroma's native calls (which can hang holding the GIL after a failed
compaction) never freeze the event loop or /health; a hung call answers 503 with a health line, and once
space is freed, search works again."""

import os
import subprocess
import threading
import time

import httpx
import pytest

from pps_core.testing.server import init_entity, pps_env, start_server


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MiB tmpfs (needs root to mount), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs and fill it")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (no CAP_SYS_ADMIN)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk, leave_kb: int):
    """Fill the file system, then give back ``leave_kb``; returns the filler file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave_kb * 1024))
    os.close(fd)
    return filler


def test_full_disk_never_freezes_the_server_and_search_recovers(small_disk):
    init_entity(small_disk, "lyra", "chroma,embeddings,mcp,http")
    server = start_server(small_disk, "--entity", "lyra", env=pps_env(small_disk, PPS_CHROMA_TIMEOUT_S="4"))
    try:
        for i in range(3):
            r = server.call("anchor_save", {"content": f"photo {i} about snow and tea", "title": f"p{i}"},
                            entity="lyra")
            assert r.json()["indexed"], r.text
        filler = fill(small_disk, 64)
        answers = []
        for i in range(3, 8):  # the file fits; Chroma's compaction fails on the way
            r = server.call("anchor_save", {"content": f"photo {i} about rain " * 50, "title": f"q{i}"},
                            entity="lyra", timeout=30)
            answers.append(r.status_code)
            assert r.status_code in (200, 503), r.text
        filler.unlink()  # space again

        searches, stalls = [], []

        def search():
            try:
                searches.append(server.call("anchor_search", {"query": "snow"}, entity="lyra", timeout=60))
            except httpx.HTTPError as exc:
                searches.append(exc)

        worker = threading.Thread(target=search)
        worker.start()
        while worker.is_alive():  # the liveness probe answers at once while the index works or hangs
            started = time.monotonic()
            try:
                assert httpx.get(f"{server.url}/health", timeout=3).json()["ok"]
            except httpx.TimeoutException:
                stalls.append(time.monotonic() - started)
            time.sleep(0.2)
        worker.join()
        assert not stalls, f"/health did not answer while anchor_search ran ({stalls})"
        first = searches[0]
        assert not isinstance(first, Exception), f"anchor_search never answered: {first!r}"
        assert first.status_code in (200, 503), first.text
        if first.status_code == 503:  # the index hung: a clear 503 and a health line, then it restarts
            assert "word-photo index" in first.json()["message"]
        deadline, found = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            r = server.call("anchor_search", {"query": "snow"}, entity="lyra", timeout=60)
            if r.status_code == 200:
                found = r.json()
                break
            time.sleep(0.5)
        assert found is not None, "search did not work again after space was freed"
        assert {"p0.md", "p1.md", "p2.md"} <= {x["source"] for x in found["results"]}
        health = server.call("pps_health", entity="lyra").json()
        assert health["layers"]["core_anchors"]["available"], health["layers"]["core_anchors"]
        listed = {x["source"] for x in server.call("anchor_search", {"query": "rain", "limit": 20},
                                                   entity="lyra").json()["results"]}
        assert listed >= {f"q{i}.md" for i, code in zip(range(3, 8), answers, strict=True) if code == 200}
    finally:
        server.kill()
