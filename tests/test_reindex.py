"""`pps reindex` / pps_reindex: derived indexes rebuilt from the source of truth, with a bar on terminals only."""

import json
import shutil
import sqlite3
import subprocess
import sys

from pps_core.testing.server import init_entity, pps, pps_env, start_server


async def test_full_reindex_rebuilds_a_deleted_chroma_index_from_the_files(make_memory):
    m = await make_memory(plugins=["chroma", "embeddings"])
    await m.call("anchor_save", {"title": "Harbor snow", "content": "the first snow on the harbor wall"})
    await m.call("anchor_save", {"title": "Coffee", "content": "coffee at dawn with Jeff"})
    layer = m.layer("core_anchors")
    shutil.rmtree(layer.index.path)  # the index is lost; the files are the truth
    ticks = []
    out = await m.call("pps_reindex", {"layer": "core_anchors", "full": True})
    assert out["layers"]["core_anchors"]["indexed"] == 2 and out["layers"]["core_anchors"]["added"] == 2
    found = await m.call("anchor_search", {"query": "snow on the harbor", "limit": 1})
    assert found["results"][0]["source"] == "harbor-snow.md"
    assert (layer.index.path / "chroma.sqlite3").exists()
    again = await m.layer("core_anchors").reindex(lambda d, t: ticks.append((d, t)), False)
    assert again["added"] == again["updated"] == 0 and ticks[-1] == (2, 2)


async def test_turns_stored_before_the_embedder_get_their_vectors(make_memory, pps_home):
    home = pps_home / "late"
    plain = await make_memory("late", home=home, plugins=["sqlite"])
    for i in range(70):
        await plain.call("store_message", {"content": f"turn {i} about tide pools", "author_name": "Jeff",
                                           "channel": "term"})
    batch = await plain.call("summarize_messages", {"limit": 10})
    await plain.call("store_summary", {"summary_text": "tide pools, ten turns", "message_ids": batch["message_ids"]})
    await plain.close()
    m = await make_memory("late", home=home, plugins=["sqlite", "embeddings"])
    ticks = []
    report = await m.layer("raw_capture").reindex(lambda d, t: ticks.append((d, t)), False)
    assert report["embedded"] == 70 and report["missing_after"] == 0 and ticks[-1] == (70, 70)
    out = await m.call("pps_reindex", {})
    assert out["layers"]["raw_capture"]["embedded"] == 0
    assert out["layers"]["message_summaries"]["embedded"] == 1
    conn = sqlite3.connect(home / "pps.db")
    assert conn.execute("SELECT COUNT(*) FROM message_vectors").fetchone()[0] == 70
    conn.close()
    full = await m.call("pps_reindex", {"layer": "raw_capture", "full": True})
    assert full["layers"]["raw_capture"]["dropped"] == 70 and full["layers"]["raw_capture"]["embedded"] == 70


def _photos(home, n):
    (home / "word_photos").mkdir(exist_ok=True)
    for i in range(n):
        (home / "word_photos" / f"p{i}.md").write_text(f"---\ntitle: Photo {i}\n---\nmoment number {i} by the sea\n")


def test_cli_bar_only_on_a_terminal_and_forwarded_without_one(tmp_path):
    home = init_entity(tmp_path, "lyra", "sqlite,chroma,embeddings,http")
    _photos(home, 40)
    piped = pps(tmp_path, "reindex", "--entity", "lyra", "--layer", "core_anchors")
    assert json.loads(piped.stdout)["layers"]["core_anchors"]["added"] == 40
    assert "reindex core_anchors" not in piped.stderr and "it/s" not in piped.stderr
    # a terminal: `script` gives the command a pty for stdout and stderr (sized: tqdm draws nothing in 0 columns)
    cmd = f"stty cols 100 rows 40; {sys.executable} -m pps_core.cli reindex --entity lyra --layer core_anchors --full"
    tty = subprocess.run(["script", "-qec", cmd, "/dev/null"], env=pps_env(tmp_path), capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert tty.returncode == 0, tty.stdout + tty.stderr
    assert "reindex core_anchors" in tty.stdout and "40/40" in tty.stdout
    server = start_server(tmp_path, "--entity", "lyra")
    try:
        fwd = pps(tmp_path, "reindex", "--entity", "lyra")
        layers = json.loads(fwd.stdout)["layers"]
        assert layers["core_anchors"]["indexed"] == 40 and "raw_capture" in layers
        assert fwd.stderr == ""
    finally:
        server.stop()
