"""Issue 37, item 1: background work is done once across a fleet. Three `pps serve http` processes (homes of their
own, as on three machines) serve one PostgreSQL entity with an embedder and periodic upkeep (a scripted LLM); turns
arrive through all three while each searches. Every turn is embedded once (a test-only trigger logs each vector
written) and every summary costs one LLM call (no two servers summarize the same turns)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from pps_core.testing.scripted_llm import ScriptedLLM
from pps_core.testing.server import init_entity, start_server

PLUGINS = "postgres,embeddings,llm,upkeep,http"


def _log_vector_writes(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"""
            CREATE TABLE "{schema}".embed_log (message_id bigint NOT NULL);
            CREATE FUNCTION "{schema}".log_embed() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO "{schema}".embed_log VALUES (NEW.message_id); RETURN NEW; END $$;
            CREATE TRIGGER log_embed AFTER INSERT OR UPDATE ON "{schema}".message_vectors
                FOR EACH ROW EXECUTE FUNCTION "{schema}".log_embed();
        """)


def test_three_servers_do_each_background_job_once(tmp_path, postgres_section):
    pytest.importorskip("pps_embeddings")
    section = postgres_section("lyra")
    summaries_asked = []
    lock = threading.Lock()

    def summarize(messages):
        with lock:
            summaries_asked.append(messages[-1]["content"])
        time.sleep(0.3)  # a model takes a while: long enough for the servers' upkeep runs to meet
        return "They talked about the lighthouse."

    with ScriptedLLM(summarize) as llm:
        roots = [tmp_path / f"machine{i}" for i in range(3)]
        for root in roots:
            root.mkdir()
            init_entity(root, "lyra", PLUGINS, "[postgres]", f"dsn = {section['dsn']!r}",
                        f"schema = {section['schema']!r}", "[llm]", f"base_url = {llm.base_url!r}", 'model = "m"',
                        "[upkeep]", "interval_s = 0.5", "target_unsummarized = 0", "batch_size = 10")
        with ThreadPoolExecutor(3) as pool:
            servers = list(pool.map(lambda root: start_server(root, "--entity", "lyra", timeout=180), roots))
        try:
            _log_vector_writes(section["dsn"], section["schema"])

            def write(k: int) -> None:
                s = servers[k % 3]
                for i in range(4):
                    s.call("store_message", {"content": f"Keeper {k} lit lamp {i} at the lighthouse",
                                             "author_name": "Jeff", "channel": f"c{k % 2}"}).raise_for_status()
                    s.call("raw_search", {"query": f"lamp {i}"}).raise_for_status()

            with ThreadPoolExecutor(6) as pool:
                list(pool.map(write, range(12)))
            with psycopg.connect(section["dsn"]) as conn:
                deadline = time.monotonic() + 120
                while True:
                    left = conn.execute(f'SELECT (SELECT count(*) FROM "{section["schema"]}".messages WHERE summary_id '
                                        f'IS NULL), (SELECT count(*) FROM "{section["schema"]}".vector_backlog)'
                                        ).fetchone()
                    if left == (0, 0):
                        break
                    assert time.monotonic() < deadline, f"still waiting: {left}"
                    time.sleep(0.2)
                time.sleep(1.5)  # a few more upkeep rounds on every server: they find nothing left to do
                twice = conn.execute(f'SELECT message_id, count(*) FROM "{section["schema"]}".embed_log '
                                     "GROUP BY 1 HAVING count(*) > 1").fetchall()
                embedded = conn.execute(f'SELECT count(DISTINCT message_id) FROM "{section["schema"]}".embed_log'
                                        ).fetchone()[0]
                summaries = conn.execute(f'SELECT count(*) FROM "{section["schema"]}".message_summaries').fetchone()[0]
        finally:
            for server in servers:
                assert server.stop() in (0, -15)
    assert embedded == 48
    assert twice == [], f"turns embedded more than once: {twice}"
    assert summaries >= 5 and len(summaries_asked) == summaries, (len(summaries_asked), summaries)
    for server in servers:
        assert "Traceback" not in server.log.read_text()
