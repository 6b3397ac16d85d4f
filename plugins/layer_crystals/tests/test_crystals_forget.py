"""crystal_forget: any crystal, gone for good (window, archive, deleted copies); numbers never reused."""

import pytest

from pps_core.errors import InvalidParams, NotFound


async def test_forget_any_crystal_for_good(make_memory):
    m = await make_memory(plugins=["crystals"])
    for i in range(1, 7):
        await m.call("crystallize", {"content": f"Crystal {i}: secret{i} of the lamp."})
    assert (await m.call("crystal_list", {}))["current"] == [f"crystal_{i:03d}.md" for i in (3, 4, 5, 6)]
    out = await m.call("crystal_forget", {"name": "crystal_005.md"})  # in the window: refilled from the archive
    assert out["current"] == ["crystal_002.md", "crystal_003.md", "crystal_004.md", "crystal_006.md"]
    await m.call("crystal_forget", {"name": "crystal_001.md"})  # archived
    await m.call("crystal_delete", {})  # 006 moves to deleted/ ...
    await m.call("crystal_forget", {"name": "crystal_006.md"})  # ... and is forgotten there too
    texts = " ".join(p.read_text() for p in (m.home / "crystals").rglob("*.md"))
    assert "secret5" not in texts and "secret1" not in texts and "secret6" not in texts and "secret4" in texts
    assert (await m.call("crystallize", {"content": "Crystal 7."}))["created"] == "crystal_007.md"
    found = await m.call("ambient_recall", {"context": "secret5 of the lamp"})
    assert "secret5" not in found["text"]
    with pytest.raises(NotFound):
        await m.call("crystal_forget", {"name": "crystal_005.md"})
    with pytest.raises(InvalidParams) as err:
        await m.call("crystal_forget", {"name": "../pps.toml"})
    assert err.value.param == "name"
