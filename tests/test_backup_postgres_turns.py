"""``pps backup`` / ``pps restore`` carry an entity's turn tables in PostgreSQL whole (issue 25): turns,
summaries, read cursors, vectors, the forget log and the tombstones of forgotten message ids go in the archive as
rows, come back into an empty schema (the database lost), checked by counts, searchable, and a forgotten
``message_id`` stays forgotten. A restore that fails half-way leaves the schema as it was (one transaction)."""

from __future__ import annotations

import io
import json
import tarfile

import psycopg

from pps_core.testing.server import init_entity, pps


def _call(root, entity: str, op: str, params: dict | None = None) -> dict:
    return json.loads(pps(root, "call", "--entity", entity, op, json.dumps(params or {})).stdout)


def _count(dsn: str, schema: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f'SELECT count(*) FROM "{schema}".{table}').fetchone()[0]


def _rewrite(archive, dest, change) -> None:
    """A copy of ``archive`` with ``change(name, bytes) -> bytes`` applied to each member."""
    with tarfile.open(archive, "r:gz") as src, tarfile.open(dest, "w:gz") as out:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if data is not None:
                data = change(m.name, data)
                m.size = len(data)
            out.addfile(m, io.BytesIO(data) if data is not None else None)


def test_backup_and_restore_carry_the_turn_tables(tmp_path, postgres_section):
    section = postgres_section("lyra")
    dsn, schema = section["dsn"], section["schema"]
    init_entity(tmp_path, "lyra", "postgres,embeddings", "[postgres]", f"dsn = {dsn!r}", f"schema = {schema!r}")
    turns = [{"content": f"Turn {i}: " + ("the lighthouse keeper's lamp went dark" if i == 17 else
                                          f"we talked about chapter {i} of the novel"),
              "author_name": ["Jeff", "Lyra"][i % 2], "channel": ["terminal:a", "discord:home"][i % 2],
              "message_id": f"m-{i}", "created_at": f"2026-03-02T08:{i:02d}:00Z"} for i in range(40)]
    ids = _call(tmp_path, "lyra", "store_messages", {"messages": turns})["ids"]
    _call(tmp_path, "lyra", "store_summary", {"summary_text": "Chapters ten to nineteen of the novel.",
                                              "message_ids": ids[10:20]})
    _call(tmp_path, "lyra", "poll_channels", {"consumer_key": "discord-bot"})  # a read cursor
    _call(tmp_path, "lyra", "forget_turns", {"ids": [ids[3]], "requested_by": "test"})
    pps(tmp_path, "reindex", "--entity", "lyra")  # every vector written
    before = _call(tmp_path, "lyra", "pps_health")
    vectors = _count(dsn, schema, "message_vectors")
    assert vectors == 39 and _count(dsn, schema, "summary_vectors") == 1

    archive = tmp_path / "lyra.tar.gz"
    out = pps(tmp_path, "backup", str(archive), "--entity", "lyra")
    assert "messages 39" in out.stdout, out.stdout
    with psycopg.connect(dsn, autocommit=True) as conn:  # the database is lost
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    out = pps(tmp_path, "restore", str(archive), "--entity", "lyra2", "--archive-settings", check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "messages 39" in out.stdout and "summaries 1" in out.stdout
    after = _call(tmp_path, "lyra2", "pps_health")
    for layer in ("raw_capture", "message_summaries"):
        assert after["layers"][layer]["counts"] == before["layers"][layer]["counts"], layer
    assert _count(dsn, schema, "message_vectors") == vectors and _count(dsn, schema, "summary_vectors") == 1
    found = _call(tmp_path, "lyra2", "raw_search", {"query": "who kept the lighthouse lamp", "limit": 3})
    assert found["results"][0]["id"] == ids[17] and "vectors_pending" not in found
    assert _call(tmp_path, "lyra2", "search_summaries", {"query": "novel chapters"})["results"]
    # the tombstone came back: the forgotten turn is not stored again by a replayed import
    again = _call(tmp_path, "lyra2", "store_message", {**turns[3], "created_at": turns[3]["created_at"]})
    assert again["stored"] is False and again.get("forgotten") is True
    assert _call(tmp_path, "lyra2", "forget_log")["total"] == 1
    assert _call(tmp_path, "lyra2", "poll_channels", {"consumer_key": "discord-bot"})["new_consumer"] is False
    new = _call(tmp_path, "lyra2", "store_message", {"content": "after the restore", "author_name": "Jeff",
                                                     "channel": "terminal:a"})
    assert new["id"] > max(ids)  # ids continue after the restored ones
    assert not (tmp_path / "lyra2" / "postgres").exists()

    # a schema that holds other turns is refused, nothing restored
    out = pps(tmp_path, "restore", str(archive), "--entity", "lyra3", "--archive-settings", check=False)
    assert out.returncode != 0 and "already holds" in out.stderr, out.stderr
    assert not (tmp_path / "lyra3").exists() and _count(dsn, schema, "messages") == 40

    # a restore that fails half-way (a damaged row late in the archive) leaves the empty schema empty
    other = postgres_section("lyra4")["schema"]

    def damage(name: str, data: bytes) -> bytes:
        if name == "pps.toml":
            return data.replace(schema.encode(), other.encode())
        if name.endswith("message_vectors.copy"):
            return data[:-40] + b"\n"
        return data

    broken = tmp_path / "broken.tar.gz"
    _rewrite(archive, broken, damage)
    out = pps(tmp_path, "restore", str(broken), "--entity", "lyra4", "--archive-settings", check=False)
    assert out.returncode != 0 and "nothing was restored" in out.stderr, out.stdout + out.stderr
    assert not (tmp_path / "lyra4").exists()
    assert [_count(dsn, other, t) for t in ("messages", "message_summaries", "forgotten_message_ids")] == [0, 0, 0]
