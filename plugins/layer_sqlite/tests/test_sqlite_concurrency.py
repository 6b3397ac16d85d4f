"""Issue 26: the layers of one recall do not wait on each other, nor on a write (reader connections, WAL).

Before, every statement of the store ran on the one worker thread of its one connection: a recall's turn search
and its summary search took turns there, and both waited behind a write that waited for another process's lock.
"""

import asyncio
import sqlite3
import subprocess
import sys
import threading

from pps_sqlite.db import READERS

HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")  # another process's writer: holds the write lock until told
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


async def filled(make_memory, **settings):
    m = await make_memory(plugins=["sqlite"], **settings)
    await m.call("store_messages", {"messages": [
        {"content": f"turn {i}: we tuned the violin in the garden", "author_name": "Lyra" if i % 2 else "Jeff",
         "channel": "terminal"} for i in range(60)]})
    await m.call("store_summary", {"summary_text": "Lyra and Jeff tuned the violin in the garden", "start_id": 1,
                                   "end_id": 50})
    return m


async def test_recall_answers_while_a_write_waits_for_another_process(make_memory):
    """A capture waiting (in SQLite's busy handler, native code) for a lock another process holds does not hold
    up a search or the startup package: they read on connections of their own."""
    m = await filled(make_memory, sqlite={"busy_timeout_ms": 60_000}, recall={"layer_timeout_s": 5})
    db = m.layer("raw_capture").backend.db
    other = subprocess.Popen([sys.executable, "-I", "-c", HOLD_LOCK, str(db.path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "locked"
        write = asyncio.create_task(m.call("store_message", {"content": "the violin again", "author_name": "Jeff",
                                                             "channel": "terminal"}))
        await asyncio.sleep(0.3)
        assert not write.done()  # it waits for the other process
        out = await m.call("ambient_recall", {"context": "violin garden"})
        status = {s["layer"]: s["status"] for s in out["layers"]}
        assert status == {"raw_capture": "ok", "message_summaries": "ok"}, out["layers"]
        assert {r["layer"] for r in out["results"]} == {"raw_capture", "message_summaries"}
        startup = await m.call("ambient_recall", {"context": "startup"})
        assert all(s["status"] == "ok" for s in startup["layers"]), startup["layers"]
        assert not write.done()
    finally:
        other.stdin.write("\n")
        other.stdin.close()
        other.wait(30)
    ack = await asyncio.wait_for(write, 30)  # the lock released: the write goes through, acknowledged
    assert ack["stored"] and (await m.call("summary_stats"))["total_messages"] == 61


async def test_a_recalls_turn_and_summary_searches_read_at_the_same_time(make_memory):
    """Each connection's first full-text statement (both searches start with one) waits, inside SQLite (its trace
    callback), until one on another connection has started too: served one after another, they would never meet."""
    assert READERS >= 2
    m = await filled(make_memory)
    db = m.layer("raw_capture").backend.db
    meet = threading.Barrier(2)
    met: list[bool] = []
    waited: set[int] = set()

    def tracer(conn_id: int):
        def trace(sql: str) -> None:
            if "MATCH" not in sql or conn_id in waited or meet.broken:
                return
            waited.add(conn_id)
            try:
                meet.wait(timeout=2)  # under the layers' timeout (3 s): the recall ends after it
                met.append(True)
            except threading.BrokenBarrierError:
                pass

        return trace

    for k, conn in enumerate(db.connections()):
        conn.set_trace_callback(tracer(k))
    try:
        out = await m.call("ambient_recall", {"context": "violin garden"})
    finally:
        for conn in db.connections():
            conn.set_trace_callback(None)
    assert met == [True, True], "the two searches' statements never ran at the same time"
    assert {r["layer"] for r in out["results"]} == {"raw_capture", "message_summaries"}


async def test_a_lone_capture_writes_without_a_thread_hop_and_checkpoints_off_the_loop(make_memory, monkeypatch):
    """Issue 26: a one-turn capture paid the hop from the event loop to the writer thread and back, most of its cost
    beside a bare INSERT. With the writer idle and the lock free it writes on the loop's thread, in its one
    transaction; the WAL's checkpoint (an fsync) never runs there, nor holds up the writer: every few writes one
    runs on a connection and thread of its own, and the WAL is copied into the database."""
    from pps_sqlite import db as dbmod

    monkeypatch.setattr(dbmod, "CHECKPOINT_EVERY", 20)
    checkpointed: list[bool] = []
    plain = dbmod.Database._checkpoint

    def traced(self):
        checkpointed.append(threading.get_ident() == loop_thread)
        plain(self)

    monkeypatch.setattr(dbmod.Database, "_checkpoint", traced)
    m = await make_memory(plugins=["sqlite"])
    db = m.layer("raw_capture").backend.db
    loop_thread = threading.get_ident()
    seen: list[tuple[str, bool]] = []
    db.conn.set_trace_callback(lambda sql: seen.append((sql, threading.get_ident() == loop_thread)))
    for i in range(50):
        await m.call("store_message", {"content": f"turn {i}", "author_name": "Jeff", "channel": "terminal"})
        await asyncio.gather(*db._checkpoints)
    begins = [on_loop for sql, on_loop in seen if sql == "BEGIN IMMEDIATE"]  # one transaction per turn
    assert len(begins) == 50 and all(begins)
    assert checkpointed == [False, False]
    frames = sqlite3.connect(db.path).execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert frames[2] > 0 and (await m.call("summary_stats"))["total_messages"] == 50


async def test_a_capture_queued_behind_the_writer_thread_keeps_its_place(make_memory):
    """A write given to the writer thread first (here one that takes a while) is not overtaken by a capture that
    could have written inline: the capture goes after it, on the same thread."""
    m = await make_memory(plugins=["sqlite"])
    db = m.layer("raw_capture").backend.db
    order: list[str] = []

    def slow(conn):
        import time

        time.sleep(0.2)
        order.append("slow")

    first = asyncio.create_task(db.run(slow, db.conn))
    await asyncio.sleep(0.05)  # running on the writer thread now
    ack = await m.call("store_message", {"content": "after the slow one", "author_name": "Jeff", "channel": "t"})
    order.append("capture")
    await first
    assert order == ["slow", "capture"] and ack["stored"]


async def test_captures_in_a_row_leave_the_event_loop_to_others(make_memory):
    """A write done inline must still give the loop back: a task storing turns one after another (an import, a
    hook's batch) does not starve another request of the same process (on the writer thread every write awaited
    the thread, so others ran meanwhile)."""
    m = await make_memory(plugins=["sqlite"])
    ticks = 0
    stop = False

    async def other_request() -> None:
        nonlocal ticks
        while not stop:
            await asyncio.sleep(0)
            ticks += 1

    other = asyncio.create_task(other_request())
    await asyncio.sleep(0)
    start = ticks
    for i in range(50):
        await m.call("store_message", {"content": f"turn {i}", "author_name": "Jeff", "channel": "terminal"})
    stop = True
    await other
    assert ticks - start >= 50  # it ran between every two captures
