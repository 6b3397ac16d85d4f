"""The embedded graph (Kuzu) on a full disk, and after a crash.

A graph write on a nearly full disk is refused (503) before Kuzu can fail half-way; one that fails in
Kuzu anyway is a 503 (not a 500), and the graph takes no write until the server restarts, so nothing is
acknowledged into a database that lost its footing. Every acknowledged fact survives the restart. After a
crash (WAL replayed), deleting works (it crashed the process), and entities a cut write left without
their fact are gone.
"""

import asyncio
import os
import subprocess
import sys

import pytest

from pps_core import Memory
from pps_core.settings import load_settings
from pps_core.testing.server import init_entity, pps_env, start_server

PLUGINS = "graphiti,embeddings,mcp,http"


@pytest.fixture
def small_disk(tmp_path):
    """A 64 MiB tmpfs (needs root to mount), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs and fill it")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (no CAP_SYS_ADMIN)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk, leave_kb: int):
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    for chunk in (65536, 512):
        try:
            while True:
                os.write(fd, b"\0" * chunk)
        except OSError:
            pass
    os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave_kb * 1024))
    os.close(fd)
    return filler


def triplet(server, name: str):
    return server.call("texture_add_triplet", {"source": f"Keeper {name}", "relationship": "TENDS",
                                               "target": f"Lamp {name}"}, entity="lyra", timeout=60)


def check_after_restart(disk, acked: dict[str, str], env=None):
    server = start_server(disk, "--entity", "lyra", env=env, log_name="server2.log")
    try:
        for uuid, name in acked.items():
            out = server.call("texture_explore", {"entity_name": f"Keeper {name}", "depth": 1}, entity="lyra")
            assert out.status_code == 200, out.text
            assert uuid in {f["uuid"] for f in out.json()["facts"]}, (name, out.json())
        health = server.call("pps_health", entity="lyra").json()["layers"]["rich_texture"]
        assert health["available"], health
        assert health["counts"]["entities"] == 2 * health["counts"]["facts"], health  # no entity without its fact
        assert triplet(server, "after restart").status_code == 200
        gone = server.call("texture_delete", {"uuid": next(iter(acked))}, entity="lyra")
        assert gone.status_code == 200, gone.text
    finally:
        server.stop()
    assert "Traceback" not in server.log.read_text()


def test_nearly_full_disk_refuses_graph_writes_before_kuzu_fails(small_disk):
    init_entity(small_disk, "lyra", PLUGINS)
    server = start_server(small_disk, "--entity", "lyra")
    acked = {}
    try:
        for i in range(3):
            r = triplet(server, f"a{i}")
            assert r.status_code == 200, r.text
            acked[r.json()["uuid"]] = f"a{i}"
        filler = fill(small_disk, 8)
        for i in range(3):
            r = triplet(server, f"full{i}")
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "storage_unavailable" and "free" in r.json()["message"]
        filler.unlink()
        r = triplet(server, "freed")
        assert r.status_code == 200, r.text
        acked[r.json()["uuid"]] = "freed"
    finally:
        server.stop()
    assert "Traceback" not in server.log.read_text()
    check_after_restart(small_disk, acked)


def test_a_failed_graph_write_is_503_and_nothing_is_acknowledged_until_restart(small_disk):
    init_entity(small_disk, "lyra", PLUGINS)
    env = pps_env(small_disk, PPS_GRAPHITI_MIN_FREE_MB="0")  # no early refusal: let Kuzu hit the full disk
    server = start_server(small_disk, "--entity", "lyra", env=env)
    acked = {}
    try:
        for i in range(3):
            r = triplet(server, f"a{i}")
            acked[r.json()["uuid"]] = f"a{i}"
        filler = fill(small_disk, 8)
        codes = [triplet(server, f"full{i}").status_code for i in range(4)]
        assert set(codes) == {503}, codes  # was 500 (and the graph then acknowledged facts it later lost)
        filler.unlink()
        after = triplet(server, "freed")
        assert after.status_code == 503 and "restart" in after.json()["message"], after.text
        health = server.call("pps_health", entity="lyra").json()["layers"]["rich_texture"]
        assert not health["available"] and "restart" in health["detail"]
    finally:
        rc = server.stop()  # SIGTERM: the failed graph is not closed (closing it aborted the process)
    log = server.log.read_text()
    assert rc in (0, -15) and "terminate called" not in log and "Fatal Python error" not in log, (rc, log[-2000:])
    check_after_restart(small_disk, acked, env)


CRASH = """
import asyncio, os, sys
from pps_core import Memory
from pps_core.settings import load_settings

async def main(home):
    m = Memory(load_settings("graphy", home, plugins=["embeddings", "graphiti"], timezone="UTC"))
    await m.open()
    for i in range(3):
        await m.call("texture_add_triplet", {"source": f"Keeper {i}", "relationship": "TENDS", "target": f"Lamp {i}"})
    from graphiti_core.nodes import EntityNode
    from pps_core.timeutil import now_utc
    layer = m.layer("rich_texture")
    cut = EntityNode(name="Half written", group_id=layer.group_id, labels=["Entity"], created_at=now_utc(), summary="")
    await cut.generate_name_embedding(layer.graph.graphiti.embedder)
    await cut.save(layer.graph.driver)  # a write cut between a triplet's entities and its fact
    # No close, and the engine process killed too (a power cut): the WAL is replayed at the next open. (The
    # server's own exit alone has the engine close the graph cleanly.)
    os.kill(layer.graph.kuzu.engine.proc.pid, 9)
    layer.graph.kuzu.engine.proc.wait()
    os._exit(0)

asyncio.run(main(sys.argv[1]))
"""


async def test_after_a_crash_deletes_work_and_no_entity_is_left_without_its_fact(tmp_path):
    home = tmp_path / "graphy"
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    done = subprocess.run([sys.executable, str(script), str(home)], capture_output=True, text=True, timeout=300,
                          env=pps_env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert os.path.getsize(home / "graphiti" / "graph.kuzu.wal") > 0
    probe = """
import asyncio, sys
from pps_core import Memory
from pps_core.settings import load_settings

async def main(home):
    async with Memory(load_settings("graphy", home, plugins=["embeddings", "graphiti"], timezone="UTC")) as m:
        counts = (await m.call("pps_health"))["layers"]["rich_texture"]["counts"]
        assert (await m.call("texture_search", {"query": "Keeper 1 tends lamp"}))["results"]
        fact = (await m.call("texture_explore", {"entity_name": "Keeper 1", "depth": 1}))["facts"][0]
        await m.call("texture_delete", {"uuid": fact["uuid"]})
        entity = await m.call("texture_explore", {"entity_name": "Keeper 2", "depth": 1})
        await m.call("texture_delete", {"uuid": entity["uuid"]})
        print(counts["entities"], counts["facts"])

asyncio.run(main(sys.argv[1]))
"""
    (tmp_path / "probe.py").write_text(probe)
    out = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(home)], capture_output=True, text=True,
                         timeout=300, env=pps_env(tmp_path))
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"  # was -11 (SIGSEGV) on delete
    entities, facts = map(int, out.stdout.split()[-2:])
    assert (entities, facts) == (6, 3)  # "Half written" is gone
    async with Memory(load_settings("graphy", home, plugins=["embeddings", "graphiti"], timezone="UTC")):
        pass
    for p in (home / "graphiti").iterdir():
        assert p.stat().st_mode & 0o777 == 0o600, p
    assert (home / "graphiti").stat().st_mode & 0o777 == 0o700
    await asyncio.sleep(0)
