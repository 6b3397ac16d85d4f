"""The real Codex CLI (`@openai/codex` from npm, installed by `make test` into .tools/hosts) runs the hooks `pps setup
codex` wrote, offline: its model is a Responses API server on loopback (a real HTTP server that answers one
line), so Codex goes through SessionStart, UserPromptSubmit and Stop as in a real session. The prompt and the
reply are stored once, the startup package reaches the model in the request Codex sends, and `pps import codex`
of the rollout Codex wrote adds nothing."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pps_hooks.testkit import env_for, hostile_project, pps, stored_turns

REPO = Path(__file__).resolve().parents[3]
CODEX = REPO / ".tools" / "hosts" / "node_modules" / ".bin" / "codex"
REPLY = "The harbour crane is painted ochre."


class Model(BaseHTTPRequestHandler):
    """One streamed Responses API answer (response.created, one message, response.completed) to every request."""

    bodies: list[dict] = []

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        Model.bodies.append(json.loads(self.rfile.read(int(self.headers.get("content-length") or 0))))
        events = [{"type": "response.created", "response": {"id": "resp_1"}},
                  {"type": "response.output_item.done", "output_index": 0,
                   "item": {"type": "message", "role": "assistant", "id": "msg_1",
                            "content": [{"type": "output_text", "text": REPLY}]}},
                  {"type": "response.completed",
                   "response": {"id": "resp_1", "usage": {"input_tokens": 1, "input_tokens_details": None,
                                                          "output_tokens": 1, "output_tokens_details": None,
                                                          "total_tokens": 2}}}]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())


@pytest.fixture
def model():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    Model.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.skipif(not CODEX.exists(), reason="Codex CLI is installed by `make test` into .tools/hosts (needs npm)")
def test_codex_itself_runs_the_installed_hooks(tmp_path, model):
    home = tmp_path
    pps(home, "init", "--entity", "lyra", "--plugins", "sqlite")
    pps(home, "setup", "codex", "--entity", "lyra")
    (home / ".codex" / "config.toml").write_text(
        'model = "pps-test-model"\nmodel_provider = "loopback"\n\n[model_providers.loopback]\nname = "loopback"\n'
        f'base_url = "{model}"\nwire_api = "responses"\nenv_key = "OPENAI_API_KEY"\nrequest_max_retries = 0\n'
        "stream_max_retries = 0\nsupports_websockets = false\n")
    project, markers = hostile_project(tmp_path)
    # hooks run without a trust prompt only for this invocation (a test cannot answer Codex's review)
    done = subprocess.run([str(CODEX), "--dangerously-bypass-hook-trust", "exec", "--skip-git-repo-check",
                           "what colour is the crane?"], cwd=project, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=env_for(home, OPENAI_API_KEY="sk-offline-test"))
    assert done.returncode == 0, done.stderr[-3000:]
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        assert f"hook: {event} Completed" in done.stderr, done.stderr[-3000:]
    assert REPLY in done.stdout
    assert list(markers.iterdir()) == []
    turns = stored_turns(home)
    assert [(t["author_name"], t["content"]) for t in turns] == [("someone", "what colour is the crane?"),
                                                                  ("Lyra", REPLY)]
    sent = json.dumps(Model.bodies[0]["input"])
    assert "AMBIENT RECALL MANIFEST" in sent  # the startup package, as Codex put it before the model
    imported = pps(home, "import", "codex", "--entity", "lyra").stdout  # the rollout Codex wrote
    assert "read 2 turns" in imported and "0 new" in imported, imported
