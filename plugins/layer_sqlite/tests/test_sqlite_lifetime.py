"""A lifetime of turns (issue 19): the startup path reads no more when history grows.

Two proofs on the real SQLite file: every statement the startup package and the health line run is planned
on an index (EXPLAIN QUERY PLAN: no SCAN except of the partial index of unsummarized turns, which are the
items the package shows), and the SQLite virtual machine executes as many instructions for 6,600 turns of
history as for 600 (a progress handler counts them).
"""

import re
import sqlite3

import pytest
from pps_sqlite import schema

#: The one scan the startup package may do: the partial index holding only the unsummarized turns it shows.
ALLOWED_SCAN = re.compile(r"^SCAN (messages|m) USING (COVERING )?INDEX idx_messages_unsummarized\w*\b|^SCAN CONSTANT ROW$"
                          # the newest summaries by time (LIMIT walks the span index from its end); the partial
                          # index of summaries flagged for rewrite holds only those
                          r"|^SCAN message_summaries USING INDEX idx_summaries_(span|rewrite)$"
                          # read cursors: one row per reader (health counts them for the backup manifest)
                          r"|^SCAN read_cursors( USING COVERING INDEX \w+)?$")
#: A table walked in rowid order and stopped by LIMIT reads only what it returns.
NEWEST_BY_ID = re.compile(r"ORDER BY id (ASC |DESC )?LIMIT", re.I)


async def grow(m, turns: int, keep_unsummarized: int = 300, start: int = 0) -> None:
    """Store ``turns`` more turns on two channels and summarize all but the newest ``keep_unsummarized``."""
    for k in range(start, start + turns, 500):
        await m.call("store_messages", {"messages": [
            {"content": f"turn {i} about the garden and the kitchen light", "author_name": "Lyra" if i % 2 else "Jeff",
             "channel": "terminal" if i % 3 else "discord", "created_at": f"2026-01-{1 + i % 28:02d}T10:00:00Z"}
            for i in range(k, min(start + turns, k + 500))]})
    stats = await m.call("summary_stats")
    first = stats["summarized_count"] + 1
    last = stats["total_messages"] - keep_unsummarized
    for a in range(first, last + 1, 50):
        await m.call("store_summary", {"summary_text": f"turns {a} onwards", "start_id": a,
                                       "end_id": min(a + 49, last)})


async def startup_calls(m) -> None:
    await m.call("ambient_recall", {"context": "startup"})
    await m.call("ambient_recall", {"context": "startup", "consumer_key": "reader", "channel": "terminal",
                                    "budget": 6000})
    await m.call("summary_stats")  # counts as the health line and upkeep read them


def traced(m) -> tuple[sqlite3.Connection, list[str]]:
    """Every statement of the writer's and the readers' connections; the writer's connection (for EXPLAIN)."""
    db = m.layer("raw_capture").backend.db
    seen: list[str] = []
    for c in db.connections():
        c.set_trace_callback(seen.append)
    return db.conn, seen


def untraced(m) -> None:
    for c in m.layer("raw_capture").backend.db.connections():
        c.set_trace_callback(None)


def progress(m, handler) -> None:
    """``handler`` every 100 SQLite VM instructions on every connection of the database (None: no more)."""
    for c in m.layer("raw_capture").backend.db.connections():
        c.set_progress_handler(handler, 100)


