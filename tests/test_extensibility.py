"""A third party adds a layer with `pip install` plus one name in the entity config: no core change."""

import json
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "pps_tiny_layer"

SCRIPT = r"""
import asyncio, json, sys
from pps_core import Memory
from pps_core.settings import load_settings

async def main(home):
    sections = [{"name": "Tiny notes", "layer": "tiny_notes", "count": 2},
                {"name": "Recent turns", "layer": "raw_capture", "style": "turns"}]
    settings = load_settings("ext", home, plugins=["sqlite", "tiny"], startup={"sections": sections})
    async with Memory(settings) as m:
        startup = await m.call("ambient_recall", {"context": "startup"})
        search = await m.call("ambient_recall", {"context": "where are the lighthouse keys?"})
        health = await m.call("pps_health")
    print(json.dumps({"startup": startup["text"], "search": search["text"],
                      "results": [r["layer"] for r in search["results"]], "health": health}))

asyncio.run(main(sys.argv[1]))
"""


def test_out_of_tree_layer_appears_in_search_startup_and_health(tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(FIXTURE)], check=True, capture_output=True)
    home = tmp_path / "home"
    home.mkdir()
    (home / "tiny_notes.txt").write_text("buy bread\nthe lighthouse keys are under the mat\nwater the ferns\n")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(home)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert "Tiny notes: " in data["startup"] and "water the ferns" in data["startup"]
    assert "buy bread" not in data["startup"]  # count = 2 newest
    assert "tiny_notes" in data["results"] and "lighthouse keys are under the mat" in data["search"]
    assert data["health"]["layers"]["tiny_notes"] == {**data["health"]["layers"]["tiny_notes"],
                                                      "available": True, "counts": {"notes": 3}}
    assert {"name": "tiny", "version": "0.0.1"} in data["health"]["plugins"]

