import os

import pytest

from pps_core.errors import InvalidParams, NotFound
from pps_core.testing import LayerContract


class TestCrystalContract(LayerContract):
    plugins = ["crystals"]
    layer_name = "crystallization"

    async def add_items(self, memory, texts):
        for t in texts:
            await memory.call("crystallize", {"content": t})


async def test_crystallize_numbers_and_rolls_the_window(make_memory):
    m = await make_memory(plugins=["crystals"])
    for i in range(1, 7):
        out = await m.call("crystallize", {"content": f"crystal {i}"})
        assert out["created"] == f"crystal_{i:03d}.md"
    listing = await m.call("crystal_list")
    assert listing["current"] == [f"crystal_{i:03d}.md" for i in (3, 4, 5, 6)]
    assert listing["archived"] == ["crystal_001.md", "crystal_002.md"]
    assert (m.home / "crystals" / "archive" / "crystal_001.md").read_text() == "crystal 1"


async def test_get_crystals_is_newest_n_oldest_first(make_memory):
    m = await make_memory(plugins=["crystals"])
    for i in range(1, 6):
        await m.call("crystallize", {"content": f"crystal {i}"})
    got = await m.call("get_crystals", {"count": 3})
    assert [c["content"] for c in got["crystals"]] == ["crystal 3", "crystal 4", "crystal 5"]
    deep = await m.call("get_crystals", {"count": 5})  # reaches into the archive
    assert [c["name"] for c in deep["crystals"]][0] == "crystal_001.md"


async def test_window_is_configurable(make_memory, monkeypatch):
    monkeypatch.setenv("PPS_CRYSTALS_WINDOW", "2")
    m = await make_memory(plugins=["crystals"])
    for i in range(3):
        await m.call("crystallize", {"content": f"c{i}"})
    assert len((await m.call("crystal_list"))["current"]) == 2


async def test_delete_only_the_newest_and_refill_from_archive(make_memory):
    m = await make_memory(plugins=["crystals"])
    with pytest.raises(NotFound):
        await m.call("crystal_delete")
    for i in range(1, 6):
        await m.call("crystallize", {"content": f"crystal {i}"})
    out = await m.call("crystal_delete")
    assert out["deleted"] == "crystal_005.md"
    listing = await m.call("crystal_list")
    assert listing["current"] == ["crystal_001.md", "crystal_002.md", "crystal_003.md", "crystal_004.md"]
    assert (m.home / "crystals" / "deleted" / "crystal_005.md").exists()
    nxt = await m.call("crystallize", {"content": "again"})
    assert nxt["created"] == "crystal_006.md"


async def test_bad_content_is_refused_and_nothing_written(make_memory):
    m = await make_memory(plugins=["crystals"])
    for bad in ["", "   ", "nul\x00byte"]:
        with pytest.raises(InvalidParams) as err:
            await m.call("crystallize", {"content": bad})
        assert err.value.param == "content"
    with pytest.raises(InvalidParams) as err:
        await m.call("get_crystals", {"count": -1})
    assert err.value.param == "count"
    assert os.listdir(m.home / "crystals") == ["archive"]


async def test_no_temp_files_left_and_files_private(make_memory):
    m = await make_memory(plugins=["crystals"])
    await m.call("crystallize", {"content": "x"})
    names = os.listdir(m.home / "crystals")
    assert not [n for n in names if n.endswith(".tmp")]
    assert (m.home / "crystals" / "crystal_001.md").stat().st_mode & 0o777 == 0o600


async def test_health_and_startup_see_a_crystal_another_process_adds(make_memory):
    """The folders' listings are reused while a folder is unchanged (issue 26: the startup package's health line
    listed both folders every call); a crystal written or archived by another process (or by hand) is counted and
    shown at the very next call."""
    m = await make_memory(plugins=["crystals"])
    for i in range(1, 3):
        await m.call("crystallize", {"content": f"crystal {i}"})
    folder, archive = m.home / "crystals", m.home / "crystals" / "archive"
    old = 1_000_000_000  # both folders last changed long ago: their listings are reused from now on
    for d in (folder, archive):
        os.utime(d, ns=(old, old))
    for _ in range(2):
        assert (await m.health())["crystallization"].counts == {"crystals": 2, "archived": 0}
    (folder / "crystal_003.md").write_text("written by another process")
    assert (await m.health())["crystallization"].counts == {"crystals": 3, "archived": 0}
    package = await m.call("ambient_recall", {"context": "startup"})
    assert "written by another process" in package["text"]
    os.utime(folder, ns=(old, old))
    os.rename(folder / "crystal_001.md", archive / "crystal_001.md")  # both folders change
    assert (await m.health())["crystallization"].counts == {"crystals": 2, "archived": 1}
    assert (await m.call("crystal_list"))["archived"] == ["crystal_001.md"]
