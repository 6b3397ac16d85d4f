"""The hooks run nothing from the project they sit in (issue 22 item 1), and a killed server is replaced at once
(issue 22 item 14).

Claude Code runs every hook, and starts the MCP server, with the user's project as working directory. A
repository is untrusted: a ``numpy.py``, ``json.py`` or ``sitecustomize.py`` in it must never be imported by a
process PPS starts (the hook itself, the server the first hook starts, the recap the last hook starts, the MCP
server ``pps setup`` registers, the Claude Code plugin's wrapper). Each hostile module here writes a marker file
when imported; the real hooks are driven from that folder with real Claude Code payloads; no marker may appear.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pps_claude_code.install import hooks_config
from pps_claude_code.setup import mcp_entry

from pps_core.owner import read_owner
from pps_core.testing.server import pps as run_pps
from pps_core.testing.server import pps_env

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
PLUGIN_BIN = Path(__file__).resolve().parents[1] / "claude-plugin" / "bin"
SESSION = "5f3c2a9e-3333-4c7e-9a51-0d6b2e7c0a01"
#: Names a process PPS starts imports (or looks up) early: standard library, PPS itself, its dependencies,
#: and the modules ``site`` runs on its own.
HOSTILE = ("numpy", "json", "re", "socket", "fcntl", "threading", "tomllib", "glob", "site", "sitecustomize",
           "usercustomize", "pps_core", "pps_claude_code", "pps_recap", "pps_http", "pydantic", "pluggy", "uvicorn",
           "httpx", "sqlite3", "typing_extensions", "argparse", "importlib_metadata", "encodings", "runpy", "io",
           "subprocess", "signal", "tempfile", "hashlib", "uuid", "zoneinfo", "mcp", "anyio", "starlette")


def hostile_project(tmp_path: Path) -> tuple[Path, Path]:
    """A project folder whose every module writes ``markers/<name>`` when imported."""
    project, markers = tmp_path / "untrusted-repo", tmp_path / "markers"
    project.mkdir()
    markers.mkdir()
    for name in HOSTILE:
        (project / f"{name}.py").write_text(
            "import os as _os, sys as _sys\n"
            f"_fd = _os.open({str(markers / name)!r} + '.' + str(_os.getpid()), _os.O_WRONLY | _os.O_CREAT, 0o600)\n"
            "_os.write(_fd, ' '.join(_sys.argv).encode())\n"
            "_os.close(_fd)\n")
    return project, markers


def imported(markers: Path) -> list[str]:
    """What the project folder's modules saw (module name and the command that imported it)."""
    return [f"{p.name}: {p.read_text()[:300]}" for p in sorted(markers.iterdir())]


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return pps_env(root, **{"PPS_CLAUDE_CODE_USER_NAME": "Jeff", "PPS_CLAUDE_CODE_AUTOSTART": "true",
                            "PPS_CLAUDE_CODE_SERVER_START_S": "90", **extra})


def payload(event: str, transcript: Path, project: Path, session: str = SESSION, **extra) -> dict:
    """What Claude Code sends on stdin (hooks reference: session_id, transcript_path, cwd, hook_event_name)."""
    return {"session_id": session, "transcript_path": str(transcript), "cwd": str(project),
            "permission_mode": "default", "hook_event_name": event, **extra}


def run_hook(root: Path, event: str, body: dict, project: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    """The command `pps setup` installs, through a shell, in the project folder, the event JSON on stdin."""
    command = " ".join([hooks_config("lyra", root / "lyra")[event][0]["hooks"][0]["command"], *extra])
    return subprocess.run(command, shell=True, input=json.dumps(body), capture_output=True, text=True,
                          env=env_for(root, **env), cwd=project, timeout=180)


def transcript_in(root: Path, session: str = SESSION) -> Path:
    """Where Claude Code keeps a session's transcript (outside the project)."""
    path = root / ".claude" / "projects" / "-untrusted-repo" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FIXTURE.read_text().replace("5f3c2a9e-1111-4c7e-9a51-0d6b2e7c0a01", session))
    return path


def wait_for(predicate, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def stop_owner(home: Path) -> None:
    owner = read_owner(home)
    if owner and owner.get("pid"):
        try:
            os.kill(owner["pid"], signal.SIGTERM)
        except ProcessLookupError:
            return
        wait_for(lambda: read_owner(home) is None, 60)


@pytest.fixture
def root(tmp_path):
    run_pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite,crystals,recap", "--timezone", "UTC",
            env=env_for(tmp_path))
    yield tmp_path
    stop_owner(tmp_path / "lyra")


