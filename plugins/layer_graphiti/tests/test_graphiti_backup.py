"""`pps backup` of a served entity while triplets are written: the server pauses its graph writes,
checkpoints Kuzu and copies it; the restored graph opens with every fact acknowledged before the backup."""

import json
import tarfile
import threading

from pps_core.testing.server import init_entity, pps, start_server

PLUGINS = "sqlite,embeddings,graphiti,http"


def test_backup_while_triplets_are_written_restores_a_whole_graph(tmp_path):
    init_entity(tmp_path, "lyra", PLUGINS)
    server = start_server(tmp_path, "--entity", "lyra")
    acked: list[str] = []
    stop = threading.Event()

    def keep_writing():
        i = 0
        while not stop.is_set():
            i += 1
            r = server.call("texture_add_triplet", {"source": f"Keeper {i}", "relationship": "TENDS",
                                                    "target": f"Lamp {i % 5}",
                                                    "fact": f"keeper {i} tends lamp {i % 5} in the lighthouse"},
                            entity="lyra")
            assert r.status_code == 200, r.text
            acked.append(r.json()["uuid"])

    try:
        server.call("texture_add_triplet", {"source": "Lyra", "relationship": "LOVES", "target": "the harbor",
                                            "fact": "Lyra loves the harbor at first snow"}, entity="lyra")
        writer = threading.Thread(target=keep_writing)
        writer.start()
        while len(acked) < 15:
            stop.wait(0.05)
        before = len(acked)
        out = pps(tmp_path, "backup", str(tmp_path / "lyra.tar.gz"), "--entity", "lyra")
        after = len(acked)
        stop.set()
        writer.join()
        assert "backed up 'lyra'" in out.stdout and after > before  # the writer went on around the backup
    finally:
        stop.set()
        server.stop()
    with tarfile.open(tmp_path / "lyra.tar.gz") as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("pps-backup.json"))
    assert "graphiti/graph.kuzu" in names and "graphiti/graph.kuzu.wal" not in names
    assert "graphiti/graph.kuzu" in manifest["layers_copied_live"]  # copied by the server, writes paused

    restored = tmp_path / "fresh"
    res = pps(tmp_path, "restore", str(tmp_path / "lyra.tar.gz"), "--home", str(restored))
    assert res.returncode == 0, res.stderr
    found = pps(tmp_path, "call", "--home", str(restored), "texture_search",
                '{"query": "who loves the harbor at first snow?", "limit": 3}')
    assert "Lyra loves the harbor at first snow" in found.stdout
    health = json.loads(pps(tmp_path, "health", "--home", str(restored), "--json").stdout)["layers"]["rich_texture"]
    facts = health["counts"]["facts"]
    assert 1 + before <= facts <= 1 + after + 1, (before, facts, after)  # a whole prefix of the writes
    restored_uuids = set()
    for i in (1, before):
        got = json.loads(pps(tmp_path, "call", "--home", str(restored), "texture_explore",
                             json.dumps({"entity_name": f"Keeper {i}", "depth": 1})).stdout)
        restored_uuids |= {f["uuid"] for f in got["facts"]}
    assert {acked[0], acked[before - 1]} <= restored_uuids
