"""``pps anchors sync`` ([chroma] store = "postgres"): word-photo files move into PostgreSQL (names kept, embedded),
the rows are written out as markdown, a hand edit goes back, a word-photo deleted by a server leaves the export,
and an edit made on both sides is a conflict that loses neither."""

from __future__ import annotations

import json

import psycopg
from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures

from pps_core.testing.server import init_entity, pps


def _call(root, op: str, params: dict | None = None) -> dict:
    return json.loads(pps(root, "call", "--entity", "lyra", op, json.dumps(params or {})).stdout)


def _sync(root, check: bool = True):
    return pps(root, "anchors", "sync", "--entity", "lyra", check=check)


def test_sync_moves_files_in_and_keeps_the_export_in_step(tmp_path, postgres_section):  # noqa: F811
    section = postgres_section("lyra")
    home = init_entity(tmp_path, "lyra", "chroma,embeddings")
    _call(tmp_path, "anchor_save", {"title": "First snow", "content": "Snow over the harbour."})
    _call(tmp_path, "anchor_save", {"title": "Taxes", "content": "Quarterly tax forms."})
    with open(home / "pps.toml", "a") as fh:
        fh.write(f'\n[chroma]\nstore = "postgres"\n[postgres]\ndsn = {section["dsn"]!r}\nschema = {section["schema"]!r}\n')

    report = json.loads(_sync(tmp_path).stdout)
    assert report["imported"] == ["first-snow.md", "taxes.md"]
    found = _call(tmp_path, "anchor_search", {"query": "snow by the sea", "limit": 1})["results"]
    assert [r["source"] for r in found] == ["first-snow.md"]
    assert _call(tmp_path, "anchor_get", {"filename": "taxes.md"})["content"] == "Quarterly tax forms."

    photo = home / "word_photos" / "first-snow.md"
    photo.write_text(photo.read_text().replace("Snow over the harbour.", "Ice on the whole bay at dawn."))
    _call(tmp_path, "anchor_delete", {"filename": "taxes.md"})  # through the server side
    report = json.loads(_sync(tmp_path).stdout)
    assert report["updated"] == ["first-snow.md"] and report["removed"] == ["taxes.md"]
    assert not (home / "word_photos" / "taxes.md").exists()
    found = _call(tmp_path, "anchor_search", {"query": "frozen bay in the morning", "limit": 1})["results"]
    assert found[0]["source"] == "first-snow.md" and found[0]["content"] == "Ice on the whole bay at dawn."

    _call(tmp_path, "anchor_save", {"title": "Harbour light", "content": "The light turned green."})
    _sync(tmp_path)
    assert "The light turned green." in (home / "word_photos" / "harbour-light.md").read_text()

    photo.write_text(photo.read_text().replace("Ice on the whole bay", "Edited in the home"))
    with psycopg.connect(section["dsn"]) as conn:  # and meanwhile on the server side
        conn.execute(f'UPDATE "{section["schema"]}".word_photos SET content = replace(content, %s, %s) '
                     "WHERE filename = 'first-snow.md'", ("Ice on the whole bay", "Edited elsewhere"))
    out = _sync(tmp_path, check=False)
    assert out.returncode == 1 and json.loads(out.stdout)["conflicts"] == ["first-snow.md"]
    assert "Edited in the home" in photo.read_text()
    assert _call(tmp_path, "anchor_get", {"filename": "first-snow.md"})["content"] == "Edited elsewhere at dawn."
