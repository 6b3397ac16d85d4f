"""`pps serve mcp --local` on an entity another process owns: one clear line, exit 2, no traceback."""

import subprocess
import sys

from pps_core import Memory
from pps_core.testing.server import init_entity, pps_env


async def test_local_on_an_owned_entity_is_a_clear_error(tmp_path):
    init_entity(tmp_path, "lyra", "sqlite,mcp,http")
    async with Memory.for_entity("lyra", home=tmp_path / "lyra"):  # this process owns the stores
        proc = subprocess.run([sys.executable, "-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra", "--local"],
                              env=pps_env(tmp_path), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "pps serve mcp: error: " in proc.stderr and "owned by another process" in proc.stderr
