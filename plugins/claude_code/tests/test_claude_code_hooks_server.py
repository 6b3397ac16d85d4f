"""The hooks' own server (started by the first hook, one per entity, stopped when idle), PreCompact, and a
per-prompt recall that is only the relevant memories."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from pps_claude_code.install import hooks_config

from pps_core.owner import read_owner
from pps_core.testing.server import pps as run_pps
from pps_core.testing.server import pps_env

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SESSION = "5f3c2a9e-1111-4c7e-9a51-0d6b2e7c0a01"


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return pps_env(root, **{"PPS_CLAUDE_CODE_USER_NAME": "Jeff", "PPS_CLAUDE_CODE_AUTOSTART": "false", **extra})


def pps(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run_pps(root, *args, env=env_for(root, **env))


def command(root: Path, event: str, *extra: str) -> str:
    return " ".join([hooks_config("lyra", root / "lyra")[event][0]["hooks"][0]["command"], *extra])


def payload(event: str, transcript: Path | str, **extra) -> dict:
    return {"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/home/jeff/ledger",
            "permission_mode": "default", "hook_event_name": event, **extra}


def run_hook(root: Path, event: str, body: dict, *extra: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(command(root, event, *extra), shell=True, input=json.dumps(body), capture_output=True,
                          text=True, env=env_for(root, **env), timeout=120)


def transcript_of(tmp_path: Path, lines: int | None = None) -> Path:
    path = tmp_path / f"{SESSION}.jsonl"
    with FIXTURE.open() as src:
        path.write_text("".join(src.readlines()[:lines]))
    return path


def turns(root: Path) -> list[dict]:
    out = pps(root, "call", "--entity", "lyra", "get_turns_since_summary", '{"limit": 200, "oldest_first": true}')
    return json.loads(out.stdout)["turns"]


@pytest.fixture
def root(tmp_path):
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite,crystals", "--timezone", "UTC")
    yield tmp_path
    owner = read_owner(tmp_path / "lyra")
    if owner and owner.get("pid"):
        try:
            os.kill(owner["pid"], 15)
        except ProcessLookupError:
            pass


def test_the_first_hooks_start_one_server_and_it_stops_when_idle(root, tmp_path):
    transcript = transcript_of(tmp_path, 44)
    env = {"PPS_CLAUDE_CODE_AUTOSTART": "true", "PPS_CLAUDE_CODE_SERVER_IDLE_S": "4",
           "PPS_CLAUDE_CODE_SERVER_START_S": "60"}
    body = json.dumps(payload("SessionStart", transcript, source="startup"))
    together = [subprocess.Popen(command(root, "SessionStart"), shell=True, stdin=subprocess.PIPE, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(root, **env))
                for _ in range(3)]
    outs = [p.communicate(body, timeout=120) for p in together]
    for out, _err in outs:  # cold: each answers from a glance (the turns wait for the server)
        assert "AMBIENT RECALL MANIFEST" in json.loads(out)["hookSpecificOutput"]["additionalContext"], out
    owner = _wait_for_address(root / "lyra")
    assert owner and owner["address"].startswith("http://127.0.0.1:")
    server_log = (root / "lyra" / "logs" / "server.log").read_text()
    assert server_log.count(" serving lyra at ") == 1  # three hooks at once, one server
    assert server_log.count("starting for entity lyra") == 1
    assert oct((root / "lyra" / "logs" / "server.log").stat().st_mode & 0o777) == "0o600"
    starts = [ln for ln in (root / "lyra" / "logs" / "hooks.log").read_text().splitlines() if " SessionStart " in ln]
    assert len(starts) == 3 and "new_turns=0 via=glance" in starts[0], starts  # a late one may find it warm
    again = run_hook(root, "SessionStart", json.loads(body), **env)  # warm: the turns go to the server
    assert "comma inside quotes" in json.loads(again.stdout)["hookSpecificOutput"]["additionalContext"]
    stop = run_hook(root, "Stop", payload("Stop", transcript), **env)
    assert stop.returncode == 0 and stop.stdout == ""
    log = (root / "lyra" / "logs" / "hooks.log").read_text()
    sent = [ln for ln in log.splitlines() if "via=server" in ln]
    assert sum(int(ln.split("new_turns=")[1].split()[0]) for ln in sent) == 12  # each turn read and sent once
    assert log.splitlines()[-1].endswith("new_turns=0 via=server")
    assert len([t for t in turns(root) if t["author_name"] == "Jeff"]) == 5  # stored once, by the server
    recall = run_hook(root, "UserPromptSubmit", payload("UserPromptSubmit", transcript, prompt="semicolon export"),
                      "--recall", **env)  # the fast path (a server runs): only relevant memories
    context = json.loads(recall.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("Memories relevant to this prompt") and "semicolon-separated" in context
    assert "**Clock**" not in context and "MANIFEST" not in context

    deadline = time.monotonic() + 60
    while read_owner(root / "lyra") is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert read_owner(root / "lyra") is None  # idle: it stopped itself and let go of the stores
    assert "idle for 4s: stopping" in (root / "lyra" / "logs" / "server.log").read_text()


def test_precompact_saves_the_transcript_and_compact_reinjects(root, tmp_path):
    transcript = transcript_of(tmp_path)
    pre = run_hook(root, "PreCompact", payload("PreCompact", transcript, trigger="auto", custom_instructions=""))
    assert pre.returncode == 0 and pre.stdout == ""
    assert len(turns(root)) == 12  # everything the transcript held before compaction
    after = run_hook(root, "SessionStart", payload("SessionStart", transcript, source="compact"))
    context = json.loads(after.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Both fixes are in the working tree" in context


def test_prompt_recall_is_only_the_relevant_memories(root, tmp_path):
    first = "The spare lighthouse key hangs behind the tide chart."
    pps(root, "call", "--entity", "lyra", "crystallize", json.dumps({"content": first}))  # archived below
    for text in ("The lighthouse lamp was repainted red in March.", "Jeff prefers tea in the morning.",
                 "The boat engine needs a new impeller.", "We moved the garden beds to the south wall."):
        pps(root, "call", "--entity", "lyra", "crystallize", json.dumps({"content": text}))
    listing = json.loads(pps(root, "call", "--entity", "lyra", "crystal_list", "{}").stdout)
    assert len(listing["archived"]) == 1
    transcript = transcript_of(tmp_path, 2)
    body = payload("UserPromptSubmit", transcript, prompt="what happened with the lighthouse?")
    out = run_hook(root, "UserPromptSubmit", body, "--recall")
    context = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "repainted red" in context  # relevant, current
    assert "tide chart" not in context  # archived
    assert "tea in the morning" not in context and "impeller" not in context  # shares no word with the prompt
    for boilerplate in ("**Clock**", "MANIFEST", "asleep", "summarize", "left out"):
        assert boilerplate not in context
    floored = run_hook(root, "UserPromptSubmit", body, "--recall",
                       PPS_CLAUDE_CODE_PROMPT_RECALL_MIN_SCORE='{"crystallization": 1000000}')
    assert "repainted red" not in floored.stdout  # under the configured floor: not injected


def test_the_fast_path_reads_settings_as_the_full_loader_does(tmp_path, monkeypatch):
    """The hooks' fast path (no kernel import) must resolve names and budgets exactly as the settings do."""
    from pps_claude_code.config import ClaudeCodeSettings, assistant_name, cc_settings, user_name
    from pps_claude_code.fastpath import DEFAULTS, light_settings

    from pps_core.settings import load_settings

    for key in list(os.environ):
        if key.startswith("PPS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("USER", "someone")
    assert DEFAULTS == {k: ClaudeCodeSettings.model_fields[k].default if k != "prompt_recall_min_score" else {}
                        for k in DEFAULTS}
    home = tmp_path / "lyra"
    home.mkdir()
    cases = [
        ('entity = "lyra"\nplugins = ["sqlite"]\n', {}),
        ('entity = "lyra"\nplugins = ["sqlite"]\nuser_name = "Jeff"\ndisplay_name = "Lyra Vale"\n', {}),
        ('entity = "lyra"\nplugins = ["sqlite"]\n[claude_code]\nuser_name = "Ana"\nstartup_budget = 4000\n'
         'prompt_recall = true\nprompt_recall_min_score = {chroma = 0.5}\n', {}),
        ('entity = "lyra"\nplugins = ["sqlite"]\n[claude_code]\nuser_name = "Ana"\n',
         {"PPS_CLAUDE_CODE_USER_NAME": "Env", "PPS_CLAUDE_CODE_PROMPT_RECALL": "1",
          "PPS_CLAUDE_CODE_TIMEOUT_S": "2.5", "PPS_CLAUDE_CODE_PROMPT_RECALL_MIN_SCORE": '{"x": 2}'}),
    ]
    for toml, env in cases:
        (home / "pps.toml").write_text(toml)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        full = load_settings(None, home, must_exist=True)
        cc = cc_settings(full)
        light = light_settings(None, str(home))
        assert (light.user_name, light.assistant_name) == (user_name(full), assistant_name(full)), toml
        assert light.cc == {k: getattr(cc, k) for k in DEFAULTS}, toml
        assert light.plugins == full.plugins and light.entity == full.entity
        for k in env:
            monkeypatch.delenv(k)


def test_an_entity_that_needs_no_owner_gets_no_server(tmp_path):
    """Every store shared (no exclusive layer, e.g. all on PostgreSQL): the hooks open the stores themselves,
    and the server they tried once is not started again on every hook."""
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "recap,http", "--timezone", "UTC")
    env = {"PPS_CLAUDE_CODE_AUTOSTART": "true", "PPS_CLAUDE_CODE_SERVER_START_S": "60"}
    body = payload("SessionStart", tmp_path / "none.jsonl", source="startup")
    for _ in range(2):
        out = run_hook(tmp_path, "SessionStart", body, **env)
        assert "hookSpecificOutput" in json.loads(out.stdout), out.stdout
        deadline = time.monotonic() + 120  # the server started after the first (cold) answer finds it needs none
        while "needs no owner process" not in (tmp_path / "lyra" / "logs" / "server.log").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.1)
    log = (tmp_path / "lyra" / "logs" / "server.log").read_text()
    assert log.count("starting for entity lyra") == 1 and "needs no owner process" in log
    assert (tmp_path / "lyra" / "logs" / "hooks.log").read_text().splitlines()[-1].endswith("via=direct")


