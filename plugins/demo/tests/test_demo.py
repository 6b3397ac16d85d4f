"""`pps demo` runs a fresh entity on the embedded defaults and prints what it remembers."""

import subprocess
import sys
from pathlib import Path


def test_demo_runs(tmp_path):
    out = subprocess.run([str(Path(sys.executable).parent / "pps"), "demo", "--home", str(tmp_path / "demo")],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert '## ambient_recall("startup")' in out.stdout and "=== AMBIENT RECALL MANIFEST ===" in out.stdout
    assert "cedar" in out.stdout.split("## ambient_recall(\"what wood")[1]
