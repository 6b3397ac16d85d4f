"""`pps backup` while `pps serve http` runs and writes; `pps restore` into a fresh home, checked by counts
and a recall."""

import tarfile
import threading

import pytest

from pps_core.testing.server import init_entity, pps, start_server

PLUGINS = "sqlite,crystals,chroma,embeddings,mcp,http"


def test_backup_while_serving_and_restore_into_a_fresh_home(tmp_path):
    home = init_entity(tmp_path, "lyra", PLUGINS)
    server = start_server(tmp_path, "--entity", "lyra")
    stop = threading.Event()

    def keep_writing():
        i = 0
        while not stop.is_set():
            i += 1
            server.call("store_message", {"content": f"busy turn {i}", "author_name": "J", "channel": "bg"},
                        entity="lyra")

    try:
        call = server.call
        for i in range(30):
            call("store_message", {"content": f"the lighthouse keeper {i}", "author_name": "Jeff",
                                   "channel": "terminal"}, entity="lyra")
        batch = call("summarize_messages", {"limit": 10}, entity="lyra").json()
        call("store_summary", {"summary_text": "they talked about the lighthouse keeper",
                               "message_ids": batch["message_ids"]}, entity="lyra")
        for i in range(6):
            call("crystallize", {"content": f"crystal {i}: the lamp turns"}, entity="lyra")
        call("anchor_save", {"content": "the first snow on the harbor wall", "title": "First snow"}, entity="lyra")
        writer = threading.Thread(target=keep_writing)
        writer.start()
        out = pps(tmp_path, "backup", str(tmp_path / "lyra.tar.gz"), "--entity", "lyra")
        stop.set()
        writer.join()
        assert "backed up 'lyra'" in out.stdout
    finally:
        stop.set()
        server.stop()
    with tarfile.open(tmp_path / "lyra.tar.gz") as tar:
        names = tar.getnames()
    assert "token" not in names and "owner.lock" not in names and not any(n.startswith("chroma") for n in names)
    assert {"pps.db", "pps.toml", "word_photos/first-snow.md", "crystals/crystal_006.md"} <= set(names)
    assert (tmp_path / "lyra.tar.gz").stat().st_mode & 0o077 == 0

    restored = tmp_path / "fresh"
    out = pps(tmp_path, "restore", str(tmp_path / "lyra.tar.gz"), "--home", str(restored))
    assert out.returncode == 0, out.stderr
    assert (restored / "token").read_text().strip() != (home / "token").read_text().strip()
    health = pps(tmp_path, "health", "--home", str(restored), "--json")
    layers = __import__("json").loads(health.stdout)["layers"]
    assert layers["raw_capture"]["counts"]["messages"] >= 30
    assert layers["message_summaries"]["counts"]["summaries"] == 1
    assert layers["crystallization"]["counts"]["crystals"] + layers["crystallization"]["counts"]["archived"] == 6
    assert layers["core_anchors"]["counts"]["word_photos"] == 1  # index rebuilt from the file
    recall = pps(tmp_path, "call", "--home", str(restored), "ambient_recall", '{"context": "snow on the harbor"}')
    assert "first-snow.md" in recall.stdout and "lighthouse keeper" in pps(
        tmp_path, "call", "--home", str(restored), "raw_search", '{"query": "lighthouse keeper"}').stdout
    again = pps(tmp_path, "restore", str(tmp_path / "lyra.tar.gz"), "--home", str(restored), check=False)
    assert again.returncode == 2 and "not empty" in again.stderr
    exists = pps(tmp_path, "backup", str(tmp_path / "lyra.tar.gz"), "--entity", "lyra", check=False)
    assert exists.returncode == 2 and "exists" in exists.stderr


async def test_the_backup_operation_writes_only_archives_in_the_backups_folder(make_memory, tmp_path):
    """Whoever holds the token picks the archive's name, never where the server writes."""
    from pps_core.errors import InvalidParams

    m = await make_memory(plugins=["sqlite"])
    for bad in [str(tmp_path / ".bashrc"), str(tmp_path / "authorized_keys"), str(tmp_path / "x.tar.gz"),
                "../x.tar.gz", "sub/x.tar.gz", str(tmp_path / ".hidden.tar.gz"), "/proc/self/x.tar.gz",
                "a" * 300 + ".tar.gz", str(m.home / "x.tar.gz")]:
        with pytest.raises(InvalidParams) as err:
            await m.call("pps_backup", {"path": bad})
        assert err.value.param == "path"
    assert not (tmp_path / ".bashrc").exists() and not (tmp_path / "x.tar.gz").exists()
    (m.home / "pps.toml").write_text('entity = "testentity"\nplugins = ["sqlite"]\n')
    out = await m.call("pps_backup", {"path": "ok.tgz"})
    assert out["file"] == str((m.home / "backups" / "ok.tgz").resolve())
    second = await m.call("pps_backup", {"path": str(m.home / "backups" / "two.tar.gz")})
    with tarfile.open(second["file"]) as tar:
        names = tar.getnames()
    assert not any(n.startswith(("backups", ".pps-")) for n in names)  # no archive inside an archive
