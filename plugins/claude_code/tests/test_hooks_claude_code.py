"""Claude Code hooks run as Claude Code runs them: a subprocess, the event JSON on stdin, exit 0 always."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pps_claude_code.install import hooks_config, merge_settings

from pps_core.owner import OwnerLock

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SESSION = "5f3c2a9e-1111-4c7e-9a51-0d6b2e7c0a01"


def env_for(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPS_")}
    env.update(PPS_ROOT=str(root), PPS_CLAUDE_CODE_USER_NAME="ana", PPS_CLAUDE_CODE_AUTOSTART="false")
    env.update(extra)
    return env


def pps(root: Path, *args: str, stdin: str | None = None, check: bool = True, **env: str):
    return subprocess.run([sys.executable, "-m", "pps_core.cli", *args], env=env_for(root, **env),
                          input=stdin if stdin is not None else "", capture_output=True, text=True, check=check,
                          timeout=60)


def run_hook(root: Path, event: str, payload: dict, *extra: str, **env: str) -> subprocess.CompletedProcess:
    """Exactly what Claude Code does: the installed command line, through a shell, JSON on stdin."""
    command = hooks_config("lyra", root / "lyra")[event][0]["hooks"][0]["command"]
    started = time.monotonic()
    proc = subprocess.run(" ".join([command, *extra]), shell=True, input=json.dumps(payload), capture_output=True,
                          text=True, env=env_for(root, **env), timeout=30)
    proc.elapsed = time.monotonic() - started
    return proc


def payload(event: str, transcript: Path, **extra) -> dict:
    return {"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/home/ana/ledger",
            "permission_mode": "default", "hook_event_name": event, **extra}


def partial_transcript(tmp_path: Path, lines: int) -> Path:
    """The fixture as Claude Code writes it: the transcript grows while the session runs."""
    path = tmp_path / f"{SESSION}.jsonl"
    with FIXTURE.open() as src:
        path.write_text("".join(src.readlines()[:lines]))
    return path


def stored(root: Path) -> list[dict]:
    out = pps(root, "call", "--entity", "lyra", "get_turns_since_summary", '{"limit": 200, "oldest_first": true}')
    return json.loads(out.stdout)["turns"]


@pytest.fixture
def root(tmp_path):
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite,crystals,recap", "--timezone", "UTC")
    return tmp_path


def test_install_prints_and_merges_without_touching_other_hooks(tmp_path):
    root = tmp_path
    pps(root, "init", "--entity", "lyra", "--plugins", "sqlite")
    printed = json.loads(pps(root, "hooks", "install", "--print", "--entity", "lyra").stdout)["hooks"]
    assert set(printed) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"}
    for event, groups in printed.items():
        hook = groups[0]["hooks"][0]
        assert hook["type"] == "command" and hook["timeout"] > 0
        assert "pps_claude_code.hook" in hook["command"] and f" {event} --entity lyra " in hook["command"]
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "notify-send done"}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [{"hooks": [mine]}]}}))
    for _ in range(2):  # installing twice replaces our hooks, never duplicates them
        pps(root, "hooks", "install", "--entity", "lyra", "--settings", str(settings), "--prompt-recall")
    written = json.loads(settings.read_text())
    assert written["model"] == "opus"
    stop = [h for g in written["hooks"]["Stop"] for h in g["hooks"]]
    assert stop[0] == mine and len(stop) == 2
    assert "--recall" in written["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert (settings.parent / "settings.json.bak").exists()
    assert merge_settings(written, hooks_config("lyra", root / "lyra")) == merge_settings(
        merge_settings(written, hooks_config("lyra", root / "lyra")), hooks_config("lyra", root / "lyra"))


def test_without_a_server_hooks_capture_every_turn_once_and_inject_startup(root, tmp_path):
    transcript = partial_transcript(tmp_path, 20)
    start = run_hook(root, "SessionStart", payload("SessionStart", transcript, source="startup"))
    assert start.returncode == 0, start.stderr
    out = json.loads(start.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    assert "**Clock**" in out["additionalContext"] and len(out["additionalContext"]) <= 9_000
    assert "comma inside quotes" in out["additionalContext"]  # the turns captured so far are in the package

    transcript = partial_transcript(tmp_path, 44)
    prompt = run_hook(root, "UserPromptSubmit", payload("UserPromptSubmit", transcript, prompt="csv export?"))
    assert prompt.returncode == 0 and prompt.stdout == ""  # per-prompt recall is off by default
    for _ in range(2):
        stop = run_hook(root, "Stop", payload("Stop", transcript, stop_hook_active=False))
        assert stop.returncode == 0 and stop.stdout == ""
    turns = stored(root)
    prompts = [t for t in turns if t["author_name"] == "ana"]
    replies = [t for t in turns if t["author_name"] == "Lyra"]  # the entity's display name, not its slug
    assert len(prompts) == 5 and len(replies) == 7 and len(turns) == 12  # no tool results, no meta, no wrappers
    assert {t["channel"] for t in turns} == {f"terminal:{SESSION}"}
    assert turns[0]["created_at"].startswith("2026-03-14T09:01:00")  # the transcript's own time
    assert [t["created_at"] for t in turns] == sorted(t["created_at"] for t in turns)
    log = (root / "lyra" / "logs" / "hooks.log").read_text()
    assert "via=direct" in log and log.splitlines()[-1].endswith("new_turns=0 via=direct")  # the 2nd Stop: nothing new

    recall = run_hook(root, "UserPromptSubmit", payload("UserPromptSubmit", transcript, prompt="semicolon export"),
                      "--recall")
    context = json.loads(recall.stdout)["hookSpecificOutput"]["additionalContext"]
    # the memory holding both words; the turns holding only "export" score under raw_capture's floor (issue 29)
    assert "semicolon-separated" in context and "All 58 tests pass" not in context and len(context) <= 2_000


def test_session_end_writes_the_recap_and_the_next_session_starts_with_it(root, tmp_path):
    transcript = partial_transcript(tmp_path, 44)
    end = run_hook(root, "SessionEnd", payload("SessionEnd", transcript, reason="prompt_input_exit"))
    assert end.returncode == 0 and end.stdout == ""
    recap = root / "lyra" / "_recap.md"
    deadline = time.monotonic() + 30
    while not recap.exists() and time.monotonic() < deadline:  # written by a detached process
        time.sleep(0.1)
    assert "Both fixes are in the working tree" in recap.read_text()

    other = tmp_path / "b1d7f00d-2222-4c7e-9a51-0d6b2e7c0a02.jsonl"
    other.write_text("")
    nxt = {**payload("SessionStart", other, source="startup"), "session_id": other.stem}
    context = json.loads(run_hook(root, "SessionStart", nxt).stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Last session recap" in context and context.index("Last session recap") < context.index("[unsummarized")

    recap.unlink()  # the last session crashed before its recap: the next start makes one from its transcript
    (root / "lyra" / "_recap.json").unlink()
    context = json.loads(run_hook(root, "SessionStart", nxt).stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Last session recap" in context and recap.exists()
    assert "recap regenerated from" in (root / "lyra" / "logs" / "hooks.log").read_text()


def notice_of(proc) -> str:
    """The one line Claude Code shows the user: the hook output's systemMessage."""
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return json.loads(proc.stdout)["systemMessage"]


