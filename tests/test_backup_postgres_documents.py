"""``pps backup`` / ``pps restore`` carry the crystals, word-photos and recap an entity keeps in PostgreSQL (issue
25): their rows go in the archive, come back into an empty schema (the database lost), checked by counts, and
leave no file in the restored home; a schema already holding other rows is refused, nothing restored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures

from pps_core.testing.server import init_entity, pps

FIXTURE = Path(__file__).parent.parent / "plugins" / "recap" / "tests" / "fixtures" / "claude_code_session.jsonl"


def _call(root, entity: str, op: str, params: dict | None = None) -> dict:
    return json.loads(pps(root, "call", "--entity", entity, op, json.dumps(params or {})).stdout)


def test_backup_and_restore_carry_the_rows(tmp_path, postgres_section):  # noqa: F811
    section = postgres_section("lyra")
    home = init_entity(tmp_path, "lyra", "crystals,chroma,embeddings,recap", "[postgres]",
                       f"dsn = {section['dsn']!r}", f"schema = {section['schema']!r}",
                       '[crystals]\nstore = "postgres"', '[chroma]\nstore = "postgres"', '[recap]\nstore = "postgres"')
    for i in range(1, 4):
        _call(tmp_path, "lyra", "crystallize", {"content": f"Crystal {i}."})
    _call(tmp_path, "lyra", "crystal_delete")
    _call(tmp_path, "lyra", "anchor_save", {"title": "First snow", "content": "Snow over the harbour."})
    _call(tmp_path, "lyra", "anchor_save", {"title": "Taxes", "content": "Quarterly tax forms."})
    _call(tmp_path, "lyra", "anchor_delete", {"filename": "taxes.md"})
    log = home / "session.jsonl"
    shutil.copy(FIXTURE, log)
    pps(tmp_path, "recap", "--entity", "lyra", str(log), "--save", "--quiet", "--summarizer", "extractive")
    recap = _call(tmp_path, "lyra", "ambient_recall", {"context": "startup"})["text"]

    archive = tmp_path / "lyra.tar.gz"
    out = pps(tmp_path, "backup", str(archive), "--entity", "lyra")
    assert "crystallization" in out.stdout
    with psycopg.connect(section["dsn"], autocommit=True) as conn:  # the database is lost
        conn.execute(f'DROP SCHEMA "{section["schema"]}" CASCADE')

    out = pps(tmp_path, "restore", str(archive), "--entity", "lyra2", "--archive-settings")
    assert "crystals 2" in out.stdout and "word_photos 1" in out.stdout and "recap 1" in out.stdout
    assert [c["content"] for c in _call(tmp_path, "lyra2", "get_crystals", {"count": 10})["crystals"]] == [
        "Crystal 1.", "Crystal 2."]
    assert _call(tmp_path, "lyra2", "crystallize", {"content": "Crystal 4."})["created"] == "crystal_004.md"
    found = _call(tmp_path, "lyra2", "anchor_search", {"query": "snow by the sea", "limit": 1})["results"]
    assert [r["source"] for r in found] == ["first-snow.md"]  # embedded again
    assert _call(tmp_path, "lyra2", "anchor_delete", {"filename": "taxes.md", "forget": True})["forgotten"]
    startup = _call(tmp_path, "lyra2", "ambient_recall", {"context": "startup"})["text"]
    part = recap[recap.index("# Last session recap"):][:400]
    assert part in startup  # the recap came back as it was
    assert not (tmp_path / "lyra2" / "postgres").exists()

    out = pps(tmp_path, "restore", str(archive), "--entity", "lyra3", "--archive-settings", check=False)
    assert out.returncode != 0 and "already holds other crystals" in out.stderr
    assert not (tmp_path / "lyra3").exists()
