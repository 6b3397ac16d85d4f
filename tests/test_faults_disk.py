"""Disk full (RLIMIT_FSIZE in the server), a read-only home, a layer whose backend is down: clear errors over
HTTP, no traceback, no corruption, the rest keeps answering."""

import hashlib
import os
import resource
import shutil
import sqlite3
import subprocess

import pytest

from pps_core.testing.server import init_entity, pps, start_server

LIMIT = 3 * 1024 * 1024  # no file of the server may grow past 3 MiB


def limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def tree_hashes(home):
    out = {}
    for root, _dirs, files in os.walk(home):
        for name in files:
            p = os.path.join(root, name)
            out[os.path.relpath(p, home)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def test_disk_full_is_a_clear_error_and_corrupts_nothing(tmp_path):
    home = init_entity(tmp_path, "lyra", "sqlite,crystals,mcp,http")
    server = start_server(tmp_path, "--entity", "lyra", preexec_fn=limit_file_size)
    acked, full = [], None
    try:
        for i in range(80):  # 80 x 90 KB turns: the WAL hits the limit on the way
            r = server.call("store_message", {"content": f"turn {i} " + "w" * 90_000, "author_name": "J",
                                              "channel": "c", "message_id": f"m{i}"}, entity="lyra")
            if r.status_code != 200:
                full = r
                break
            acked.append((f"m{i}", r.json()["id"]))
        assert full is not None and full.status_code == 503, "the file size limit was never hit"
        assert full.json()["error"] == "storage_unavailable" and "cannot be written" in full.json()["message"]
        big = server.call("crystallize", {"content": "c" * 199_000}, entity="lyra")  # fits, under 3 MiB
        assert big.status_code in (200, 503)
        assert server.call("raw_search", {"query": "turn"}, entity="lyra").status_code == 200  # reads go on
        assert server.call("ambient_recall", {"context": "startup"}, entity="lyra").status_code == 200
    finally:
        server.stop()
    assert "Traceback" not in server.log.read_text()
    assert not [p for p in (home / "crystals").iterdir() if p.name.endswith(".tmp")]
    conn = sqlite3.connect(home / "pps.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = dict(conn.execute("SELECT message_id, id FROM messages"))
    finally:
        conn.close()
    assert all(stored.get(mid) == rid for mid, rid in acked)
    server = start_server(tmp_path, "--entity", "lyra")  # space again: it goes on where it stopped
    try:
        assert server.call("store_message", {"content": "after", "author_name": "J", "channel": "c"},
                           entity="lyra").status_code == 200
    finally:
        server.stop()


@pytest.fixture
def immutable():
    """Make paths read-only even for root (chattr +i); undone after the test."""
    if shutil.which("chattr") is None or os.geteuid() != 0:
        pytest.skip("needs root and chattr to make a home read-only for root")
    done = []

    def freeze(*paths):
        for p in paths:
            if subprocess.run(["chattr", "+i", str(p)], capture_output=True).returncode != 0:
                pytest.skip("this file system does not support chattr +i")
            done.append(p)

    yield freeze
    for p in reversed(done):
        subprocess.run(["chattr", "-i", str(p)], check=False)


def test_read_only_home_refuses_clearly_and_changes_nothing(tmp_path, immutable):
    home = init_entity(tmp_path, "lyra", "sqlite,crystals,mcp,http")
    server = start_server(tmp_path, "--entity", "lyra")
    try:
        assert server.call("store_message", {"content": "kept", "author_name": "J", "channel": "c"},
                           entity="lyra").status_code == 200
        immutable(home / "crystals")  # read-only while serving: a crystal cannot be written
        r = server.call("crystallize", {"content": "a crystal"}, entity="lyra")
        assert r.status_code == 503 and r.json()["error"] == "storage_unavailable", r.text
        assert not list((home / "crystals").glob("crystal_*.md"))
        assert server.call("raw_search", {"query": "kept"}, entity="lyra").json()["count"] == 1
    finally:
        server.stop()
    assert "Traceback" not in server.log.read_text()
    paths = [home] + [os.path.join(r, n) for r, dirs, files in os.walk(home) for n in dirs + files]
    immutable(*[p for p in paths if p != home / "crystals"])
    before = tree_hashes(home)
    out = pps(tmp_path, "serve", "http", "--entity", "lyra", "--port", "0", check=False, timeout=60)
    assert out.returncode == 2 and "the entity's home cannot be written" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    call = pps(tmp_path, "call", "--entity", "lyra", "raw_search", '{"query": "kept"}', check=False)
    assert call.returncode == 2 and "cannot be written" in call.stderr and "Traceback" not in call.stderr
    assert tree_hashes(home) == before


def test_a_layer_whose_backend_is_down_is_reported_and_the_rest_answers(tmp_path):
    home = init_entity(tmp_path, "lyra", "sqlite,crystals,chroma,embeddings,mcp,http")
    (home / "chroma").write_text("not a directory: the index cannot open")
    server = start_server(tmp_path, "--entity", "lyra")
    try:
        call = server.call
        assert call("store_message", {"content": "the lighthouse door", "author_name": "J", "channel": "c"},
                    entity="lyra").status_code == 200
        assert call("crystallize", {"content": "lighthouse crystal"}, entity="lyra").status_code == 200
        health = call("pps_health", entity="lyra").json()
        assert health["ok"] is False and health["layers"]["core_anchors"]["available"] is False
        assert health["layers"]["raw_capture"]["available"] and health["layers"]["crystallization"]["available"]
        recall = call("ambient_recall", {"context": "lighthouse"}, entity="lyra")
        assert recall.status_code == 200
        layers = {r["layer"] for r in recall.json()["results"]}
        assert {"raw_capture", "crystallization"} <= layers
        assert "core_anchors" in recall.json()["text"]  # its section says it is unavailable
        startup = call("ambient_recall", {"context": "startup"}, entity="lyra")
        assert startup.status_code == 200 and "lighthouse door" in startup.json()["text"]
        save = call("anchor_save", {"content": "x", "title": "t"}, entity="lyra")
        assert save.status_code == 503 and save.json()["error"] == "unavailable"
    finally:
        server.stop()
    assert "Traceback" not in server.log.read_text()
