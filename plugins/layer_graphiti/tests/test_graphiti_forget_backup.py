"""A backup taken after forgetting a turn does not hold its episode or facts: the embedded graph is copied
compacted (EXPORT/IMPORT), since Kuzu keeps deleted values in its pages; the copy restores whole."""

import gzip
import tarfile


async def test_a_backup_after_forgetting_holds_nothing_of_the_turn(graph_memory, scripted_llm):
    memory = await graph_memory(llm={"base_url": scripted_llm.base_url, "model": "scripted"},
                                graphiti={"background_ingest": False})
    for text in ("Jeff adopted a kitten named Pixel", "Brandi drove Zanzibarqq home"):
        await memory.call("store_message", {"content": text, "author_name": "Jeff", "channel": "terminal"})
    await memory.call("ingest_batch_to_graphiti", {"batch_size": 5})
    await memory.call("forget_turns", {"ids": [2]})
    (memory.home / "pps.toml").write_text('entity = "testentity"\n')  # a home as `pps init` leaves it
    (memory.home / "backups").mkdir(exist_ok=True)
    archive = memory.home / "backups" / "after.tar.gz"
    await memory.call("pps_backup", {"path": str(archive)})
    with tarfile.open(archive) as tar:
        graph_files = [m.name for m in tar.getmembers() if m.name.startswith("graphiti/graph.kuzu")]
        for m in tar.getmembers():
            f = tar.extractfile(m)
            assert f is None or b"Zanzibarqq" not in f.read(), m.name
    assert graph_files == ["graphiti/graph.kuzu"]
    assert b"Pixel" in gzip.decompress(archive.read_bytes())  # what was not forgotten is there