def test_a_hook_never_breaks_the_host_and_never_fails_silently(root, tmp_path):
    transcript = partial_transcript(tmp_path, 44)
    log = root / "lyra" / "logs" / "hooks.log"
    # 1. the stores are owned by another process that serves nobody (e.g. a stdio MCP server)
    lock = OwnerLock(root / "lyra")
    lock.acquire()
    try:
        proc = run_hook(root, "SessionStart", payload("SessionStart", transcript))
    finally:
        lock.release()
    assert notice_of(proc).startswith("PPS: memory not loaded (SessionStart): ")
    assert "owned by another process" in notice_of(proc) and "owned by another process" in log.read_text()
    assert "hookSpecificOutput" not in proc.stdout

    # 2. a server holds the lock but never answers: the hook gives up at its deadline, exit 0, says so
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    lock = OwnerLock(root / "lyra")
    lock.acquire(address=f"http://127.0.0.1:{silent.getsockname()[1]}")
    try:
        stop = run_hook(root, "Stop", payload("Stop", transcript), PPS_CLAUDE_CODE_TIMEOUT_S="4")
        again = run_hook(root, "Stop", payload("Stop", transcript), PPS_CLAUDE_CODE_TIMEOUT_S="4")
        start = run_hook(root, "SessionStart", payload("SessionStart", transcript), PPS_CLAUDE_CODE_TIMEOUT_S="4")
    finally:
        lock.release()
        silent.close()
    assert 4 <= stop.elapsed < 10 and "turns not saved (Stop)" in notice_of(stop)
    assert again.returncode == 0 and again.stdout == ""  # a failing capture is shown once a session, not per turn
    assert again.elapsed < 3 and start.elapsed < 3  # a server that just hung is not waited for again
    assert "memory not loaded (SessionStart)" in notice_of(start) and "not waiting for it again" in notice_of(start)
    assert "Stop: " in log.read_text()
    assert oct(log.stat().st_mode & 0o777) == "0o600"

    # 3. a broken configuration, and input that is not JSON
    (root / "lyra" / "pps.toml").write_text('entity = "lyra"\nplugins = ["no_such_plugin"]\n')
    proc = run_hook(root, "SessionStart", payload("SessionStart", transcript))
    assert "no plugin named 'no_such_plugin'" in notice_of(proc) and "no_such_plugin" in log.read_text()
    command = hooks_config("lyra", root / "lyra")["Stop"][0]["hooks"][0]["command"]
    bad = subprocess.run(command, shell=True, input="not json", capture_output=True, text=True, env=env_for(root))
    assert bad.returncode == 0 and "hook input is not a JSON object" in json.loads(bad.stdout)["systemMessage"]
    assert "cannot start" in log.read_text()


