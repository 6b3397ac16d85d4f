"""Serverless `pps call` (issue 39 item 7): parameters are checked before any store opens, so a wrong one is
answered at once (`texture_delete '{"uuid": "not-a-uuid"}'` opened the graph database first: 10.6 s on a busy
machine before its clear error)."""

import subprocess
import sys

from pps_core.testing.server import pps, pps_env


def test_a_bad_uuid_is_refused_before_the_graph_opens(tmp_path):
    root = tmp_path / "root"
    out = pps(root, "init", "--entity", "full", "--plugins", "sqlite,crystals,chroma,embeddings,graphiti",
              "--timezone", "UTC", env=pps_env(root, HOME=str(tmp_path)))
    assert out.returncode == 0, out.stderr
    code = ("import sys\nfrom pps_core.cli import main\n"
            "rc = main(['call', '-e', 'full', 'texture_delete', '{\"uuid\": \"not-a-uuid\"}'])\n"
            "heavy = [m for m in ('chromadb', 'graphiti_core', 'kuzu', 'onnxruntime') if m in sys.modules]\n"
            "print('HEAVY', heavy, rc)\n")
    ran = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120,
                         env=pps_env(root, HOME=str(tmp_path)), stdin=subprocess.DEVNULL)
    assert "HEAVY [] 2" in ran.stdout, (ran.stdout, ran.stderr)
    assert "uuid" in ran.stderr and "'not-a-uuid' is not a uuid" in ran.stderr and "Traceback" not in ran.stderr
    assert sorted(p.name for p in (root / "full").iterdir()) == ["pps.toml", "token"]  # no store was opened
