"""One-step install and hooks you can see: `pps setup claude-code` on a fresh HOME, `pps hooks status`,
`pps hooks uninstall`, `pps doctor`, and the Claude Code plugin validated by Claude Code's own CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SESSION = "5f3c2a9e-1111-4c7e-9a51-0d6b2e7c0a01"


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """A fresh user: HOME, no PPS_* from the developer's shell, no `claude` on PATH (the file path is used)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PPS_", "CLAUDE"))}
    env.update(HOME=str(home), PPS_ROOT=str(home / ".pps"), USER="someone",
               PATH=os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                    if not (Path(p) / "claude").exists()))
    env.update(extra)
    return env


def pps(home: Path, *args: str, check: bool = True, stdin: str = "", **extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "pps_core.cli", *args], env=env_for(home, **extra), input=stdin,
                          capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"pps {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def stop_server(home: Path) -> None:
    """Stop the server the hooks started (its pid is in the owner lock), if any."""
    lock = home / ".pps" / "lyra" / "owner.lock"
    try:
        pid = json.loads(lock.read_text() or "{}").get("pid")
    except (OSError, ValueError):
        return
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


@pytest.fixture
def home(tmp_path):
    yield tmp_path
    stop_server(tmp_path)


def installed_command(home: Path, event: str) -> str:
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    return settings["hooks"][event][0]["hooks"][0]["command"]


def run_installed(home: Path, event: str, body: dict) -> dict:
    proc = subprocess.run(installed_command(home, event), shell=True, input=json.dumps(body), capture_output=True,
                          text=True, env=env_for(home), timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def test_setup_on_a_fresh_home_gives_a_working_install(home):
    out = pps(home, "setup", "claude-code", "--entity", "lyra", "--user-name", "Jeff")
    assert "[ok  ] session start: a new session gets" in out.stdout and "0 failed" in out.stdout, out.stdout
    assert (home / ".pps" / "lyra" / "pps.toml").exists()
    assert json.loads((home / ".pps" / "claude-code.json").read_text())["entity"] == "lyra"
    mcp = json.loads((home / ".claude.json").read_text())["mcpServers"]["pps-lyra"]
    assert mcp["command"] == sys.executable and mcp["args"][-2:] == ["--startup", "hooks"] \
        and "--tools" not in mcp["args"]  # the profile of pps.toml, essential by default

    # Claude Code's payloads, through the installed commands: a session that captures and injects
    transcript = home / "projects" / f"{SESSION}.jsonl"
    transcript.parent.mkdir()
    shutil.copy(FIXTURE, transcript)
    base = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(home), "permission_mode": "default"}
    start = run_installed(home, "SessionStart", {**base, "hook_event_name": "SessionStart", "source": "startup"})
    assert "Partial: " in start["hookSpecificOutput"]["additionalContext"]  # cold: a glance, the server warms up
    from pps_core.owner import read_owner

    deadline = time.monotonic() + 180  # the user reads and types meanwhile
    while not (read_owner(home / ".pps" / "lyra") or {}).get("address"):
        assert time.monotonic() < deadline, "the hooks' server did not start"
        time.sleep(0.1)
    assert run_installed(home, "Stop", {**base, "hook_event_name": "Stop", "stop_hook_active": False}) == {}
    turns = json.loads(pps(home, "call", "--entity", "lyra", "get_turns_since_summary",
                           '{"limit": 100, "oldest_first": true}').stdout)["turns"]
    assert {t["author_name"] for t in turns} == {"Jeff", "Lyra"}  # one name per speaker, from config
    assert "via=server" in (home / ".pps" / "lyra" / "logs" / "hooks.log").read_text()  # the hooks' own server

    # the MCP server it registered, run as Claude Code runs it: the essential tools
    listing = _list_mcp_tools(home, mcp)
    assert "ambient_recall" in listing and "store_message" not in listing and len(listing) <= 12

    status = pps(home, "hooks", "status", "--entity", "lyra")
    assert "[ok  ] hooks: SessionStart, UserPromptSubmit, Stop, PreCompact, SessionEnd in" in status.stdout
    assert "[ok  ] server: pid" in status.stdout and "[ok  ] last capture:" in status.stdout
    assert "[ok  ] last injection:" in status.stdout and "(0o600)" in status.stdout

    doctor = pps(home, "doctor", "--entity", "lyra", check=False)
    for name in ("entity", "token", "plugins", "stores", "model", "server", "hooks", "mcp"):
        assert f"] {name}: " in doctor.stdout, doctor.stdout
    assert "[ok  ] mcp: pps-lyra in user scope" in doctor.stdout
    assert doctor.returncode == 0, doctor.stdout

    stopped = pps(home, "hooks", "stop", "--entity", "lyra")
    assert "stopped the hooks' server (pid" in stopped.stdout
    assert "[ok  ] server: none running" in pps(home, "hooks", "status", "--entity", "lyra", check=False).stdout


