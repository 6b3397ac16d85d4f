"""anchor_delete(forget=true): a word-photo gone for good, no copy kept, earlier deleted copies removed too."""

import pytest

from pps_core.errors import NotFound


async def test_a_forgotten_word_photo_leaves_no_copy(make_memory):
    m = await make_memory(plugins=["embeddings", "chroma"])
    for _ in range(2):  # saved, deleted (a copy kept), saved again under the same name
        saved = await m.call("anchor_save", {"content": "the secret harbor code is 4417", "title": "Harbor code"})
        if _ == 0:
            await m.call("anchor_delete", {"filename": saved["saved"]})
    folder = m.home / "word_photos"
    assert len(list((folder / ".deleted").iterdir())) == 1
    out = await m.call("anchor_delete", {"filename": saved["saved"], "forget": True})
    assert out["forgotten"] is True and out["kept_at"] is None
    assert not (folder / saved["saved"]).exists() and list((folder / ".deleted").iterdir()) == []
    assert not any("4417" in p.read_text() for p in folder.rglob("*.md"))
    found = await m.call("anchor_search", {"query": "secret harbor code"})
    assert found["results"] == []
    with pytest.raises(NotFound):
        await m.call("anchor_delete", {"filename": saved["saved"], "forget": True})
