"""The SQLite file itself: rows written by plain SQL or an older version, the schema's migrations, the file's mode,
and what a copy of the file holds after forgetting (moved from the turn suite: only this store has the file)."""

import gzip
import json
import sqlite3
import tarfile

PLUGINS = ["sqlite"]


def nested(depth):
    root = cur = {}
    for _ in range(depth - 1):
        cur["k"] = {}
        cur = cur["k"]
    return root


async def test_turns_written_by_plain_sql_are_searchable_and_normalised(make_memory):
    m = await make_memory(plugins=PLUGINS)
    path = m.home / "pps.db"
    other = sqlite3.connect(path)
    other.execute("INSERT INTO messages (content, author_name, channel, created_at) VALUES "
                  "('an imported note about lighthouses', 'Importer', 'email:x', '2026-01-26 09:15:00+02:00')")
    other.commit()
    other.close()
    found = await m.call("raw_search", {"query": "lighthouses"})
    assert found["results"][0]["author_name"] == "Importer"
    assert found["results"][0]["created_at"] == "2026-01-26T07:15:00.000Z"


async def test_schema_is_versioned_and_reopens(make_memory, pps_home):
    m = await make_memory("e", home=pps_home / "e", plugins=PLUGINS)
    await m.call("store_message", {"content": "persisted", "author_name": "A", "channel": "c"})
    await m.close()
    conn = sqlite3.connect(pps_home / "e" / "pps.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    again = await make_memory("e", home=pps_home / "e", plugins=PLUGINS)
    assert (await again.call("raw_search", {"query": "persisted"}))["count"] == 1


async def test_database_file_is_private(make_memory, pps_home):
    m = await make_memory(plugins=PLUGINS)
    assert (m.home / "pps.db").stat().st_mode & 0o777 == 0o600
    assert m.home.stat().st_mode & 0o777 == 0o700


READS = [("ambient_recall", {"context": "startup"}), ("ambient_recall", {"context": "lighthouse"}),
         ("ambient_recall", {"context": "startup", "budget": 2000}), ("raw_search", {"query": "lighthouse"}),
         ("summarize_messages", {}), ("get_turns_since_summary", {}), ("get_conversation_context", {"turns": 20}),
         ("get_turns_since", {"timestamp": "2000-01-01"}), ("get_turns_around", {"timestamp": "2026-01-01"}),
         ("summary_stats", {}), ("pps_health", {}),
         ("poll_channels", {"consumer_key": "k", "channel": "other"})]


async def read_everything(memory):
    for name, params in READS:
        await memory.call(name, params)  # raises on a 500-class failure


async def test_rows_stored_by_an_older_version_never_break_a_read(make_memory):
    memory = await make_memory(plugins=["sqlite"], timezone="America/Chicago")
    await memory.call("store_message", {"content": "the lighthouse keeper", "author_name": "J", "channel": "c"})
    db = memory.home / "pps.db"
    conn = sqlite3.connect(db)
    deep = "[" * 5000 + "]" * 5000
    rows = [("deep lighthouse", json.dumps(nested(300)), "2026-01-02T00:00:00.000Z"),
            ("deeper lighthouse", deep, "2026-01-02T00:01:00.000Z"),
            ("edge lighthouse", "{}", "0001-01-01T00:00:00.000Z"),
            ("late lighthouse", "{}", "9999-12-31T23:59:59.000Z"),
            ("garbled lighthouse", "{not json", "2026-01-02T00:02:00.000Z")]
    with conn:
        for content, meta, at in rows:
            conn.execute("INSERT INTO messages (content, author_name, channel, created_at, metadata) "
                         "VALUES (?, 'old', 'c', ?, ?)", (content, at, meta))
    conn.close()
    await read_everything(memory)
    out = await memory.call("ambient_recall", {"context": "startup"})
    for content, _meta, _at in rows:
        assert content in out["text"]


async def test_migration_adds_time_indexes_to_an_existing_store(make_memory, pps_home):
    import sqlite3

    from pps_sqlite.schema import MIGRATIONS, _split

    home = pps_home / "old"
    home.mkdir(parents=True)
    conn = sqlite3.connect(home / "pps.db")
    for version in (1, 2):
        for stmt in _split(MIGRATIONS[version - 1]):
            conn.execute(stmt)
    conn.execute("PRAGMA user_version = 2")
    conn.execute("INSERT INTO messages (content, author_name, channel, created_at) VALUES "
                 "('new', 'J', 'c', '2026-02-20T12:00:00.000Z'), ('old', 'J', 'c', '2026-01-20T12:00:00.000Z')")
    conn.commit()
    conn.close()
    m = await make_memory("old", home=home, plugins=["sqlite"])
    db = m.require_layer("raw_capture").backend.db
    plan = await db.run(lambda c: " ".join(r[3] for r in c.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM messages WHERE summary_id IS NULL ORDER BY created_at DESC, id DESC "
        "LIMIT 5")), db.conn)
    assert "idx_messages_unsummarized_time" in plan and "TEMP B-TREE" not in plan
    batch = await m.call("summarize_messages", {"limit": 1})
    assert [t["content"] for t in batch["messages"]] == ["old"]


SECRET = "zebrapassword4417"


async def seeded(make_memory, **settings):
    m = await make_memory(plugins=["sqlite"], **settings)
    await m.call("store_messages", {"messages": [
        {"content": "we talked about the garden", "author_name": "Jeff", "channel": "terminal:a",
         "created_at": "2026-01-26T10:00:00Z"},
        {"content": f"my password is {SECRET} do not keep it", "author_name": "Jeff", "channel": "terminal:a",
         "created_at": "2026-01-26T10:01:00Z"},
        {"content": "the garden needs water", "author_name": "Lyra", "channel": "discord:r",
         "created_at": "2026-01-26T10:02:00Z"}]})
    return m


async def test_a_backup_after_forgetting_does_not_hold_the_content(make_memory, tmp_path):
    m = await seeded(make_memory)
    for i in range(200):  # enough pages that deleted text could survive in free pages or old FTS segments
        await m.call("store_message", {"content": f"filler turn {i} " + "lorem ipsum " * 20, "author_name": "J",
                                       "channel": "c"})
    await m.call("forget_turns", {"ids": [2]})
    (m.home / "pps.toml").write_text('entity = "testentity"\n')  # a home as `pps init` leaves it
    (m.home / "backups").mkdir(exist_ok=True)  # the entity's backups folder
    archive = m.home / "backups" / "after.tar.gz"
    out = await m.call("pps_backup", {"path": str(archive)})
    raw = gzip.decompress(open(archive, "rb").read())
    assert SECRET.encode() not in raw and out["files"] > 0
    with tarfile.open(archive) as tar:
        assert any(n.endswith("pps.db") for n in tar.getnames())
    assert b"garden needs water" in raw  # the rest is there