def test_hooks_started_from_a_hostile_project_never_import_from_it(root, tmp_path):
    project, markers = hostile_project(tmp_path)
    home = root / "lyra"
    transcript = transcript_in(root)

    # the first hook of a session answers from a glance (the full path) and starts the server (spawned)
    start = run_hook(root, "SessionStart", payload("SessionStart", transcript, project, source="startup"), project)
    assert imported(markers) == []
    assert "hookSpecificOutput" in json.loads(start.stdout), start
    wait_for(lambda: (read_owner(home) or {}).get("address"))  # the hooks' server runs
    # warm hooks: the fast path (python -S, no kernel)
    recall = run_hook(root, "UserPromptSubmit", payload("UserPromptSubmit", transcript, project,
                                                         prompt="semicolon export"), project, "--recall")
    assert imported(markers) == [] and "semicolon-separated" in recall.stdout, recall
    assert run_hook(root, "Stop", payload("Stop", transcript, project), project).stdout == ""
    # the last hook starts the recap in its own process
    end = run_hook(root, "SessionEnd", payload("SessionEnd", transcript, project, reason="exit"), project)
    assert end.returncode == 0 and end.stdout == ""
    wait_for(lambda: (home / "_recap.md").is_file() or imported(markers))
    assert imported(markers) == []

    # no server: the full path in the hook itself, and its recap process
    stop_owner(home)
    other = transcript_in(root, "5f3c2a9e-4444-4c7e-9a51-0d6b2e7c0a01")
    body = payload("Stop", other, project, session="5f3c2a9e-4444-4c7e-9a51-0d6b2e7c0a01")
    assert run_hook(root, "Stop", body, project, PPS_CLAUDE_CODE_AUTOSTART="false").stdout == ""
    assert imported(markers) == []
    (home / "_recap.md").unlink()
    body = payload("SessionEnd", other, project, session="5f3c2a9e-4444-4c7e-9a51-0d6b2e7c0a01", reason="exit")
    assert run_hook(root, "SessionEnd", body, project, PPS_CLAUDE_CODE_AUTOSTART="false").stdout == ""
    wait_for(lambda: (home / "_recap.md").is_file() or imported(markers))
    assert imported(markers) == []

    # the Claude Code plugin's wrapper, from the same folder
    wrapped = subprocess.run([str(PLUGIN_BIN / "pps-hook"), "Stop"], input=json.dumps(payload("Stop", transcript,
                             project)), capture_output=True, text=True, cwd=project, timeout=180,
                             env=env_for(root, PPS_PYTHON=sys.executable, PPS_ENTITY="lyra",
                                         PPS_CLAUDE_CODE_AUTOSTART="false"))
    assert imported(markers) == []
    assert wrapped.returncode == 0 and "systemMessage" not in wrapped.stdout, wrapped
    # the MCP server `pps setup` registers, as Claude Code starts it (in the project; stdin closed at once)
    entry = mcp_entry("lyra", home, "essential")
    served = subprocess.run([entry["command"], *entry["args"]], stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, cwd=project, timeout=180, env={**env_for(root), **entry["env"]})
    assert imported(markers) == []
    assert "Traceback" not in served.stderr, served.stderr
    assert "shadowed" not in (home / "logs" / "server.log").read_text()


