"""`pps serve mcp --local` on an entity another process owns: one clear line, exit 2, no traceback."""

import os
import subprocess
import sys

from pps_core import Memory


def _env(root):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPS_")}
    env["PPS_ROOT"] = str(root)
    return env


async def test_local_on_an_owned_entity_is_a_clear_error(tmp_path):
    subprocess.run([sys.executable, "-m", "pps_core.cli", "init", "--entity", "lyra", "--plugins",
                    "sqlite,mcp,http", "--timezone", "UTC"], check=True, env=_env(tmp_path), capture_output=True)
    async with Memory.for_entity("lyra", home=tmp_path / "lyra"):  # this process owns the stores
        proc = subprocess.run([sys.executable, "-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra", "--local"],
                              env=_env(tmp_path), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "pps serve mcp: error: " in proc.stderr and "owned by another process" in proc.stderr
