"""The word-photo index's fork server never imports from the working directory, whoever started the process.

`pps` keeps the working directory off sys.path for itself and its children (pps_core.safepath), but a program
that embeds PPS (a script started as `python host.py` in a project folder) did not: CPython starts the fork server
and its resource tracker as `python -c ...` in the caller's folder, so a project's `multiprocessing/` ran there."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HOST = textwrap.dedent("""
    import sys
    sys.path[:] = [p for p in sys.path if p]       # the host itself imports nothing from the project
    from pps_chroma.index import _CTX, safe_children
    def nothing():
        pass
    if __name__ == "__main__":
        proc = _CTX.Process(target=nothing)
        with safe_children():
            proc.start()
        proc.join(60)
        print("exit", proc.exitcode)
""")


def test_the_fork_server_of_an_embedding_program_imports_nothing_from_its_folder(tmp_path):
    project = tmp_path / "project"
    (project / "multiprocessing").mkdir(parents=True)
    marker = tmp_path / "PWNED"
    (project / "multiprocessing" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (project / "fcntl.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    host = tmp_path / "host" / "host.py"
    host.parent.mkdir()
    host.write_text(HOST)
    out = subprocess.run([sys.executable, str(host)], cwd=project, capture_output=True, text=True, timeout=120)
    assert not marker.exists(), "a child of the word-photo index imported the project's code"
    assert out.returncode == 0 and "exit 0" in out.stdout, out.stderr
