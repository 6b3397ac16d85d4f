"""Backup with every default plugin, restore under a new entity name: every layer comes back, the graph included
(its partition is keyed by the entity's name; ``after_restore`` moves it), and searches answer as before."""

from pps_core import Memory
from pps_core.builtin.backup import snapshot_live
from pps_core.builtin.restore import compare, restore, verify
from pps_core.plugins import default_plugins
from pps_core.testing.server import init_entity


async def answers(m: Memory) -> dict:
    texture = await m.call("texture_search", {"query": "who tends the lamp at the lighthouse?", "limit": 5})
    anchors = await m.call("anchor_search", {"query": "snow on the harbor wall", "limit": 3})
    raw = await m.call("raw_search", {"query": "lighthouse keeper", "limit": 5})
    health = await m.call("pps_health")
    return {"texture": [r["content"] for r in texture["results"]],
            "anchors": [r["content"] for r in anchors["results"]],
            "raw": [(r["id"], r["content"]) for r in raw["results"]],
            "counts": {name: h["counts"] for name, h in health["layers"].items()}}


async def test_restore_under_a_new_name_keeps_every_layer(tmp_path):
    home = init_entity(tmp_path, "lyra", ",".join(default_plugins()))
    archive = tmp_path / "lyra.tar.gz"
    async with Memory.for_entity("lyra", home) as m:
        for i in range(6):
            await m.call("store_message", {"content": f"the lighthouse keeper {i} lit the lamp", "author_name": "Jeff",
                                           "channel": "terminal:a"})
        await m.call("poll_channels", {"consumer_key": "reader", "channel": "terminal:b"})
        await m.call("store_summary", {"summary_text": "the keepers and their lamps", "message_ids": [1, 2]})
        await m.call("crystallize", {"content": "Crystal: the lamp turns for everyone."})
        await m.call("anchor_save", {"content": "the first snow on the harbor wall", "title": "First snow"})
        await m.call("texture_add_triplet", {"source": "Jeff", "relationship": "tends", "target": "the lamp",
                                             "fact": "Jeff tends the lamp at the lighthouse"})
        await m.call("texture_add_triplet", {"source": "Lyra", "relationship": "loves", "target": "the harbor"})
        before = await answers(m)
        manifest = await snapshot_live(m, archive)
    assert before["counts"]["rich_texture"]["facts"] == 2 and before["texture"]
    assert manifest["counts"]["rich_texture"]["facts"] == 2

    new_home = tmp_path / "nova"
    restore(archive, new_home, "nova")
    found = await verify(new_home, "nova", manifest)
    assert found["ok"] and compare(manifest["counts"], found["counts"]) == {}
    async with Memory.for_entity("nova", new_home) as m:
        after = await answers(m)
        stats = await m.call("graphiti_ingestion_stats")
    assert after == before
    assert before["counts"]["raw_capture"]["cursors"] == 1 and manifest["counts"]["raw_capture"]["cursors"] == 1
    assert stats["uningested"] == before["counts"]["raw_capture"]["messages"]  # nothing was ingested (no LLM)
