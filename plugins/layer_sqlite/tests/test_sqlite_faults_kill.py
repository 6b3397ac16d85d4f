"""kill -9 of the owning process in the middle of capture, store_summary, crystallize and anchor_save.

After each kill the stores open again, everything acknowledged is there, complete, exactly once, and no
half-written file or row exists. Random timing, a bounded number of rounds.
"""

import asyncio
import hashlib
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from pps_sqlite.testing import audit
from pps_turns.loadgen import run_load

from pps_core import Memory
from pps_core.settings import load_settings
from pps_core.testing.server import init_entity, pps_env, start_server

PLUGINS = ["sqlite", "crystals", "chroma", "embeddings"]

DRIVER = r'''
import asyncio, hashlib, random, sys
from pps_core import Memory
from pps_core.settings import load_settings

def sealed(text):
    return text + "\nSEAL " + hashlib.sha256(text.encode()).hexdigest()[:16]

async def main(home, round_no):
    memory = Memory(load_settings("faulty", home, plugins=@PLUGINS@, timezone="UTC"))
    async with memory:
        print("READY", flush=True)
        rnd = random.Random(round_no)
        i = 0
        while True:
            i += 1
            kind = rnd.choice(["capture", "capture", "batch", "summary", "crystal", "photo"])
            if kind == "capture":
                mid = f"r{round_no}-{i}"
                ack = await memory.call("store_message", {"content": "turn " + mid + " " + "x" * rnd.randint(1, 5000),
                                                          "author_name": "Jeff", "channel": "term", "message_id": mid})
                print("ACK turn", mid, ack["id"], flush=True)
            elif kind == "batch":
                mids = [f"r{round_no}-{i}-{k}" for k in range(rnd.randint(2, 30))]
                ans = await memory.call("store_messages", {"messages": [
                    {"content": "batch " + m, "author_name": "Lyra", "channel": "chat", "message_id": m} for m in mids]})
                for a in ans["acks"]:
                    print("ACK turn", a["message_id"], a["id"], flush=True)
            elif kind == "summary":
                batch = await memory.call("summarize_messages", {"limit": rnd.randint(2, 40)})
                if batch["message_ids"]:
                    s = await memory.call("store_summary", {"summary_text": f"summary r{round_no}-{i}",
                                                            "message_ids": batch["message_ids"]})
                    print("ACK summary", s["id"], s["message_count"], flush=True)
            elif kind == "crystal":
                ans = await memory.call("crystallize", {"content": sealed(f"crystal r{round_no}-{i} " + "c" * rnd.randint(1, 20000))})
                print("ACK crystal", ans["created"], flush=True)
            else:
                ans = await memory.call("anchor_save", {"content": sealed(f"photo r{round_no}-{i} " + "p" * rnd.randint(1, 3000)),
                                                        "title": f"moment r{round_no} {i}"})
                print("ACK photo", ans["saved"], flush=True)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
'''.replace("@PLUGINS@", repr(PLUGINS))

SEAL = re.compile(r"\nSEAL ([0-9a-f]{16})\n?$")


def is_sealed(text: str) -> bool:
    m = SEAL.search(text)
    return bool(m) and hashlib.sha256(text[:m.start()].encode()).hexdigest()[:16] == m.group(1)


def photo_body(path) -> str:
    text = path.read_text()
    return text.split("---\n", 2)[2].lstrip("\n") if text.startswith("---\n") else text