def _subreaper(on: bool) -> None:
    """Orphans of this process's children become its own (not init's): a killed server stays a zombie until
    reaped, as it does in a container whose init does not reap. ``kill(pid, 0)`` still succeeds for it."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, int(on), 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux only")
def test_the_first_hook_after_the_server_was_killed_starts_another(root, tmp_path):
    home = root / "lyra"
    transcript = transcript_in(root)
    project = tmp_path / "repo"
    project.mkdir()
    dead = None
    _subreaper(True)
    try:
        start = run_hook(root, "SessionStart", payload("SessionStart", transcript, project, source="startup"),
                         project)
        assert "hookSpecificOutput" in json.loads(start.stdout), start
        wait_for(lambda: (read_owner(home) or {}).get("address"))
        dead = read_owner(home)["pid"]
        os.kill(dead, signal.SIGKILL)
        wait_for(lambda: read_owner(home) is None, 30)  # the lock is free at once
        # dead, not reaped: a zombie, as under an init that does not reap (kill(pid, 0) still succeeds)
        assert os.waitid(os.P_PID, dead, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

        # a new session: the first prompt starts a new server, not waiting for the dead one (before: the whole
        # budget, then "the server (pid <dead>) is still starting"); its turns are stored by the next hook
        other = transcript_in(root, "5f3c2a9e-5555-4c7e-9a51-0d6b2e7c0a01")
        body = payload("UserPromptSubmit", other, project, session="5f3c2a9e-5555-4c7e-9a51-0d6b2e7c0a01",
                       prompt="and the export?")
        after = run_hook(root, "UserPromptSubmit", body, project, PPS_CLAUDE_CODE_TIMEOUT_S="60")
        assert after.returncode == 0 and after.stdout == "", after.stdout
        log = (home / "logs" / "hooks.log").read_text().splitlines()
        assert "via=glance" in log[-2] and "UserPromptSubmit: server started (pid" in log[-1], log[-3:]
        wait_for(lambda: (read_owner(home) or {}).get("address"))
        owner = read_owner(home)
        assert owner and owner["pid"] != dead and owner["address"]
        stop = payload("Stop", other, project, session="5f3c2a9e-5555-4c7e-9a51-0d6b2e7c0a01")
        assert run_hook(root, "Stop", stop, project).stdout == ""
        log = (home / "logs" / "hooks.log").read_text().splitlines()
        assert log[-1].endswith("new_turns=12 via=server"), log[-3:]
        assert (home / "logs" / "server.log").read_text().count("starting for entity lyra") == 2
    finally:
        _subreaper(False)
        if dead:
            try:
                os.waitpid(dead, 0)
            except ChildProcessError:
                pass
        stop_owner(home)
        while True:  # reap the servers this test adopted
            try:
                if os.waitpid(-1, os.WNOHANG) == (0, 0):
                    break
            except ChildProcessError:
                break


def test_hostile_project_fixture_would_be_caught(tmp_path):
    """The markers work: a plain ``python -c`` in the folder imports its ``json.py``."""
    project, markers = hostile_project(tmp_path)
    subprocess.run([sys.executable, "-c", "import json"], cwd=project, check=True, timeout=60)
    assert [p.name.split(".")[0] for p in markers.iterdir()] == ["json"]
    shutil.rmtree(markers)


def test_pps_installed_in_the_user_site_is_isolated_with_E_P(tmp_path, monkeypatch):
    """``pip install --user``: ``-I`` would hide PPS itself, so ``-E -P``, which still keeps the folder off
    sys.path (and ignores PYTHONPATH)."""
    import site

    import pps_hooks
    from pps_hooks import isolated

    assert isolated.flags() == ["-I"]
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(Path(pps_hooks.__file__).parents[1]))
    assert isolated.flags() == ["-E", "-P"]
    project, markers = hostile_project(tmp_path)
    done = subprocess.run([*isolated.python("-c", "import json, numpy")], cwd=project, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(project)})
    assert imported(markers) == [] and done.returncode == 0, done.stderr  # the real json and numpy


def test_doctor_warns_about_hooks_installed_before_isolation(tmp_path):
    """Hooks installed by an older PPS (``python -S -c``) still import from the project: `pps doctor` says so."""
    run_pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite", env=env_for(tmp_path))
    settings = tmp_path / "settings.json"
    config = hooks_config("lyra", tmp_path / "lyra")
    settings.write_text(json.dumps({"hooks": config}))
    fine = run_pps(tmp_path, "doctor", "--entity", "lyra", "--settings", str(settings), check=False,
                   env=env_for(tmp_path))
    assert "[ok  ] hooks: SessionStart, UserPromptSubmit, Stop, PreCompact, SessionEnd" in fine.stdout, fine.stdout
    for groups in config.values():
        hook = groups[0]["hooks"][0]
        hook["command"] = hook["command"].replace(" -I -S -c ", " -S -c ")
    settings.write_text(json.dumps({"hooks": config}))
    old = run_pps(tmp_path, "doctor", "--entity", "lyra", "--settings", str(settings), check=False,
                  env=env_for(tmp_path))
    assert ("(SessionStart, UserPromptSubmit, Stop, PreCompact, SessionEnd installed by an older PPS: they can "
            "import from the project folder") in old.stdout, old.stdout
