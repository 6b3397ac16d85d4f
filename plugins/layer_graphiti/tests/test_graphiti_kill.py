"""kill -9 of the process that owns the graph, in the middle of texture_add_triplet.

After each kill the Kuzu graph opens again, every acknowledged fact is found (explore and search), and
whatever the kill cut in half (an entity without its fact) breaks neither search nor the next write.
"""

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time

from pps_core import Memory
from pps_core.settings import load_settings
from pps_core.testing.server import pps_env

PLUGINS = ["sqlite", "embeddings", "graphiti"]

DRIVER = r'''
import asyncio, sys
from pps_core import Memory
from pps_core.settings import load_settings

async def main(home, round_no):
    async with Memory(load_settings("graphy", home, plugins=@PLUGINS@, timezone="UTC")) as memory:
        print("READY", flush=True)
        i = 0
        while True:
            i += 1
            ans = await memory.call("texture_add_triplet", {
                "source": f"Keeper{round_no}x{i}", "relationship": "TENDS", "target": f"Lamp{round_no}x{i % 7}",
                "fact": f"Keeper{round_no}x{i} tends lamp {round_no}x{i % 7} at the lighthouse"})
            print("ACK", ans["uuid"], f"Keeper{round_no}x{i}", flush=True)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
'''.replace("@PLUGINS@", repr(PLUGINS))


def drive_and_kill(home, script, round_no, rnd):
    proc = subprocess.Popen([sys.executable, str(script), str(home), str(round_no)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=pps_env(home.parent))
    acks, ready = [], threading.Event()

    def read():
        for line in proc.stdout:
            if line.startswith("READY"):
                ready.set()
            elif line.startswith("ACK ") and line.endswith("\n") and len(line.split()) == 3:
                acks.append(line.split()[1:])

    reader = threading.Thread(target=read)
    reader.start()
    assert ready.wait(90), proc.stderr.read() if proc.poll() is not None else "driver did not start"
    deadline = time.monotonic() + 60  # the first write loads the model: slow on a busy machine
    while not acks and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(rnd.uniform(0.3, 1.5))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    reader.join()
    proc.stderr.close()
    assert proc.returncode == -9
    return acks


async def reopen_and_check(home, acked, round_no):
    async with Memory(load_settings("graphy", home, plugins=PLUGINS, timezone="UTC")) as memory:
        health = await memory.call("pps_health", {})
        assert health["ok"], health["layers"]["rich_texture"]
        assert health["layers"]["rich_texture"]["counts"]["facts"] >= len(acked)
        for uuid, source in acked.items():
            out = await memory.call("texture_explore", {"entity_name": source, "depth": 1})
            assert uuid in {f["uuid"] for f in out["facts"]}, (uuid, source)
        uuid, source = list(acked.items())[-1]
        found = await memory.call("texture_search", {"query": f"{source} tends lamp", "limit": 10})
        assert uuid in {r["metadata"].get("uuid") or r["source"] for r in found["results"]}, found["results"][:3]
        assert (await memory.call("texture_search", {"query": "who tends the lamps at the lighthouse?"}))["results"]
        after = await memory.call("texture_add_triplet", {"source": f"Keeper{round_no}x1", "relationship": "REPAIRS",
                                                          "target": "Fog horn"})
        assert after["created"]


def test_kill_9_mid_texture_add_triplet_loses_no_acknowledged_fact(tmp_path):
    home = tmp_path / "graphy"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    rnd = random.Random(7)
    acked: dict[str, str] = {}
    for round_no in range(3):
        acks = drive_and_kill(home, script, round_no, rnd)
        assert acks, f"round {round_no}: nothing was acknowledged before the kill"
        acked.update({uuid: source for uuid, source in acks})
        asyncio.run(reopen_and_check(home, acked, round_no))
    assert len(acked) >= 6
