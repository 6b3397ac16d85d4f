"""Small things a new user read (issue 39 item 10): each says plainly what it means."""

from __future__ import annotations

import json

from pps_core.testing.server import pps, pps_env


def run(tmp_path, *args):
    root = tmp_path / "root"
    return pps(root, *args, check=False, env=pps_env(root, HOME=str(tmp_path)))


def test_a_bad_entity_name_is_answered_in_words_not_a_regex(tmp_path):
    out = run(tmp_path, "init", "--entity", "my entity!", "--plugins", "sqlite")
    assert out.returncode == 2 and "^[A-Za-z0-9]" not in out.stderr, out.stderr
    assert "letters, digits" in out.stderr and "'my entity!'" in out.stderr


def test_serve_without_a_transport_names_the_transports(tmp_path):
    out = run(tmp_path, "serve")
    assert out.returncode == 2 and "args" not in out.stderr, out.stderr
    assert "pps serve needs a transport" in out.stderr and "mcp" in out.stderr and "http" in out.stderr


def test_import_help_names_its_options_plainly(tmp_path):
    out = run(tmp_path, "import", "--help")
    assert out.returncode == 0 and "_GROUP" not in out.stdout, out.stdout
    assert "--entity NAME" in out.stdout and "--home DIR" in out.stdout


def test_an_import_of_only_new_turns_does_not_speak_of_a_rest(tmp_path):
    assert run(tmp_path, "init", "--entity", "e", "--plugins", "sqlite", "--timezone", "UTC").returncode == 0
    lines = tmp_path / "turns.jsonl"
    lines.write_text("".join(json.dumps({"content": f"turn {i}", "author_name": "Jeff", "channel": "terminal",
                                         "created_at": f"2026-01-01T00:0{i}:00Z"}) + "\n" for i in range(3)))
    first = run(tmp_path, "import", "jsonl", str(lines), "--entity", "e")
    assert first.returncode == 0 and "3 new;" in first.stdout and "the rest" not in first.stdout, first.stdout
    again = run(tmp_path, "import", "jsonl", str(lines), "--entity", "e")
    assert "0 new (the 3 read were already stored)" in again.stdout, again.stdout


def test_two_entities_never_differ_only_in_case(tmp_path):
    assert run(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite").returncode == 0
    out = run(tmp_path, "init", "--entity", "Lyra", "--plugins", "sqlite")
    assert out.returncode == 2 and "entity 'lyra' exists; 'Lyra' differs only in case" in out.stderr, out.stderr
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["lyra"]


def test_health_says_an_llm_plugin_is_loaded_but_not_configured(tmp_path):
    assert run(tmp_path, "init", "--entity", "e", "--plugins", "sqlite,llm", "--timezone", "UTC").returncode == 0
    out = run(tmp_path, "health", "--entity", "e")
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("LLM:"))
    assert "not configured" in line and "no plugin of this entity provides" not in line, line
    assert "[llm] base_url and model" in line


def test_a_plugin_that_is_not_installed_says_what_installs_it(monkeypatch):
    from pps_core import plugins
    from pps_core.errors import ConfigError

    monkeypatch.setattr(plugins, "_product_requires", lambda: [
        'pps-explorer==0.1.0; extra == "explorer"', 'pps-explorer==0.1.0; extra == "all"', "pps-sqlite==0.1.0"])
    monkeypatch.setattr(plugins, "installed_plugins", lambda: {"sqlite": "pps_sqlite.plugin"})
    import pytest

    with pytest.raises(ConfigError, match=r"no plugin named 'explorer' .*pip install 'pps\[explorer\]'"):
        plugins.build_plugin_manager(["sqlite", "explorer"])
    with pytest.raises(ConfigError, match=r"no plugin named 'nosuch' .*pip install pps-nosuch"):
        plugins.build_plugin_manager(["nosuch"])
    with pytest.raises(ConfigError, match=r"no plugin named 'sqlit' .*did you mean 'sqlite'") as err:
        plugins.build_plugin_manager(["sqlit"])
    assert "pip install" not in str(err.value)  # a typo, not a missing install


def test_the_plugin_listing_shows_no_internal_part_of_a_plugin(tmp_path):
    from pps_core.testing.server import init_entity, start_server

    init_entity(tmp_path, "lyra", "crystals,mcp,http")
    server = start_server(tmp_path, "--entity", "lyra")
    try:
        names = [p["name"] for p in server.call("pps_health", {}).json()["plugins"]]
    finally:
        server.stop()
    assert names == ["crystals", "mcp", "http"], names  # the MCP resources' listener is part of mcp
