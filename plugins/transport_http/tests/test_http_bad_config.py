"""A wrong type in a plugin's section of pps.toml: `pps serve http` says so in one line (exit 2), no traceback."""

from pps_core.testing.server import init_entity, pps


def test_a_wrong_type_in_a_plugin_section_is_one_line(tmp_path):
    init_entity(tmp_path, "lyra", "sqlite,crystals,http", "[crystals]", 'window = "lots"')
    out = pps(tmp_path, "serve", "http", "--entity", "lyra", "--port", "0", check=False, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert lines == [lines[0]] and "invalid [crystals] settings" in lines[0] and "window" in lines[0], lines
