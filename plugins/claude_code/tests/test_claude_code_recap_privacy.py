"""The recap the hooks make is a copy of the session's turns: ``<private>`` spans never reach it (nor the LLM
that writes it), and forgotten turns leave it (issue 22 items 2 and 5).

Driven as Claude Code drives it: the installed hook commands with real payloads on stdin (Stop, SessionEnd,
SessionStart), the recap written by the process SessionEnd starts, rebuilt by the next SessionStart after a
crash, and shown in the startup package; the LLM is the scripted stand-in on loopback, whose requests are kept.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from pps_claude_code.install import hooks_config

from pps_core.testing.scripted_llm import ScriptedLLM
from pps_core.testing.server import pps as run_pps
from pps_core.testing.server import pps_env, start_server

SESSION = "5f3c2a9e-6666-4c7e-9a51-0d6b2e7c0a01"
NEXT = "5f3c2a9e-7777-4c7e-9a51-0d6b2e7c0a01"
PRIVATE_CANARIES = ("pvqhook", "pvqnest", "pvqtool", "pvqthink")
FORGET_CANARY = "pvqforget"


def entry(n: int, kind: str, content, minute: int) -> dict:
    """One line of a Claude Code transcript (``~/.claude/projects/<project>/<session>.jsonl``)."""
    return {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/jeff/vault",
            "sessionId": SESSION, "version": "2.0.14", "gitBranch": "main", "type": kind,
            "message": {"role": kind, "content": content}, "uuid": f"00000000-0000-4000-8000-{n:012d}",
            "timestamp": f"2026-03-14T09:{minute:02d}:00Z"}


def private_transcript(path: Path) -> Path:
    lines = [
        entry(1, "user", "Let's rotate the deploy credentials today.", 0),
        entry(2, "assistant", [{"type": "text", "text": "Sure. Which key do you want rotated first?"}], 1),
        entry(3, "user", "my key is <private>pvqhook</private>", 2),
        entry(4, "user", "the backup phrase is <private>one <private>pvqnest</private> two</private> kept apart", 3),
        entry(5, "assistant", [
            {"type": "thinking", "thinking": "The user said <private>pvqthink</private>; rotate it.", "signature": "s"},
            {"type": "text", "text": "Rotating the deploy key now."},
            {"type": "tool_use", "id": "toolu_01", "name": "Bash",
             "input": {"command": "vault write deploy/key value=<private>pvqtool</private>"}}], 4),
        entry(6, "user", [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "Success! Data written"}], 5),
        entry(7, "assistant", [{"type": "text", "text": "Rotated the deploy credentials. Next step: update the CI "
                                                        "secrets with the new key."}], 6),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def forget_transcript(path: Path) -> Path:
    lines = [
        entry(11, "user", f"The vault code is {FORGET_CANARY}, remember it for the deploy.", 10),
        entry(12, "assistant", [{"type": "text", "text": f"Noted: the vault code is {FORGET_CANARY}. I will use "
                                                         "it for the deploy."}], 11),
        entry(13, "user", "Now update the CI secrets.", 12),
        entry(14, "assistant", [{"type": "text", "text": "Updated the CI secrets. Next step: rerun the deploy."}],
              13),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return pps_env(root, **{"PPS_CLAUDE_CODE_USER_NAME": "Jeff", "PPS_CLAUDE_CODE_AUTOSTART": "false", **extra})


def pps(root: Path, *args: str) -> subprocess.CompletedProcess:
    return run_pps(root, *args, env=env_for(root))


def payload(event: str, transcript: Path, session: str = SESSION, **extra) -> dict:
    return {"session_id": session, "transcript_path": str(transcript), "cwd": "/home/jeff/vault",
            "permission_mode": "default", "hook_event_name": event, **extra}


def run_hook(root: Path, event: str, body: dict) -> subprocess.CompletedProcess:
    command = hooks_config("lyra", root / "lyra")[event][0]["hooks"][0]["command"]
    done = subprocess.run(command, shell=True, input=json.dumps(body), capture_output=True, text=True,
                          env=env_for(root), timeout=180)
    assert done.returncode == 0 and "systemMessage" not in done.stdout, done.stdout + done.stderr
    return done


def session_end(root: Path, transcript: Path) -> str:
    """SessionEnd as Claude Code sends it; waits for the recap process it starts to write ``_recap.md``."""
    recap = root / "lyra" / "_recap.md"
    recap.unlink(missing_ok=True)
    run_hook(root, "SessionEnd", payload("SessionEnd", transcript, reason="exit"))
    deadline = time.monotonic() + 120
    while not recap.is_file():
        assert time.monotonic() < deadline, (root / "lyra" / "logs" / "hooks.log").read_text()[-2000:]
        time.sleep(0.1)
    return recap.read_text()


def startup_context(root: Path, transcript: Path) -> str:
    """The next session's SessionStart (its own transcript, beside the last one's, still empty): the
    crash-recovery recap (when the last session left none), then the startup package injected."""
    mine = transcript.with_name(f"{NEXT}.jsonl")
    mine.touch()
    out = run_hook(root, "SessionStart", payload("SessionStart", mine, session=NEXT, source="startup"))
    return json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]


def echo(messages: list[dict]) -> str:
    """The LLM writes back what it was sent: whatever leaks into a request shows in the recap too."""
    return " ".join(m["content"] for m in messages if m["role"] == "user")[-1500:]


@pytest.fixture
def llm():
    with ScriptedLLM(echo) as server:
        yield server


def init(root: Path, llm: ScriptedLLM | None) -> Path:
    pps(root, "init", "--entity", "lyra", "--plugins", "sqlite,crystals,recap,http", "--timezone", "UTC")
    home = root / "lyra"
    if llm is not None:
        with open(home / "pps.toml", "a") as fh:
            fh.write(f'\n[llm]\nbase_url = "{llm.base_url}"\nmodel = "scripted-model"\n')
    return home


def test_private_spans_never_reach_the_recap_nor_its_llm(tmp_path, llm):
    home = init(tmp_path, llm)
    transcript = private_transcript(tmp_path / ".claude" / "projects" / "-home-jeff-vault" / f"{SESSION}.jsonl")
    run_hook(tmp_path, "Stop", payload("Stop", transcript))

    written = session_end(tmp_path, transcript)  # SessionEnd: `pps recap --save` in its own process, via [llm]
    assert "deploy credentials" in written and llm.requests, written
    sent = json.dumps(llm.requests)
    assert "rotate the deploy credentials" in sent  # the LLM did get the session
    for canary in PRIVATE_CANARIES:
        assert canary not in written, canary
        assert canary not in sent, canary
    assert "kept apart" in written  # what follows a nested private span is kept

    (home / "_recap.md").unlink()  # a crash: the session left no recap; the next SessionStart rebuilds it
    context = startup_context(tmp_path, transcript)
    rebuilt = (home / "_recap.md").read_text()
    assert "deploy credentials" in rebuilt and rebuilt.strip().splitlines()[0] in context, context
    for canary in PRIVATE_CANARIES:
        assert canary not in rebuilt and canary not in context, canary

    saved = pps(tmp_path, "recap", str(transcript), "--entity", "lyra", "--save", "--json")  # by hand
    answer = json.loads(saved.stdout)
    assert answer["written"] and "deploy credentials" in answer["text"]
    for canary in PRIVATE_CANARIES:
        assert canary not in saved.stdout and canary not in (home / "_recap.md").read_text(), canary
        assert canary not in json.dumps(llm.requests), canary


def _ids_of(root: Path) -> list[int]:
    out = pps(root, "call", "--entity", "lyra", "get_turns_since_summary", '{"limit": 200, "oldest_first": true}')
    return [t["id"] for t in json.loads(out.stdout)["turns"]]


@pytest.mark.parametrize("how", ["forget_range", "forget_turns", "forget_search"])
def test_forgotten_turns_leave_the_recap(tmp_path, how):
    home = init(tmp_path, None)
    transcript = forget_transcript(tmp_path / ".claude" / "projects" / "-home-jeff-vault" / f"{SESSION}.jsonl")
    run_hook(tmp_path, "Stop", payload("Stop", transcript))
    assert FORGET_CANARY in session_end(tmp_path, transcript)  # the recap quotes the turn (extractive)
    server = None
    try:
        if how == "forget_range":
            out = json.loads(pps(tmp_path, "call", "--entity", "lyra", "forget_range", json.dumps(
                {"channel": f"terminal:{SESSION}", "since": "2026-03-14T09:10:00Z", "until": "2026-03-14T09:12:00Z",
                 "requested_by": "Jeff"})).stdout)
        elif how == "forget_turns":
            out = json.loads(pps(tmp_path, "call", "--entity", "lyra", "forget_turns", json.dumps(
                {"ids": _ids_of(tmp_path)[:2], "requested_by": "Jeff"})).stdout)
        else:  # a confirm token lives in the server that issued it: both calls to one server
            server = start_server(tmp_path, "--entity", "lyra", env=env_for(tmp_path))
            listed = server.call("forget_search", {"query": FORGET_CANARY}).json()
            out = server.call("forget_search", {"query": FORGET_CANARY, "confirm": listed["confirm"]}).json()
        assert out["count"] >= 2 and not out.get("incomplete"), out
        assert not (home / "_recap.md").exists() or FORGET_CANARY not in (home / "_recap.md").read_text()

        # the next session starts: the recap is rebuilt after a "crash", and the startup package injected
        context = startup_context(tmp_path, transcript)
        assert FORGET_CANARY not in context
        assert not (home / "_recap.md").exists() or FORGET_CANARY not in (home / "_recap.md").read_text()
        # the session log still holds the turn (it is Claude Code's file): a recap made from it by hand, saved
        # or not, leaves it out; SessionEnd's recaps only what was said after the forget
        again = pps(tmp_path, "recap", str(transcript), "--entity", "lyra", "--save", "--json")
        assert FORGET_CANARY not in again.stdout
        assert not (home / "_recap.md").exists() or FORGET_CANARY not in (home / "_recap.md").read_text()
        with open(transcript, "a") as fh:  # the session goes on after the forget: that part is recapped
            fh.write(json.dumps(entry(15, "user", "Now tag the release as v2.", 14)) + "\n")
            fh.write(json.dumps(entry(16, "assistant", [{"type": "text", "text": "Tagged the release v2."}], 15))
                     + "\n")
        written = session_end(tmp_path, transcript)
        assert "Tagged the release v2" in written and FORGET_CANARY not in written
        if server is not None:
            answer = server.call("ambient_recall", {"context": "startup"}).json()["text"]
            assert FORGET_CANARY not in answer and "Tagged the release v2" in answer
    finally:
        if server is not None:
            server.stop()
