"""The plugins a new entity loads come from the plugins (``PPS_DEFAULT`` in their module), not from a list in the
kernel (issue 24 item 6): the bundled ones keep their order, and an installed third-party plugin can join."""

import json
import subprocess
import sys
import textwrap

from pps_core.plugins import default_plugins
from pps_core.testing.server import pps


def test_the_bundled_plugins_declare_the_defaults_in_their_order():
    assert default_plugins() == ["sqlite", "crystals", "chroma", "embeddings", "llm", "graphiti", "recap", "upkeep",
                                 "mcp", "http"]


def _install(site, name: str, rank: str) -> None:
    """A real (unpacked) distribution on the path: its module and its dist-info with the entry point."""
    (site / f"{name}.py").write_text(f"PPS_DEFAULT = {rank}\n")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[pps.plugins]\n{name} = {name}\n")


def test_an_installed_plugin_that_says_so_is_a_default_in_its_place(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "pps_early", "15")
    _install(site, "pps_flagless", "None")
    _install(site, "pps_yes", "True")  # not a number: not a default
    code = textwrap.dedent("""
        import json, sys
        from pps_core.plugins import default_plugins
        print(json.dumps(default_plugins()))
    """)
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, cwd=tmp_path, check=True)
    found = json.loads(out.stdout)
    assert found[:3] == ["sqlite", "pps_early", "crystals"] and "pps_flagless" not in found and "pps_yes" not in found


def test_pps_init_writes_the_defaults(tmp_path):
    pps(tmp_path, "init", "--entity", "lyra", "--timezone", "UTC")
    toml = (tmp_path / "lyra" / "pps.toml").read_text()
    assert f"plugins = {json.dumps(default_plugins())}" in toml
