"""The hooks of a machine that holds no store of its own: ``[claude_code] server_url`` sends every hook to a fleet
server (``pps serve http`` elsewhere) with the entity's token; nothing is opened here, and a server that does not
answer costs a turn nothing (the transcript's cursor stays put, the next hook sends what was missed)."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

from pps_core.testing.server import init_entity, start_server
from pps_core.testing.server import pps as run_pps

from .test_claude_code_hooks_server import SESSION, env_for, payload, run_hook, transcript_of


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _laptop(root: Path, url: str, token_from: Path) -> Path:
    """A second home for the same entity, as on another machine: its pps.toml names the same layers, but the
    hooks go to ``url``; the token is the fleet entity's, copied as an operator would (0600)."""
    home = root / "lyra"
    home.mkdir(parents=True, mode=0o700)
    (home / "pps.toml").write_text('entity = "lyra"\nplugins = ["sqlite", "crystals"]\ntimezone = "UTC"\n'
                                   f'[claude_code]\nserver_url = "{url}"\n')
    shutil.copy2(token_from / "token", home / "token")
    return home


def _stores_opened(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if p.suffix in (".db", ".sqlite", ".sqlite3") or p.name in ("chroma", "graph", ".owner.lock"))


def test_hooks_forward_to_a_fleet_server_and_open_no_store(tmp_path):
    fleet_root, laptop_root = tmp_path / "fleet", tmp_path / "laptop"
    fleet_root.mkdir()
    fleet_home = init_entity(fleet_root, "lyra", "sqlite,crystals,http")
    server = start_server(fleet_root, "--entity", "lyra", env=env_for(fleet_root))
    try:
        assert server.call("crystallize", {"content": "The harbour crane is painted ochre."}).status_code == 200
        transcript = transcript_of(tmp_path, 44)

        # first, the fleet is unreachable: the hook exits 0 at once, says so once, and keeps the turns for later
        home = _laptop(laptop_root, f"http://127.0.0.1:{_closed_port()}", fleet_home)
        down = run_hook(laptop_root, "Stop", payload("Stop", transcript), PPS_USER_NAME="Jeff")  # the full path
        assert down.returncode == 0 and "turns not saved (Stop)" in json.loads(down.stdout)["systemMessage"]
        start_down = run_hook(laptop_root, "SessionStart", payload("SessionStart", transcript, source="startup"))
        assert "memory not loaded (SessionStart)" in json.loads(start_down.stdout)["systemMessage"]
        assert _stores_opened(home) == []

        toml = (home / "pps.toml").read_text()
        (home / "pps.toml").write_text(toml.split("server_url")[0] + f'server_url = "{server.url}"\n')
        start = run_hook(laptop_root, "SessionStart", payload("SessionStart", transcript, source="startup"))
        assert start.returncode == 0, start.stderr
        out = json.loads(start.stdout)
        assert set(out) == {"hookSpecificOutput"} and out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
        context = out["hookSpecificOutput"]["additionalContext"]
        assert "AMBIENT RECALL MANIFEST" in context and "harbour crane is painted ochre" in context
        assert "comma inside quotes" in context  # the turns the failed hooks kept, sent before the recall

        prompt = run_hook(laptop_root, "UserPromptSubmit",
                          payload("UserPromptSubmit", transcript, prompt="what colour is the crane?"), "--recall")
        assert "harbour crane is painted ochre" in json.loads(prompt.stdout)["hookSpecificOutput"]["additionalContext"]
        full = transcript_of(tmp_path)  # the session goes on: the rest of the transcript
        for env in ({}, {"PPS_USER_NAME": "Jeff"}):  # the fast path, then the full one (a setting only it reads)
            stop = run_hook(laptop_root, "Stop", payload("Stop", full), **env)
            assert stop.returncode == 0 and stop.stdout == "", (stop.stdout, stop.stderr)

        got = server.call("get_turns_since_summary", {"limit": 200, "oldest_first": True}).json()["turns"]
        ids = [t["id"] for t in got]
        assert len(ids) == len(set(ids)) == 12  # every turn of the transcript, once, on the fleet
        assert _stores_opened(home) == []  # this machine never opened a store
        log = (home / "logs" / "hooks.log").read_text().splitlines()
        assert log[-1].endswith("new_turns=0 via=fleet") and any("new_turns=12 via=fleet" in ln for ln in log)
    finally:
        server.stop()


