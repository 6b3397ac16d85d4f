"""No ``pps`` command, and no process one starts, imports from the working directory (issue 35 item 1).

``pps serve mcp`` registered as README shows is started by Claude Code in the user's project, and a repository is
untrusted. The ``pps`` console script itself keeps the project off ``sys.path`` (Python puts the script's folder
there), but its children did not: the word-photo index's fork server and multiprocessing's resource tracker are
started as ``python -c ...``, which puts the working directory first, so a project's ``multiprocessing/`` or
``fcntl.py`` ran inside the process that holds the entity's memory. Here every such module of a hostile project
writes a marker when imported; the real console script is run from that folder (the index process started by
every command, as the word-photo layer opens it); no marker may appear and every command must work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from pps_core.testing.server import init_entity, pps, pps_env, start_server

PPS = str(Path(sys.executable).parent / "pps")
#: Imported early by a child PPS starts (multiprocessing's fork server and resource tracker, the index process
#: and what it preloads) or by the kernel and plugins: packages as folders, the rest as modules.
PACKAGES = ("multiprocessing", "chromadb", "pps_core", "pps_chroma", "pps_embeddings", "mcp", "numpy", "onnxruntime",
            "pydantic", "httpx", "uvicorn", "starlette")
MODULES = ("fcntl", "json", "socket", "selectors", "signal", "struct", "threading", "tempfile", "sqlite3", "select",
           "tokenize", "runpy", "pickle", "weakref", "atexit")

MARKER = ("import os as _os, sys as _sys\n"
          "_fd = _os.open({marker!r} + '.' + str(_os.getpid()), _os.O_WRONLY | _os.O_CREAT, 0o600)\n"
          "_os.write(_fd, ' '.join(_sys.argv).encode())\n"
          "_os.close(_fd)\n")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(root of an entity with a word-photo, hostile project folder, markers folder)."""
    tmp = tmp_path_factory.mktemp("cwd")
    root, project, markers = tmp / "root", tmp / "untrusted-repo", tmp / "markers"
    init_entity(root, "lyra", "sqlite,chroma,embeddings,mcp,http,claude_code")
    pps(root, "call", "--entity", "lyra", "anchor_save", json.dumps({"title": "Harbour", "content": "Boats at dawn."}))
    project.mkdir()
    markers.mkdir()
    for name in PACKAGES:
        (project / name).mkdir()
        (project / name / "__init__.py").write_text(MARKER.format(marker=str(markers / name)))
    for name in MODULES:
        (project / f"{name}.py").write_text(MARKER.format(marker=str(markers / name)))
    return root, project, markers


@pytest.fixture(autouse=True)
def _fresh_markers(hostile):
    """Each test sees only the markers its own commands left."""
    for marker in hostile[2].iterdir():
        marker.unlink()


def imported(markers: Path) -> list[str]:
    """What the project's modules saw: module name and the command line that imported it."""
    return [f"{p.name}: {p.read_text()[:300]}" for p in sorted(markers.iterdir())]


def run(root: Path, project: Path, *args: str, program: tuple[str, ...] = (PPS,)) -> subprocess.CompletedProcess:
    return subprocess.run([*program, *args], cwd=project, env=pps_env(root), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=180)


def test_health_call_and_doctor_import_nothing_from_the_project(hostile):
    root, project, markers = hostile
    health = run(root, project, "health", "--entity", "lyra")
    assert health.returncode == 0, health.stderr
    assert "core_anchors" in health.stdout
    found = run(root, project, "call", "--entity", "lyra", "anchor_search", json.dumps({"query": "boats", "limit": 1}))
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["source"] == "harbour.md"
    doctor = run(root, project, "doctor", "--entity", "lyra", "--settings", str(project / "no-settings.json"))
    assert "Traceback" not in doctor.stdout + doctor.stderr
    assert "[ok  ] stores: " in doctor.stdout and "core_anchors: word photos 1" in doctor.stdout, doctor.stdout
    assert imported(markers) == []


def test_python_dash_e_keeps_the_children_off_the_project(hostile):
    """``python -E``: the children would ignore ``PYTHONSAFEPATH`` (they get ``-E`` too)."""
    root, project, markers = hostile
    dash_e = run(root, project, "-E", PPS, "health", "--entity", "lyra", program=(sys.executable,))
    assert dash_e.returncode == 0, dash_e.stderr
    assert "core_anchors" in dash_e.stdout
    assert imported(markers) == []


def test_python_dash_m_keeps_what_it_imports_later_off_the_project(hostile, tmp_path):
    """``python -m`` puts the working directory first on ``sys.path``: what Python imports before PPS runs comes
    from there (Python's own rule; README says to run ``pps`` or ``python -P -m``), but nothing after: the plugins,
    chromadb, the fork server and its children."""
    root = hostile[0]
    project, markers = tmp_path / "late-repo", tmp_path / "late-markers"
    project.mkdir()
    markers.mkdir()
    for name in ("multiprocessing", "chromadb", "pps_chroma", "pps_embeddings", "onnxruntime"):
        (project / name).mkdir()
        (project / name / "__init__.py").write_text(MARKER.format(marker=str(markers / name)))
    found = run(root, project, "-m", "pps_core.cli", "call", "--entity", "lyra", "anchor_search",
                json.dumps({"query": "boats", "limit": 1}), program=(sys.executable,))
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["source"] == "harbour.md"
    assert imported(markers) == []


async def test_serve_mcp_from_the_project(hostile):
    root, project, markers = hostile
    params = StdioServerParameters(command=PPS, args=["serve", "mcp", "--entity", "lyra"], env=pps_env(root),
                                   cwd=str(project))
    with open(project.parent / "mcp-stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            found = await client.call_tool("anchor_search", {"query": "boats in the morning", "limit": 1})
    assert not found.is_error, found
    assert found.structured_content["results"][0]["source"] == "harbour.md"
    assert imported(markers) == []


def test_serve_http_from_the_project(hostile):
    root, project, markers = hostile
    server = start_server(root, "--entity", "lyra", program=(PPS,), cwd=project, log_name="cwd-server.log")
    try:
        answer = server.call("anchor_search", {"query": "boats", "limit": 1})
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"][0]["source"] == "harbour.md"
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
    finally:
        server.stop()
    assert imported(markers) == []