def test_a_missing_entity_is_shown_not_swallowed(tmp_path):
    """`pps hook SessionStart --entity ghost` used to exit 0 silently: now the user sees why, and the log says so."""
    command = hooks_config("ghost", tmp_path / "ghost")["SessionStart"][0]["hooks"][0]["command"]
    proc = subprocess.run(command, shell=True, input=json.dumps({"session_id": "s", "hook_event_name": "SessionStart",
                                                                 "source": "startup"}),
                          capture_output=True, text=True, env=env_for(tmp_path), timeout=60)
    message = notice_of(proc)
    assert "memory not loaded (SessionStart)" in message and "no entity 'ghost'" in message
    assert "pps init --entity ghost" in message
    assert "no entity 'ghost'" in (tmp_path / "logs" / "hooks.log").read_text()  # $PPS_ROOT/logs: no home to log in


@pytest.mark.skipif(shutil.which("true") is None, reason="posix only")
def test_hooks_talk_to_the_running_server(tmp_path):
    pytest.importorskip("pps_http")
    import httpx

    root = tmp_path
    pps(root, "init", "--entity", "lyra", "--plugins", "sqlite,crystals,recap,http", "--timezone", "UTC")
    log = open(root / "server.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "pps_core.cli", "serve", "http", "--port", "0", "--entity", "lyra"],
                              env=env_for(root), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        url = _wait_for_server(root, server)
        transcript = partial_transcript(tmp_path, 44)
        stop = run_hook(root, "Stop", payload("Stop", transcript))
        assert stop.returncode == 0 and stop.stdout == ""
        start = run_hook(root, "SessionStart", payload("SessionStart", transcript, source="resume"))
        context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "Both fixes are in the working tree" in context
        token = (root / "lyra" / "token").read_text().strip()
        turns = httpx.post(f"{url}/tools/get_turns_since_summary", json={"limit": 100},
                           headers={"Authorization": f"Bearer {token}"}, timeout=10).json()["turns"]
        assert len(turns) == 12
        assert "via=server" in (root / "lyra" / "logs" / "hooks.log").read_text()
    finally:
        server.terminate()
        server.wait(timeout=15)
        log.close()


def _wait_for_server(root: Path, server: subprocess.Popen) -> str:
    import re

    import httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError((root / "server.log").read_text())
        found = re.search(r"at (http://[\d.]+:\d+)", (root / "server.log").read_text())
        if found:
            try:
                if httpx.get(f"{found.group(1)}/health", timeout=1).json().get("ok"):
                    return found.group(1)
            except httpx.HTTPError:
                pass
        time.sleep(0.05)
    raise RuntimeError("server did not start: " + (root / "server.log").read_text())