def drive_and_kill(home, script, round_no, rnd):
    proc = subprocess.Popen([sys.executable, str(script), str(home), str(round_no)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=pps_env(home.parent))
    acks, odd = [], []
    ready = threading.Event()

    def read():
        for line in proc.stdout:
            if line.startswith("READY"):
                ready.set()
            elif line.startswith("ACK ") and line.endswith("\n"):  # a line cut by the kill acknowledged nothing
                fields = line.split()[1:]
                if len(fields) == (2 if fields[0] in ("crystal", "photo") else 3):
                    acks.append(fields)
                else:
                    odd.append(line)

    reader = threading.Thread(target=read)
    reader.start()
    assert ready.wait(60), proc.stderr.read() if proc.poll() is not None else "driver did not start"
    # Let every kind of write get going first (on a loaded machine the first word-photo, which loads the
    # embedder, can take seconds), then kill at a random moment of the mixed writes that follow.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not {"photo", "crystal"} <= {a[0] for a in acks}:
        time.sleep(0.05)
    time.sleep(rnd.uniform(0.2, 1.5))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    reader.join()
    assert proc.returncode == -9, proc.stderr.read()
    proc.stderr.close()
    assert not odd, f"malformed acknowledgement lines: {odd!r}"
    return acks


def check_store(home, acked):
    """The store after a crash: opens, holds every acknowledged thing, nothing half-written."""
    conn = sqlite3.connect(home / "pps.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        by_mid = dict(conn.execute("SELECT message_id, id FROM messages"))
        for mid, rid in acked["turn"].items():
            assert by_mid.get(mid) == rid, (mid, rid, by_mid.get(mid))
        summaries = {sid: (count, start, end) for sid, count, start, end in
                     conn.execute("SELECT id, message_count, start_id, end_id FROM message_summaries")}
        marks = dict(conn.execute("SELECT summary_id, COUNT(*) FROM messages WHERE summary_id IS NOT NULL "
                                  "GROUP BY summary_id"))
    finally:
        conn.close()
    for sid, count in acked["summary"].items():
        assert summaries[sid][0] == count
    assert set(marks) <= set(summaries), "turns marked with a summary that does not exist"
    assert all(marks.get(sid) == c for sid, (c, _s, _e) in summaries.items()), "a summary without all its marks"
    crystals = [p for d in ("crystals", "crystals/archive") for p in (home / d).glob("crystal_*.md")]
    names = {p.name for p in crystals}
    assert set(acked["crystal"]) <= names
    for p in crystals:  # a crystal under a real name is always whole
        assert is_sealed(p.read_text()), p
    photos = {p.name: p for p in (home / "word_photos").glob("*.md")}
    assert set(acked["photo"]) <= set(photos)
    for p in photos.values():
        assert is_sealed(photo_body(p)), p


async def reopen_and_use(home, acked):
    async with Memory(load_settings("faulty", home, plugins=PLUGINS, timezone="UTC")) as memory:
        health = await memory.call("pps_health", {})
        assert health["ok"], health
        listing = await memory.call("anchor_list", {})
        assert listing["unreadable"] == []
        assert {p["filename"] for p in listing["word_photos"]} >= set(acked["photo"])
        if acked["photo"]:
            name = sorted(acked["photo"])[-1]
            title = "moment " + name.removesuffix(".md").removeprefix("moment-").replace("-", " ")
            found = await memory.call("anchor_search", {"query": title, "limit": 50})
            assert name in {r["source"] for r in found["results"]}
        await memory.call("store_message", {"content": "after the crash", "author_name": "Jeff", "channel": "t"})


def test_kill_9_of_a_memory_owner_mid_write_loses_nothing_acknowledged(tmp_path):
    home = tmp_path / "faulty"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    rnd = random.Random(9)
    acked = {"turn": {}, "summary": {}, "crystal": set(), "photo": set()}
    kinds = {k: 0 for k in acked}
    for round_no in range(4):
        for kind, *rest in drive_and_kill(home, script, round_no, rnd):
            kinds[kind] += 1
            if kind == "turn":
                acked["turn"][rest[0]] = int(rest[1])
            elif kind == "summary":
                acked["summary"][int(rest[0])] = int(rest[1])
            else:
                acked[kind].add(rest[0])
        check_store(home, acked)
        asyncio.run(reopen_and_use(home, acked))
    assert kinds["turn"] > 50 and kinds["summary"] >= 2 and kinds["crystal"] >= 2 and kinds["photo"] >= 2, kinds


def test_kill_9_of_the_http_server_under_load_loses_nothing_acknowledged(tmp_path):
    init_entity(tmp_path, "lyra", "sqlite,crystals,mcp,http")
    rnd = random.Random(99)
    seen = {}
    for _round in range(3):
        server = start_server(tmp_path, "--entity", "lyra")
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(run_load, server, "lyra", seconds=2.5, writers=3, readers=1, seed=_round)
            time.sleep(rnd.uniform(0.5, 2.0))
            server.kill()
            tally = future.result()
        tally.acked = {**seen, **tally.acked}
        result = audit(tmp_path / "lyra" / "pps.db", tally)
        assert [p for p in result["problems"] if "never sent" not in p] == []
        seen = tally.acked
        assert server.proc.returncode == -9
    server = start_server(tmp_path, "--entity", "lyra")  # the lock of a killed owner is free again
    try:
        assert server.call("pps_health", entity="lyra").json()["ok"]
        assert server.call("summary_stats", entity="lyra").json()["total_messages"] >= len(seen)
    finally:
        server.stop()
