"""pps-notes' tests: the layer contract every PPS layer passes, then what this plugin adds.

``make_memory`` comes from pps-core's pytest plugin (installed with pps-core); the async tests are marked
for pytest-asyncio (``pip install "pps-core[testing]"``), so no pytest configuration is needed.
"""

from __future__ import annotations

import pytest

from pps_core import InvalidParams, Memory
from pps_core.testing import LayerContract
from pps_core.testing.plugin import MakeMemory

pytestmark = pytest.mark.asyncio


class TestNotesContract(LayerContract):
    plugins = ["notes"]
    layer_name = "notes"

    async def add_items(self, memory: Memory, texts: list[str]) -> None:
        for text in texts:
            await memory.call("note_add", {"content": text})


async def test_blank_or_nul_content_is_refused_naming_the_parameter(make_memory: MakeMemory) -> None:
    memory = await make_memory(plugins=["notes"])
    for bad in ["", "   ", "a\x00b"]:
        with pytest.raises(InvalidParams) as err:
            await memory.call("note_add", {"content": bad})
        assert err.value.param == "content"
    assert (await memory.call("notes_list"))["total"] == 0


async def test_the_startup_package_has_a_notes_section_without_any_config(make_memory: MakeMemory) -> None:
    memory = await make_memory(plugins=["notes"])
    for i in range(1, 8):
        await memory.call("note_add", {"content": f"note number {i}"})
    out = await memory.call("ambient_recall", {"context": "startup"})
    assert [s["name"] for s in out["manifest"]["sections"]] == ["Notes"]
    text = out["text"]
    assert "note number 7" in text and "note number 3" in text  # the five newest, newest first
    assert "note number 2" not in text
    assert text.index("note number 7") < text.index("note number 3")


async def test_the_left_out_pointer_fetches_exactly_what_the_budget_left_out(make_memory: MakeMemory) -> None:
    memory = await make_memory(plugins=["notes"])
    for i in range(1, 6):
        await memory.call("note_add", {"content": f"note {i}: " + "lorem ipsum " * 40})
    out = await memory.call("ambient_recall", {"context": "startup", "budget": 1500})
    (left,) = out["manifest"]["left_out"]
    assert left["section"] == "Notes" and left["operation"] == "notes_list"
    assert 0 < left["shown"] < 5 and left["left_out"] == 5 - left["shown"]
    fetched = await memory.call(left["operation"], left["params"])
    missing = {n["text"].split(":")[0] for n in fetched["notes"]}
    shown = {f"note {i}" for i in range(1, 6) if f"note {i}:" in out["text"]}
    assert len(shown) == left["shown"]
    assert missing == {f"note {i}" for i in range(1, 6)} - shown


async def test_notes_survive_a_restart(make_memory: MakeMemory) -> None:
    first = await make_memory(plugins=["notes"])
    await first.call("note_add", {"content": "the spare key is under the blue pot"})
    await first.close()
    again = await make_memory(plugins=["notes"])
    found = await again.call("ambient_recall", {"context": "where is the spare key?"})
    assert any("blue pot" in r["content"] for r in found["results"])


async def test_hook_pps_init_hints(tmp_path):
    """A third party's settings hint lands in the pps.toml `pps init` writes, as a comment, and loads."""
    from pps_core.testing.server import pps, pps_env

    root = tmp_path / "root"
    made = pps(root, "init", "--entity", "n", "--plugins", "sqlite,notes", check=False, env=pps_env(root))
    assert made.returncode == 0, made.stderr
    toml = (root / "n" / "pps.toml").read_text()
    assert "# [notes]" in toml and "# startup_count = 5" in toml and "[llm]" not in toml
    listed = pps(root, "plugins", "-e", "n", check=False, env=pps_env(root))
    assert listed.returncode == 0 and "notes" in listed.stdout, listed.stderr
