"""The index is the owner's alone whatever the umask of the program that embeds PPS: files 0600, folders 0700,
including what Chroma creates after the index was opened."""

import os


async def test_index_files_are_private_under_a_permissive_umask(make_memory):
    old = os.umask(0o022)
    try:
        m = await make_memory(plugins=["chroma", "embeddings"])
        for i in range(3):
            await m.call("anchor_save", {"title": f"note {i}", "content": f"word-photo number {i} about the sea"})
        assert (await m.call("anchor_search", {"query": "sea"}))["count"] == 3
        await m.close()
    finally:
        os.umask(old)
    loose = []
    for root, dirs, files in os.walk(m.home / "chroma"):
        loose += [os.path.join(root, d) for d in dirs if os.stat(os.path.join(root, d)).st_mode & 0o777 != 0o700]
        loose += [os.path.join(root, f) for f in files if os.stat(os.path.join(root, f)).st_mode & 0o777 != 0o600]
    assert loose == []
