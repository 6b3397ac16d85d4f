"""Helpers for a host's done-when test: a fresh user's environment, ``pps`` in a subprocess, a hostile project to
run hooks in, and a hook command line run as a host runs it (a shell, the payload on stdin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HOST_VARIABLES = ("PPS_", "GEMINI", "CODEX", "COPILOT", "CLAUDE")


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """A fresh user at ``home``: HOME, PPS_ROOT, the hosts' config homes there, nothing from the developer's shell."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(HOST_VARIABLES)}
    env.update(HOME=str(home), PPS_ROOT=str(home / ".pps"), USER="someone", GEMINI_CLI_HOME=str(home),
               CODEX_HOME=str(home / ".codex"), XDG_CONFIG_HOME=str(home / ".config"))
    env.update(extra)
    return env


def pps(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-I", "-m", "pps_core.cli", *args], env=env_for(home),
                          capture_output=True, text=True, timeout=180, cwd=home)
    if check:
        assert proc.returncode == 0, f"pps {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def hostile_project(tmp: Path) -> tuple[Path, Path]:
    """A repository whose json.py would leave a marker in the second folder if a hook imported it."""
    project, markers = tmp / "project", tmp / "markers"
    project.mkdir()
    markers.mkdir()
    (project / "json.py").write_text(f"open({str(markers / 'json')!r}, 'w').close()\n")
    return project, markers


def run_as_host(command: str, payload: dict[str, Any], home: Path, cwd: Path, **extra: str) -> dict[str, Any]:
    """Run a hook command line as the agent hosts do: through a shell, the payload as JSON on stdin, in the user's
    project. Exit 0 with JSON (or nothing) on stdout is the contract of every host."""
    proc = subprocess.run(command, shell=True, input=json.dumps(payload), capture_output=True, text=True,
                          env=env_for(home, **extra), cwd=cwd, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def stored_turns(home: Path, entity: str = "lyra") -> list[dict[str, Any]]:
    out = pps(home, "call", "--entity", entity, "get_turns_since_summary", '{"limit": 500, "oldest_first": true}')
    return list(json.loads(out.stdout)["turns"])