async def test_startup_statements_are_planned_on_indexes(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await grow(m, 1200)
    await m.call("poll_channels", {"consumer_key": "reader", "channel": "terminal"})
    await m.call("store_message", {"content": "unread from discord", "author_name": "Jeff", "channel": "discord"})
    conn, seen = traced(m)
    await m.call("ambient_recall", {"context": "startup"})
    await m.call("ambient_recall", {"context": "startup", "consumer_key": "reader", "channel": "terminal"})
    await m.call("summary_stats")
    await m.call("get_turns_since_summary", {"channel": "discord", "limit": 5})
    untraced(m)
    statements = [s for s in dict.fromkeys(seen) if re.match(r"\s*(SELECT|UPDATE|DELETE|WITH)\b", s, re.I)]
    assert len(statements) >= 4, statements
    scans = []
    for sql in statements:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
        by_id = NEWEST_BY_ID.search(sql) and not any("TEMP B-TREE" in step for step in plan)
        scans += [(sql, step) for step in plan
                  if step.startswith("SCAN") and not ALLOWED_SCAN.match(step) and not (by_id and len(plan) == 1)]
        if re.search(r"summary_id IS NULL", sql) and not sql.lstrip().upper().startswith("UPDATE"):
            # unsummarized turns are the newest few: any other index walks a channel's whole history
            scans += [(sql, step) for step in plan if "idx_messages_unsummarized" not in step
                      and re.match(r"(SCAN|SEARCH) (messages|m)\b", step)]
    assert scans == [], "full scans on the startup path:\n" + "\n".join(f"{s}\n  -> {p}" for s, p in scans)


async def test_startup_work_does_not_grow_with_history(make_memory):
    """Counted in SQLite VM instructions (deterministic), not in milliseconds."""
    m = await make_memory(plugins=["sqlite"])
    await grow(m, 600)
    await m.call("poll_channels", {"consumer_key": "reader", "channel": "terminal"})

    async def cost() -> int:
        ticks = [0]

        def tick():
            ticks[0] += 1
            return 0

        await startup_calls(m)  # warm: prepared statements, caches
        progress(m, tick)
        try:
            await startup_calls(m)
        finally:
            progress(m, None)
        return ticks[0] * 100

    small = await cost()
    await grow(m, 6000, start=600)  # ten times the history, the same 300 unsummarized turns
    large = await cost()
    assert large < small * 1.15, f"startup work grew from {small} to {large} VM instructions with 11x the history"


def test_migration_3_counts_match_and_triggers_keep_them(tmp_path):
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2):  # a database as the previous release left it
        for stmt in schema._split(schema.MIGRATIONS[version - 1]):
            conn.execute(stmt)
        conn.execute(f"PRAGMA user_version = {version}")
    conn.executemany("INSERT INTO messages (content, author_name, channel, created_at) VALUES (?, ?, 'c', "
                     "'2026-01-01T00:00:00.000Z')", [(f"t{i}", "Lyra" if i % 2 else "Jeff Brandi") for i in range(20)])
    conn.execute("INSERT INTO message_summaries (summary_text, start_id, end_id, message_count) VALUES ('s', 1, 5, 5)")
    conn.execute("UPDATE messages SET summary_id = 1 WHERE id <= 5")
    conn.execute("UPDATE messages SET ingested_at = 'x' WHERE id <= 8")
    assert schema.migrate(conn) == len(schema.MIGRATIONS) >= 3

    def check():
        got = dict(conn.execute("SELECT name, n FROM counters"))
        real = conn.execute("SELECT (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM messages WHERE "
                            "summary_id IS NULL), (SELECT COUNT(*) FROM messages WHERE ingested_at IS NULL), "
                            "(SELECT COUNT(*) FROM message_summaries)").fetchone()
        assert (got["messages"], got["unsummarized"], got["uningested"], got["summaries"]) == real
        authors = {r[0] for r in conn.execute("SELECT name FROM authors")}
        assert authors == {r[0] for r in conn.execute("SELECT DISTINCT author_name FROM messages")} | authors

    check()
    assert {r[0] for r in conn.execute("SELECT name FROM authors")} == {"Lyra", "Jeff Brandi"}
    conn.execute("INSERT INTO messages (content, author_name, channel, created_at) VALUES ('new', 'Caia', 'c', "
                 "'2026-01-02T00:00:00.000Z')")
    conn.execute("INSERT INTO message_summaries (summary_text, start_id, end_id, message_count) VALUES ('s2', 6, 9, 4)")
    conn.execute("UPDATE messages SET summary_id = 2 WHERE id BETWEEN 6 AND 9")
    conn.execute("UPDATE messages SET summary_id = 2 WHERE id = 9")  # no change of state: no change of count
    conn.execute("UPDATE messages SET ingested_at = 'y' WHERE id BETWEEN 5 AND 12")
    conn.execute("DELETE FROM messages WHERE id IN (3, 15)")
    conn.execute("DELETE FROM message_summaries WHERE id = 2")
    check()
    assert "Caia" in {r[0] for r in conn.execute("SELECT name FROM authors")}


