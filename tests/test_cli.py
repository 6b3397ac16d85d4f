"""The `pps` command as a user runs it."""

import json
import subprocess
import sys

from pps_core.testing.server import pps, pps_env

PPS = [sys.executable, "-m", "pps_core.cli"]


def run(args, tmp_path, stdin=None):
    root = tmp_path / "root"
    return pps(root, *args, check=False, env=pps_env(root, HOME=str(tmp_path)), input=stdin)


def test_init_call_and_plugins(tmp_path):
    out = run(["init", "--entity", "lyra", "--plugins", "sqlite,crystals", "--timezone", "Europe/Berlin"], tmp_path)
    assert out.returncode == 0, out.stderr
    home = tmp_path / "root" / "lyra"
    assert 'plugins = ["sqlite", "crystals"]' in (home / "pps.toml").read_text()
    assert (home / "token").stat().st_mode & 0o777 == 0o600 and home.stat().st_mode & 0o777 == 0o700
    stored = run(["call", "-e", "lyra", "store_message",
                  '{"content": "Guten Morgen", "author_name": "Jeff", "channel": "terminal"}'], tmp_path)
    assert json.loads(stored.stdout)["id"] == 1
    piped = run(["call", "-e", "lyra", "raw_search", "-"], tmp_path, stdin='{"query": "morgen"}')
    assert json.loads(piped.stdout)["results"][0]["content"] == "Guten Morgen"
    text = run(["call", "-e", "lyra", "ambient_recall", '{"context": "startup"}', "--text"], tmp_path)
    assert "(CET, Europe/Berlin)" in text.stdout or "(CEST, Europe/Berlin)" in text.stdout
    assert "Jeff: Guten Morgen" in text.stdout
    plugins = run(["plugins", "-e", "lyra"], tmp_path)
    assert "sqlite       pps-sqlite" in plugins.stdout and "crystals" in plugins.stdout
    token = run(["token", "-e", "lyra"], tmp_path)
    assert token.stdout.strip() == (home / "token").read_text().strip()


def test_errors_are_one_clear_line_and_exit_2(tmp_path):
    run(["init", "--entity", "e", "--plugins", "sqlite"], tmp_path)
    for args, needle in [
        (["call", "-e", "e", "nope"], "unknown operation 'nope'"),
        (["call", "-e", "e", "raw_search", "{not json"], "params are not valid JSON"),
        (["call", "-e", "e", "get_turns_around", '{"timestamp": "soon"}'], "timestamp: cannot parse 'soon'"),
    ]:
        out = run(args, tmp_path)
        assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr


def test_init_refuses_a_bad_value_before_writing_anything(tmp_path):
    typo = run(["init", "--entity", "lyra", "--timezone", "America/Chicgo"], tmp_path)
    assert typo.returncode == 2 and "unknown time zone 'America/Chicgo'" in typo.stderr
    assert "Traceback" not in typo.stderr and "errors.pydantic.dev" not in typo.stderr
    assert not (tmp_path / "root" / "lyra" / "pps.toml").exists()
    fixed = run(["init", "--entity", "lyra", "--timezone", "America/Chicago", "--plugins", "sqlite"], tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    quoted = run(["init", "--entity", 'a"b', "--plugins", "sqlite"], tmp_path)
    assert quoted.returncode == 2 and "entity" in quoted.stderr and "Traceback" not in quoted.stderr
    assert not (tmp_path / "root" / 'a"b' / "pps.toml").exists()


def test_unknown_plugin_in_config_is_a_startup_error(tmp_path):
    refused = run(["init", "--entity", "typo", "--plugins", "sqlite,chorma"], tmp_path)
    assert refused.returncode == 2 and "no plugin named 'chorma' (installed: " in refused.stderr
    assert not (tmp_path / "root" / "typo" / "pps.toml").exists()  # refused before anything is written
    run(["init", "--entity", "typo", "--plugins", "sqlite"], tmp_path)
    toml = tmp_path / "root" / "typo" / "pps.toml"
    toml.write_text(toml.read_text().replace('"sqlite"', '"sqlite", "chorma"'))  # edited by hand
    out = run(["health", "-e", "typo"], tmp_path)
    assert out.returncode == 2 and "no plugin named 'chorma' (installed: " in out.stderr


def test_help_is_fast_and_imports_no_plugin(tmp_path):
    code = ("import sys\nfrom pps_core.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('chromadb', 'graphiti_core', 'mcp', 'fastapi', 'onnxruntime', 'sqlite_vec', 'kuzu') "
            "if m in sys.modules]\nprint('HEAVY', heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout and "ambient" not in out.stderr


def test_operations_lists_the_catalog(tmp_path):
    run(["init", "--entity", "e", "--plugins", "sqlite,crystals"], tmp_path)
    out = run(["operations", "-e", "e"], tmp_path)
    names = [line.split()[0] for line in out.stdout.splitlines()]
    assert {"ambient_recall", "store_message", "get_turns_around", "crystallize", "pps_health"} <= set(names)


def test_output_cut_short_by_a_pipe_is_not_a_traceback(tmp_path):
    run(["init", "--entity", "e", "--plugins", "sqlite"], tmp_path)
    turns = [{"content": "x" * 2_000, "author_name": "A", "channel": "c"} for _ in range(100)]
    run(["call", "-e", "e", "store_messages", "-"], tmp_path, stdin=json.dumps({"messages": turns}))
    env = pps_env(tmp_path / "root", HOME=str(tmp_path))
    proc = subprocess.Popen(PPS + ["call", "-e", "e", "get_turns_since", '{"timestamp": "2000-01-01"}'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.read(10)  # `pps call ... | head -c 10`
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


def test_a_misspelled_entity_is_an_error_not_a_new_memory(tmp_path):
    run(["init", "--entity", "lyra", "--plugins", "sqlite"], tmp_path)
    out = run(["call", "-e", "lyar", "summary_stats"], tmp_path)
    assert out.returncode == 2
    assert "no entity 'lyar'" in out.stderr and "pps init --entity lyar" in out.stderr and "lyra" in out.stderr
    assert not (tmp_path / "root" / "lyar").exists()


def test_init_writes_the_settings_hints_of_the_chosen_plugins_only(tmp_path):
    """`pps init` writes each chosen plugin's commented settings hint (``pps_init_hints``): the `[llm]` example
    comes from the llm plugin, so an entity without it gets none (the kernel knows no plugin's section)."""
    run(["init", "--entity", "bare", "--plugins", "sqlite,crystals"], tmp_path)
    bare = (tmp_path / "root" / "bare" / "pps.toml").read_text()
    assert "[llm]" not in bare and "base_url" not in bare
    run(["init", "--entity", "talks", "--plugins", "sqlite,llm"], tmp_path)
    talks = (tmp_path / "root" / "talks" / "pps.toml").read_text()
    assert "# [llm]" in talks and '# base_url = "http://127.0.0.1:11434/v1"' in talks
    checked = run(["plugins", "-e", "talks"], tmp_path)  # the hint is a comment: the file still loads
    assert checked.returncode == 0, checked.stderr
