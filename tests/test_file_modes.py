"""Files 0600 and folders 0700 wherever PPS creates them, the CLI included (issue 14): the main CLI journeys
run under a permissive umask (022), then every path under the entity's home (and the restored one, and the
archive) is checked: no file group/other-readable, no folder group/other-accessible."""

import os
import stat
from pathlib import Path

import pytest

from pps_core.testing.server import pps

TRANSCRIPT = Path(__file__).parents[1] / "plugins" / "recap" / "tests" / "fixtures" / "claude_code_session.jsonl"


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def loose_paths(*roots):
    """Every path under ``roots`` (each root included) that group or other may read or enter."""
    loose = []
    for root in roots:
        paths = [root]
        for base, dirs, files in os.walk(root):
            paths += [os.path.join(base, n) for n in dirs + files]
        for path in paths:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                loose.append(f"{path} is a symlink")
            elif st.st_mode & 0o077:
                loose.append(f"{oct(stat.S_IMODE(st.st_mode))} {os.path.relpath(path, os.path.dirname(root))}")
    return loose


def run(root, *args):
    out = pps(root, *args, check=False)
    assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-3000:])
    return out


def test_cli_journeys_leave_no_path_readable_by_others(tmp_path, umask_022):
    root = tmp_path / "pps-root"  # $PPS_ROOT (~/.pps) does not exist yet: init creates it
    run(root, "init", "--entity", "lyra", "--timezone", "UTC")  # the embedded default plugins
    calls = [("store_message", '{"content": "Lyra met Jeff", "author_name": "Jeff", "channel": "terminal"}'),
             ("anchor_save", '{"content": "the first light", "title": "first light"}'),
             ("crystallize", '{"content": "a crystal"}'),
             ("texture_add_triplet", '{"source": "Lyra", "relationship": "KNOWS", "target": "Jeff"}')]
    for op, params in calls:
        run(root, "call", "--entity", "lyra", op, params)
    run(root, "reindex", "--entity", "lyra", "--full")
    run(root, "import", "--entity", "lyra", "claude-code", str(TRANSCRIPT))
    archive = tmp_path / "out" / "lyra.tar.gz"
    archive.parent.mkdir(mode=0o700)
    run(root, "backup", "--entity", "lyra", str(archive))
    run(root, "restore", "--entity", "nova", str(archive))
    run(root, "call", "--entity", "nova", "store_message",
        '{"content": "after the restore", "author_name": "Jeff", "channel": "terminal"}')
    assert (root / "nova" / "pps.toml").exists() and (root / "lyra" / "pps.toml").exists()
    assert loose_paths(str(root), str(archive)) == []