def test_the_fast_path_reaches_the_owner_through_the_kernel_and_stays_light(root, tmp_path):
    """With a server, a hook runs as installed (``python -S``, the folders the command names) and forwards through
    pps_core.owner/auth/forward: its turns arrive, and neither Memory, pydantic, pluggy nor http.client is
    imported on the way."""
    import signal
    import sys

    server = subprocess.Popen([sys.executable, "-m", "pps_claude_code.server", "--entity", "lyra", "--idle", "0"],
                              env=env_for(root), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (read_owner(root / "lyra") or {}).get("address"):
            assert server.poll() is None and time.monotonic() < deadline, "the hooks' server did not start"
            time.sleep(0.05)
        transcript = transcript_of(tmp_path)
        probe = tmp_path / "modules.json"
        import shlex

        argv = shlex.split(command(root, "Stop"))  # as installed: python -S -c CODE Stop --entity ... --home ...
        at = argv.index("-c") + 1
        argv[at] = argv[at].replace("sys.exit(main())", f"rc = main(); import json; open({str(probe)!r}, 'w')"
                                                         ".write(json.dumps(sorted(sys.modules))); sys.exit(rc)")
        out = subprocess.run(argv, input=json.dumps(payload("Stop", transcript)), capture_output=True, text=True,
                             env=env_for(root), timeout=120)
        assert out.returncode == 0, out.stderr
        modules = set(json.loads(probe.read_text()))
        assert {"pps_core.owner", "pps_core.forward", "pps_core.auth"} <= modules
        assert not modules & {"pps_core.memory", "pydantic", "pluggy", "http.client", "pps_claude_code.hooks"}
        assert (root / "lyra" / "logs" / "hooks.log").read_text().splitlines()[-1].endswith("via=server")
        assert len(turns(root)) > 0
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0


def test_a_cold_session_end_writes_the_recap_and_starts_no_server(tmp_path):
    """The last hook of a session with no server running (Claude Code's own SessionEnd payload, autostart on):
    the turns are saved and the recap written here, no server is started for nobody, and the user is told
    nothing untrue (there is no next prompt)."""
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite,crystals,recap", "--timezone", "UTC")
    home = tmp_path / "lyra"
    transcript = transcript_of(tmp_path, 44)
    try:
        for reason in ("prompt_input_exit", "other"):  # Ctrl-D; and a second end (the terminal closed)
            end = run_hook(tmp_path, "SessionEnd", payload("SessionEnd", transcript, reason=reason),
                           PPS_CLAUDE_CODE_AUTOSTART="true")
            assert end.returncode == 0 and end.stdout == "", (end.stdout, end.stderr)
        # /clear: the next session starts at once, while the recap may still be written (it holds no store)
        other = tmp_path / "b1d7f00d-2222-4c7e-9a51-0d6b2e7c0a02.jsonl"
        other.write_text("")
        start = run_hook(tmp_path, "SessionStart", {**payload("SessionStart", other, source="clear"),
                                                    "session_id": other.stem})
        assert "comma inside quotes" in json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
        recap = home / "_recap.md"
        deadline = time.monotonic() + 60
        while not recap.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "Both fixes are in the working tree" in recap.read_text()
        while read_owner(home) is not None and time.monotonic() < deadline:  # the recap's process, if any, ends
            time.sleep(0.1)
        assert read_owner(home) is None  # nothing holds the stores: no server lives on
        assert not (home / "hooks" / "claude-code" / "server.pid").exists()
        assert not (home / "logs" / "server.log").exists()
        assert len([t for t in turns(tmp_path) if t["author_name"] == "Jeff"]) == 5  # the session's turns, once
        log = (home / "logs" / "hooks.log").read_text()
        assert "SessionEnd session=" in log and "next prompt" not in log
    finally:
        owner = read_owner(home) or {}
        if owner.get("pid"):
            os.kill(owner["pid"], 15)


def _wait_for_address(home: Path, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while not (read_owner(home) or {}).get("address"):
        assert time.monotonic() < deadline, "the hooks' server did not start"
        time.sleep(0.1)
    return read_owner(home) or {}


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _stop(home: Path) -> None:
    """SIGTERM the server and wait until it has exited (not only let go of the stores); also every server a hook
    started that has not taken the lock yet (a cold hook starts one and does not wait for it): none outlives the
    test."""
    import re

    log = home / "logs" / "hooks.log"
    started = {int(pid) for pid in re.findall(r"server started \(pid (\d+)", log.read_text())} if log.exists() else set()
    owner = read_owner(home) or {}
    for pid in started | ({owner["pid"]} if owner.get("pid") else set()):
        if _running(pid):
            os.kill(pid, 15)
            deadline = time.monotonic() + 120
            while _running(pid) and time.monotonic() < deadline:
                time.sleep(0.1)


def test_cold_hooks_answer_from_a_glance_while_the_server_warms_up(tmp_path):
    """The default plugins (word-photos in ChromaDB, the graph, local embeddings): a cold SessionStart and a cold
    UserPromptSubmit (Claude Code's own payloads, autostart on) answer from what opens at once (turns by their
    words, crystals, the recap), say the answer is partial, and do not wait for the server they start; the next
    hook finds that server warm, and the turns the cold hook did not store reach it then, once."""
    pps(tmp_path, "init", "--entity", "lyra", "--timezone", "UTC")
    home = tmp_path / "lyra"
    import tomllib

    plugins = tomllib.loads((home / "pps.toml").read_text())["plugins"]
    assert {"chroma", "graphiti", "embeddings", "crystals", "recap"} <= set(plugins)
    pps(tmp_path, "call", "--entity", "lyra", "store_message", json.dumps(
        {"content": "The stainless fasteners on the boat corroded in the salt air.", "author_name": "Jeff",
         "channel": "terminal:earlier"}))
    pps(tmp_path, "call", "--entity", "lyra", "crystallize", json.dumps({"content": "Jeff is restoring a boat."}))
    env = {"PPS_CLAUDE_CODE_AUTOSTART": "true", "PPS_CLAUDE_CODE_SERVER_START_S": "120",
           "PPS_CLAUDE_CODE_TIMEOUT_S": "60"}
    transcript = transcript_of(tmp_path, 44)
    try:
        start = run_hook(tmp_path, "SessionStart", payload("SessionStart", transcript, source="startup"), **env)
        assert start.returncode == 0, start.stderr
        context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "fasteners on the boat corroded" in context and "restoring a boat" in context
        assert "Partial: " in context and "Word-photos" in context.split("Partial: ")[1].splitlines()[0]
        log = (home / "logs" / "hooks.log").read_text().splitlines()
        assert "new_turns=0 via=glance" in log[-2] and "SessionStart: server started (pid " in log[-1], log[-2:]

        _wait_for_address(home)  # warm: the next hook goes to it, and the session's turns arrive
        again = run_hook(tmp_path, "SessionStart", payload("SessionStart", transcript, source="resume"), **env)
        context = json.loads(again.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "Partial: " not in context and "comma inside quotes" in context
        assert (home / "logs" / "hooks.log").read_text().splitlines()[-1].endswith("new_turns=12 via=server")
        assert len([t for t in turns(tmp_path) if t["author_name"] == "Jeff"]) == 5 + 1  # each once
        _stop(home)

        prompt = payload("UserPromptSubmit", transcript, prompt="did the fasteners on the boat corrode?")
        cold = run_hook(tmp_path, "UserPromptSubmit", prompt, "--recall", **env)
        text = json.loads(cold.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "fasteners on the boat corroded" in text and "(partial: " in text, text
        assert "via=glance" in (home / "logs" / "hooks.log").read_text().splitlines()[-2]
    finally:
        if read_owner(home) is not None:
            _wait_for_address(home)
        _stop(home)
