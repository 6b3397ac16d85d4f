"""pps_core.safepath: the working directory, and the folder Python put first, leave ``sys.path``; children start
with neither (issue 35 item 1; the commands themselves: test_isolation_cwd.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pps_core.safepath import off_cwd


def test_off_cwd_drops_what_names_the_working_directory(tmp_path):
    project, bin_dir, lib = tmp_path / "project", tmp_path / "venv" / "bin", tmp_path / "lib"
    for folder in (project, bin_dir, lib):
        folder.mkdir(parents=True)
    (bin_dir / "pps").write_text("#!python\n")
    (project / "link").symlink_to(project)
    path = [str(bin_dir), "", ".", "src", str(lib), str(project), str(project / "link"), str(project) + "/"]
    assert off_cwd(path, str(project), str(bin_dir / "pps"), prepended=True) == [str(lib)]
    # with -P nothing was put first: the script's folder is an entry someone chose
    assert off_cwd(path, str(project), str(bin_dir / "pps"), prepended=False) == [str(bin_dir), str(lib)]
    # `python -c` (argv[0] '-c'), a removed working directory: only '' and relative entries name it
    assert off_cwd(["", str(lib), "x"], None, "-c", prepended=True) == [str(lib)]


CHILD = "import json, sys; print(json.dumps(sys.path))"
PARENT = f"""
import json, subprocess, sys
from pps_core.safepath import keep_cwd_off_path
keep_cwd_off_path()
child = subprocess.run([sys.executable, "-c", {CHILD!r}], capture_output=True, text=True, check=True).stdout
print(json.dumps({{"path": sys.path, "child": json.loads(child), "flags": [sys.flags.safe_path,
                  sys.flags.ignore_environment]}}))
"""


def run_parent(project: Path, *flags: str) -> dict:
    done = subprocess.run([sys.executable, *flags, "-c", PARENT], cwd=project, capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout)


def test_the_command_and_its_children_start_off_the_working_directory(tmp_path):
    for flags in ((), ("-E",)):
        seen = run_parent(tmp_path, *flags)
        assert seen["flags"] == [bool(flags)] * 2  # under -E: started again with -P, which children inherit
        for path in (seen["path"], seen["child"]):
            assert "" not in path and str(tmp_path) not in path, (flags, path)
        assert all(Path(p).is_absolute() for p in seen["path"])
