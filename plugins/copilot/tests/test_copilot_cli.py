"""The real Copilot CLI (`@github/copilot` from npm, installed by `make test` into .tools/hosts) runs the hooks `pps
setup copilot` wrote, offline and without a GitHub account: its bring-your-own-model mode (`COPILOT_PROVIDER_BASE_URL`)
points at an OpenAI-compatible chat completions server on loopback (a real HTTP server that streams one answer).
`copilot -p` goes through sessionStart, userPromptSubmitted, agentStop and sessionEnd; Copilot records the
startup package our sessionStart returned as its hook's output, sends it to the model, and the prompt and the
reply are stored once."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pps_hooks.testkit import env_for, hostile_project, pps, stored_turns

REPO = Path(__file__).resolve().parents[3]
COPILOT = REPO / ".tools" / "hosts" / "node_modules" / ".bin" / "copilot"
REPLY = "The harbour crane is painted ochre."


class Completions(BaseHTTPRequestHandler):
    bodies: list[dict] = []

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        Completions.bodies.append(json.loads(self.rfile.read(int(self.headers.get("content-length") or 0))))
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-5.4"}
        chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": REPLY},
                                        "finish_reason": None}]},
                  {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def provider():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Completions)
    Completions.bodies = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.skipif(not COPILOT.exists(), reason="Copilot CLI is installed by `make test` into .tools/hosts (needs npm)")
def test_copilot_itself_runs_the_installed_hooks(tmp_path, provider):
    home = tmp_path
    pps(home, "init", "--entity", "lyra", "--plugins", "sqlite")
    pps(home, "setup", "copilot", "--entity", "lyra")
    project, markers = hostile_project(tmp_path)
    done = subprocess.run([str(COPILOT), "-p", "what colour is the crane?"], cwd=project, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=env_for(home, COPILOT_HOME=str(home / ".copilot"), COPILOT_PROVIDER_BASE_URL=provider,
                                      COPILOT_MODEL="gpt-5.4"))
    assert done.returncode == 0 and REPLY in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert list(markers.iterdir()) == []
    log = (home / ".pps" / "lyra" / "logs" / "hooks.log").read_text()
    for event in ("sessionStart", "userPromptSubmitted", "agentStop", "sessionEnd"):
        assert f"copilot {event} session=" in log, log
    events = [json.loads(line) for path in (home / ".copilot" / "session-state").glob("*/events.jsonl")
              for line in path.read_text().splitlines()]
    ends = {e["data"]["hookType"]: e["data"] for e in events if e["type"] == "hook.end"}
    assert ends["sessionStart"]["success"] and "AMBIENT RECALL MANIFEST" in ends["sessionStart"]["output"][
        "additionalContext"]  # Copilot took the startup package in our shape
    assert "AMBIENT RECALL MANIFEST" in json.dumps(Completions.bodies[-1]["messages"])  # ... and sent it
    turns = stored_turns(home)
    assert [(t["author_name"], t["content"]) for t in turns] == [("someone", "what colour is the crane?"),
                                                                  ("Lyra", REPLY)]
    imported = pps(home, "import", "copilot", "--entity", "lyra").stdout
    assert "read 2 turns" in imported and "0 new" in imported, imported
