"""`pps demo` runs a fresh entity on the embedded defaults and prints what it remembers; it runs again (the
demo entity is recreated), from any folder, and writes nothing into the folder it is run from (issue 39)."""

import json
import os
import subprocess
import sys
from pathlib import Path

PPS = str(Path(sys.executable).parent / "pps")


def test_demo_runs_twice_from_any_folder_into_the_pps_root(tmp_path):
    root, elsewhere = tmp_path / "root", tmp_path / "somewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPS_")} | {"PPS_ROOT": str(root),
                                                                               "HOME": str(tmp_path)}
    for _ in range(2):
        out = subprocess.run([PPS, "demo"], capture_output=True, text=True, timeout=600, cwd=elsewhere, env=env,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        assert '## ambient_recall("startup")' in out.stdout and "=== AMBIENT RECALL MANIFEST ===" in out.stdout
        assert "cedar" in out.stdout.split("## ambient_recall(\"what wood")[1]
    assert list(elsewhere.iterdir()) == []  # nothing hidden in the folder it ran from
    assert "pps health --entity demo" in out.stdout
    health = subprocess.run([PPS, "health", "--entity", "demo", "--json"], capture_output=True, text=True,
                            timeout=300, cwd=elsewhere, env=env, stdin=subprocess.DEVNULL)
    assert health.returncode == 0, health.stdout + health.stderr
    assert json.loads(health.stdout)["layers"]["raw_capture"]["counts"]["messages"] == 7  # recreated, not added


def test_demo_never_replaces_a_folder_that_is_not_a_demo(tmp_path):
    home = tmp_path / "lyra"
    home.mkdir()
    (home / "pps.toml").write_text('entity = "lyra"\n')  # a real entity
    out = subprocess.run([PPS, "demo", "--home", str(home)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "is not a demo entity" in out.stdout + out.stderr
    assert (home / "pps.toml").read_text() == 'entity = "lyra"\n'