def _fts_db(path, common_turns: int):
    """Turns about the garden (common), a few about a rare violin, one about both."""
    conn = sqlite3.connect(path, isolation_level=None)
    schema.migrate(conn)
    rows = [(f"the garden needs water {i}", "Lyra", "c", "2026-01-01T00:00:00.000Z") for i in range(common_turns)]
    rows[len(rows) // 2] = ("the violin sounds lovely", "Jeff", "c", "2026-01-01T00:00:00.000Z")
    rows[len(rows) // 3] = ("a violin in the garden at dusk", "Jeff", "c", "2026-01-01T00:00:00.000Z")
    rows[len(rows) // 4] = ("violin strings again", "Jeff", "c", "2026-01-01T00:00:00.000Z")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO messages (content, author_name, channel, created_at) VALUES (?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    return conn


def _vm_steps(conn, fn) -> int:
    ticks = [0]

    def tick():
        ticks[0] += 1
        return 0

    conn.set_progress_handler(tick, 100)
    try:
        fn()
    finally:
        conn.set_progress_handler(None, 100)
    return ticks[0] * 100


def test_bounded_lexical_pass_finds_the_selective_turns_and_its_work_does_not_grow(tmp_path):
    from pps_sqlite import lexical

    terms = ["garden", "violin"]
    work = {}
    for n in (1_000, 10_000):
        conn = _fts_db(tmp_path / f"{n}.db", n)
        exhaustive = lexical.bm25_scores(conn, terms, 10)
        df = lexical.DocFreq()
        bounded = lexical.bm25_bounded(conn, terms, 10, None, 200, df)
        assert max(bounded, key=bounded.get) == max(exhaustive, key=exhaustive.get)
        both = conn.execute("SELECT id FROM messages WHERE content LIKE 'a violin in the garden%'").fetchone()[0]
        assert bounded[both] == pytest.approx(exhaustive[both])  # the turn with every term keeps its full score
        violins = {r[0] for r in conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'violin'")}
        assert violins <= set(bounded)  # every turn with the selective term is a candidate
        assert lexical.bm25_bounded(conn, terms, 10, None, 100_000, df) == exhaustive  # under budget: exhaustive
        work[n] = (_vm_steps(conn, lambda c=conn: lexical.bm25_scores(c, terms, 10)),
                   _vm_steps(conn, lambda c=conn, d=df: lexical.bm25_bounded(c, terms, 10, None, 200, d)))
        conn.close()
    (ex_small, ours_small), (ex_large, ours_large) = work[1_000], work[10_000]
    assert ex_large > 5 * ex_small  # the exhaustive OR ranks every garden turn
    assert ours_large < 1.5 * ours_small, work  # the bounded pass does not


def test_a_word_no_turn_holds_does_not_empty_the_bounded_pass(tmp_path):
    """A question with a word nobody ever said ("xylophone", a typo) beside common ones: the bounded pass still
    ranks the turns holding the common words (their AND, the newest of their OR), as the exhaustive pass does;
    the absent word used to be "chosen" as the rarest, choose nothing, and empty the AND of every word."""
    from pps_sqlite import lexical

    conn = _fts_db(tmp_path / "x.db", 2_000)
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO messages (content, author_name, channel, created_at) VALUES (?, ?, ?, ?)",
                     [(f"water the garden {i}", "Lyra", "c", "2026-01-01T00:00:00.000Z") for i in range(600)]
                     + [("water, water: the garden, the garden", "Jeff", "c", "2026-01-01T00:00:00.000Z")])
    conn.execute("COMMIT")
    terms = ["garden", "water", "xylophone"]
    exhaustive = lexical.bm25_scores(conn, terms, 10)
    bounded = lexical.bm25_bounded(conn, terms, 10, None, 200, lexical.DocFreq())
    assert bounded, "the common words' turns are candidates"
    assert max(bounded, key=bounded.get) == max(exhaustive, key=exhaustive.get)


async def test_summary_search_does_not_recheck_every_summary_for_a_vector(make_memory):
    """A summary search looks for summaries without a vector above the last one known to have one."""
    m = await make_memory(plugins=["sqlite", "embeddings"])
    await grow(m, 4_300, keep_unsummarized=10)  # 86 summaries, embedded at the first search
    index = m.layer("raw_capture").domain.summary_search
    await m.call("search_summaries", {"query": "turns onwards"})
    _conn, seen = traced(m)
    await m.call("search_summaries", {"query": "turns onwards"})
    untraced(m)
    looks = [s for s in seen if "NOT EXISTS" in s]
    assert looks and all(f"s.id > {index.floor[1]}" in s for s in looks), looks
    assert index.floor[1] == (await m.call("summary_stats"))["summary_count"]


async def test_capture_work_does_not_grow_with_summaries(make_memory):
    """Storing a turn checks whether it lands inside a summary's span: from the span index, not a scan."""
    m = await make_memory(plugins=["sqlite"])

    async def cost() -> int:
        ticks = [0]

        def tick():
            ticks[0] += 1
            return 0

        progress(m, tick)
        try:
            for i in range(10):
                await m.call("store_message", {"content": f"a new turn {i} about the violin", "author_name": "Lyra",
                                               "channel": "terminal"})
        finally:
            progress(m, None)
        return ticks[0] * 100

    await grow(m, 600)
    small = await cost()
    await grow(m, 6000, start=600)  # 20 times the summaries
    large = await cost()
    assert large < small * 1.15, f"capture work grew from {small} to {large} VM instructions"


def test_bounded_summary_search_keeps_the_best_and_its_work_does_not_grow(tmp_path):
    from pps_sqlite import summaries

    work = {}
    for n in (1_000, 10_000):
        conn = sqlite3.connect(tmp_path / f"s{n}.db", isolation_level=None)
        conn.row_factory = sqlite3.Row
        schema.migrate(conn)
        texts = [f"Lyra and Jeff talked about the garden, day {i}." for i in range(n)]
        texts[n // 2] = "Jeff tuned the violin in the garden shed."
        texts[n // 3] = "A violin lesson, long and slow."
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO message_summaries (summary_text, start_id, end_id, message_count) "
                         "VALUES (?, 1, 1, 1)", [(t,) for t in texts])
        conn.execute("COMMIT")
        exhaustive = summaries.search(conn, "the violin in the garden", 5, budget=10**9)
        bounded = summaries.search(conn, "the violin in the garden", 5, budget=200)
        assert [s["id"] for s in bounded][:2] == [s["id"] for s in exhaustive][:2]
        assert {s["summary_text"] for s in bounded[:2]} == {texts[n // 2], texts[n // 3]}
        work[n] = (_vm_steps(conn, lambda c=conn: summaries.search(c, "the violin in the garden", 5, budget=10**9)),
                   _vm_steps(conn, lambda c=conn: summaries.search(c, "the violin in the garden", 5, budget=200)))
        conn.close()
    (ex_small, ours_small), (ex_large, ours_large) = work[1_000], work[10_000]
    assert ex_large > 5 * ex_small
    assert ours_large < 1.5 * ours_small, work
