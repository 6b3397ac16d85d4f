"""``pps crystals sync`` (store = "postgres"): a file store moves into the table with its numbers, the table is
written out as markdown files, a hand edit goes back to the table, a forgotten crystal's file goes away, and an
edit made on both sides is a conflict that loses neither."""

from __future__ import annotations

import json

import psycopg
from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures

from pps_core.testing.server import init_entity, pps


def _call(root, op: str, params: dict | None = None) -> dict:
    return json.loads(pps(root, "call", "--entity", "lyra", op, json.dumps(params or {})).stdout)


def test_sync_moves_files_in_and_keeps_the_export_in_step(tmp_path, postgres_section):  # noqa: F811
    section = postgres_section("lyra")
    home = init_entity(tmp_path, "lyra", "crystals")
    for i in range(1, 8):
        _call(tmp_path, "crystallize", {"content": f"Crystal {i} from the files."})
    _call(tmp_path, "crystal_delete")  # 7 -> deleted/
    _call(tmp_path, "crystal_forget", {"name": "crystal_002.md"})  # an empty tombstone in deleted/
    with open(home / "pps.toml", "a") as fh:
        fh.write(f'\n[crystals]\nstore = "postgres"\ndsn = {section["dsn"]!r}\nschema = {section["schema"]!r}\n')

    report = json.loads(pps(tmp_path, "crystals", "sync", "--entity", "lyra").stdout)
    assert sorted(report["imported"]) == [f"crystal_{i:03d}.md" for i in range(1, 8)]
    with psycopg.connect(section["dsn"]) as conn:
        rows = {n: (c, s) for n, c, s in conn.execute(
            f'SELECT number, content, state FROM "{section["schema"]}".crystals').fetchall()}
    assert rows[2] == ("", "forgotten") and rows[7] == ("Crystal 7 from the files.", "deleted")
    assert rows[5] == ("Crystal 5 from the files.", "live")
    assert _call(tmp_path, "crystal_list") == {"current": [f"crystal_{i:03d}.md" for i in (3, 4, 5, 6)],
                                               "archived": ["crystal_001.md"], "window": 4}
    assert _call(tmp_path, "crystallize", {"content": "Crystal 8, in the table."})["created"] == "crystal_008.md"

    report = json.loads(pps(tmp_path, "crystals", "sync", "--entity", "lyra").stdout)
    assert (home / "crystals" / "crystal_008.md").read_text() == "Crystal 8, in the table."
    assert (home / "crystals" / "archive" / "crystal_003.md").is_file()  # rolled out of the window
    assert not (home / "crystals" / "crystal_003.md").exists()

    (home / "crystals" / "crystal_005.md").write_text("Crystal 5, edited by hand.")
    _call(tmp_path, "crystal_forget", {"name": "crystal_003.md"})
    report = json.loads(pps(tmp_path, "crystals", "sync", "--entity", "lyra").stdout)
    assert report["updated"] == ["crystal_005.md"] and "crystals/archive/crystal_003.md" in report["removed"]
    got = _call(tmp_path, "get_crystals", {"count": 4})["crystals"]
    assert [c["content"] for c in got if c["name"] == "crystal_005.md"] == ["Crystal 5, edited by hand."]
    assert not list(home.rglob("crystal_003.md"))

    (home / "crystals" / "crystal_006.md").write_text("Crystal 6, edited in the home.")
    with psycopg.connect(section["dsn"]) as conn:  # and meanwhile in the table (another server's sync)
        conn.execute(f'UPDATE "{section["schema"]}".crystals SET content = %s, version = version + 1 '
                     "WHERE number = 6", ("Crystal 6, edited elsewhere.",))
    out = pps(tmp_path, "crystals", "sync", "--entity", "lyra", check=False)
    assert out.returncode == 1 and json.loads(out.stdout)["conflicts"] == ["crystal_006.md"]
    assert "crystal_006.md" in out.stderr
    assert (home / "crystals" / "crystal_006.md").read_text() == "Crystal 6, edited in the home."
    got = _call(tmp_path, "get_crystals", {"count": 4})["crystals"]
    assert [c["content"] for c in got if c["name"] == "crystal_006.md"] == ["Crystal 6, edited elsewhere."]


def test_sync_on_a_file_store_says_what_to_do(tmp_path):
    init_entity(tmp_path, "lyra", "crystals")
    out = pps(tmp_path, "crystals", "sync", "--entity", "lyra", check=False)
    assert out.returncode == 2 and 'store = "postgres"' in out.stderr