def _list_mcp_tools(home: Path, entry: dict, **env: str) -> list[str]:
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def go() -> list[str]:
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env_for(home, **env))
        async with Client(params) as client:
            assert "already in your context" in (client.instructions or "")
            return [t.name for t in (await client.list_tools()).tools]

    return anyio.run(go)


def test_status_uninstall_and_a_broken_settings_file(tmp_path):
    home = tmp_path
    pps(home, "init", "--entity", "lyra", "--plugins", "sqlite")
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}')
    os.chmod(settings, 0o644)
    bad = pps(home, "hooks", "install", "--entity", "lyra", check=False)  # not valid JSON (no closing brace)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "is not valid JSON" in bad.stderr and "nothing was changed" in bad.stderr
    assert settings.read_text().endswith("}]}") and not (settings.parent / "settings.json.bak").exists()

    settings.write_text(settings.read_text() + "}")
    status = pps(home, "hooks", "status", "--entity", "lyra", check=False)
    assert status.returncode == 1 and "[FAIL] hooks:" in status.stdout and "pps hooks install" in status.stdout
    pps(home, "hooks", "install", "--entity", "lyra")
    assert oct((settings.parent / "settings.json.bak").stat().st_mode & 0o777) == "0o600"  # it may hold secrets
    status = pps(home, "hooks", "status", "--entity", "lyra", check=False)
    assert "[ok  ] hooks:" in status.stdout and "[ok  ] server: none running" in status.stdout
    assert "[warn] last capture: none yet" in status.stdout

    from pps_claude_code.setup import mcp_entry

    other = {"type": "stdio", "command": "node", "args": ["their-server.js"]}
    (home / ".claude.json").write_text(json.dumps({"numStartups": 3, "mcpServers": {
        "pps-lyra": mcp_entry("lyra", home / ".pps" / "lyra", "essential"), "theirs": other}}))
    removed = pps(home, "hooks", "uninstall")
    assert "removed 5 PPS hooks" in removed.stdout
    assert "removed the MCP server pps-lyra" in removed.stdout  # what `pps setup` registered goes with the hooks
    assert json.loads((home / ".claude.json").read_text()) == {"numStartups": 3, "mcpServers": {"theirs": other}}
    left = json.loads(settings.read_text())
    assert left == {"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}
    assert "no PPS hooks" in pps(home, "hooks", "uninstall").stdout


def test_doctor_names_what_is_missing(tmp_path):
    out = pps(tmp_path, "doctor", "--entity", "ghost", check=False)
    assert out.returncode == 1 and "[FAIL] entity: no entity 'ghost'" in out.stdout and "Traceback" not in out.stderr
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite")
    out = pps(tmp_path, "doctor", "--entity", "lyra", check=False)
    assert "[ok  ] stores: 2 layers available via direct" in out.stdout
    assert "[FAIL] hooks:" in out.stdout and "[warn] mcp: no MCP server 'pps-lyra' registered" in out.stdout


def test_the_recorded_entity_is_the_default_of_the_hooks_commands_and_doctor(tmp_path):
    """Issue 39: what `pps setup` recorded is the default, as for the hooks; `pps plugins` lists entities."""
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite")
    pps(tmp_path, "init", "--entity", "nova", "--plugins", "sqlite")
    (tmp_path / ".pps" / "claude-code.json").write_text(json.dumps({"entity": "lyra"}))  # what `pps setup` records

    status = pps(tmp_path, "hooks", "status", check=False)
    assert "no entity" not in status.stdout + status.stderr and "[ok  ] entity: lyra at" in status.stdout
    doctor = pps(tmp_path, "doctor", check=False)
    assert "[ok  ] entity: lyra at" in doctor.stdout and "[ok  ] stores: 2 layers available" in doctor.stdout
    stopped = pps(tmp_path, "hooks", "stop", check=False)
    assert stopped.returncode == 0 and "lyra" in stopped.stdout, stopped.stdout + stopped.stderr
    installed = pps(tmp_path, "hooks", "install")
    assert "installed PPS hooks for entity 'lyra'" in installed.stdout
    assert "[ok  ] entity: nova at" in pps(tmp_path, "doctor", "--entity", "nova", check=False).stdout  # still wins

    listed = pps(tmp_path, "plugins")
    assert "no entity yet" not in listed.stdout
    assert "entities in " in listed.stdout and "lyra, nova" in listed.stdout, listed.stdout


CLAUDE = REPO / ".tools" / "node_modules" / ".bin" / "claude"


@pytest.mark.skipif(not CLAUDE.exists(), reason="Claude Code's CLI is installed by `make test` (needs npm)")
def test_the_claude_code_plugin_and_marketplace_pass_claude_plugin_validate(tmp_path):
    env = {"HOME": str(tmp_path), "PATH": os.environ.get("PATH", ""), "CI": "1",  # offline, no account
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1"}
    for target in (REPO / "plugins" / "claude_code" / "claude-plugin", REPO):
        done = subprocess.run([str(CLAUDE), "plugin", "validate", "--strict", str(target)], capture_output=True,
                              text=True, env=env, timeout=120)
        assert done.returncode == 0 and "Validation passed" in done.stdout, done.stdout + done.stderr


def test_the_claude_code_plugin_files_follow_the_reference():
    root = REPO / "plugins" / "claude_code" / "claude-plugin"
    manifest = json.loads((root / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "pps" and manifest["version"]
    hooks = json.loads((root / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"}
    for event, groups in hooks.items():
        command = groups[0]["hooks"][0]["command"]
        assert command == f"${{CLAUDE_PLUGIN_ROOT}}/bin/pps-hook {event}"
    server = json.loads((root / ".mcp.json").read_text())["mcpServers"]["pps"]
    assert server["command"] == "${CLAUDE_PLUGIN_ROOT}/bin/pps-mcp"
    for script in ("pps-hook", "pps-mcp"):
        assert os.access(root / "bin" / script, os.X_OK)
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    entry = market["plugins"][0]
    assert entry["name"] == manifest["name"] and (REPO / entry["source"]).resolve() == root.resolve()


def test_the_plugin_hook_script_without_pps_says_so(tmp_path):
    """The plugin installed in Claude Code before `pip install`: one line for the user, exit 0."""
    script = REPO / "plugins" / "claude_code" / "claude-plugin" / "bin" / "pps-hook"
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PPS_PYTHON": "/usr/bin/false"}
    done = subprocess.run([str(script), "SessionStart"], input="{}", capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0 and "PPS: not installed" in json.loads(done.stdout)["systemMessage"]


def test_the_plugin_hook_script_runs_the_chosen_entity(home):
    pps(home, "init", "--entity", "lyra", "--plugins", "sqlite,crystals,mcp,http")  # setup keeps an existing entity
    pps(home, "setup", "claude-code", "--entity", "lyra", "--no-mcp")
    script = REPO / "plugins" / "claude_code" / "claude-plugin" / "bin" / "pps-hook"
    env = env_for(home, PATH="/usr/bin:/bin")  # no pps on PATH: the Python `pps setup` recorded is used
    assert json.loads((home / ".pps" / "claude-code.json").read_text())["python"] == sys.executable
    body = {"session_id": "s1", "transcript_path": "", "hook_event_name": "SessionStart", "source": "startup"}
    done = subprocess.run([str(script), "SessionStart"], input=json.dumps(body), capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0 and "additionalContext" in json.loads(done.stdout)["hookSpecificOutput"]
    mcp = REPO / "plugins" / "claude_code" / "claude-plugin" / "bin" / "pps-mcp"  # the plugin's .mcp.json server
    names = _list_mcp_tools(home, {"command": str(mcp), "args": []}, PATH="/usr/bin:/bin")
    assert "ambient_recall" in names and "crystallize" in names and "store_message" not in names