def test_a_fleet_server_that_never_answers_does_not_hold_the_host(tmp_path):
    """A server that accepts the connection and says nothing: the hook gives up after ``timeout_s``, exits 0, tells
    the user memory was not loaded, keeps the session's turns for the next hook, and falls back to no store."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # never accepted, never answered
    try:
        keys = tmp_path / "keys"
        keys.mkdir()
        (keys / "token").write_text("not-the-real-token")
        home = _laptop(tmp_path / "laptop", f"http://127.0.0.1:{silent.getsockname()[1]}", keys)
        transcript = transcript_of(tmp_path, 44)
        out = run_hook(tmp_path / "laptop", "SessionStart", payload("SessionStart", transcript, source="startup"),
                       PPS_CLAUDE_CODE_TIMEOUT_S="1")
        assert out.returncode == 0
        assert "memory not loaded (SessionStart): PPS did not answer within 1s" in json.loads(out.stdout)["systemMessage"]
        assert _stores_opened(home) == []
        assert not (home / "hooks" / "claude-code" / f"{SESSION}.json").exists()  # no cursor moved: the turns wait
    finally:
        silent.close()


def test_status_and_doctor_check_the_fleet_server_the_hooks_use(tmp_path):
    """Issue 37: with ``[claude_code] server_url`` the hooks forward there, so `pps hooks status` and `pps doctor`
    check that server (with this home's token), not a local one the hooks will never start."""
    fleet_root, laptop_root = tmp_path / "fleet", tmp_path / "laptop"
    fleet_root.mkdir()
    fleet_home = init_entity(fleet_root, "lyra", "sqlite,crystals,http")
    dead = f"http://127.0.0.1:{_closed_port()}"
    home = _laptop(laptop_root, dead, fleet_home)
    for command in (("hooks", "status"), ("doctor",)):
        out = run_pps(laptop_root, *command, "--entity", "lyra", check=False, env=env_for(laptop_root))
        line = next(ln for ln in out.stdout.splitlines() if "] server:" in ln)
        assert line.startswith("[FAIL]") and dead in line and "server_url" in line, out.stdout
        assert "next hook starts one" not in out.stdout
    server = start_server(fleet_root, "--entity", "lyra", env=env_for(fleet_root))
    try:
        (home / "pps.toml").write_text((home / "pps.toml").read_text().replace(dead, server.url))
        out = run_pps(laptop_root, "hooks", "status", "--entity", "lyra", check=False, env=env_for(laptop_root))
        line = next(ln for ln in out.stdout.splitlines() if "] server:" in ln)
        assert line.startswith("[ok  ]") and server.url in line and "server_url" in line, out.stdout
        doctor = run_pps(laptop_root, "doctor", "--entity", "lyra", check=False, env=env_for(laptop_root)).stdout
        stores = next(ln for ln in doctor.splitlines() if "] stores:" in ln)
        assert stores.startswith("[ok  ]") and "via fleet" in stores, doctor
        assert _stores_opened(home) == []  # the doctor of a fleet laptop opens no store here either
        (home / "token").write_text("not-the-token")
        out = run_pps(laptop_root, "hooks", "status", "--entity", "lyra", check=False, env=env_for(laptop_root))
        line = next(ln for ln in out.stdout.splitlines() if "] server:" in ln)
        assert line.startswith("[FAIL]") and "token" in line, out.stdout
    finally:
        server.stop()
