"""The real Gemini CLI (`@google/gemini-cli` from npm, installed by `make test` into .tools/hosts) runs the hooks `pps
setup gemini` wrote, offline: its Gemini API is a server on loopback (`GOOGLE_GEMINI_BASE_URL`, a real HTTP server
that streams one answer), so a headless `gemini -p` goes through SessionStart, BeforeAgent, AfterAgent and
SessionEnd as in a real session. The prompt and the reply are stored once (not the startup package Gemini CLI puts
before the prompt), the startup package reaches the model, and `pps import gemini` of the chat file Gemini CLI
wrote adds nothing."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pps_hooks.testkit import env_for, hostile_project, pps, stored_turns

REPO = Path(__file__).resolve().parents[3]
GEMINI = REPO / ".tools" / "hosts" / "node_modules" / ".bin" / "gemini"
REPLY = "The harbour crane is painted ochre."


class Api(BaseHTTPRequestHandler):
    """The Gemini API's streamGenerateContent, one chunk with the whole answer, to every request."""

    bodies: list[dict] = []

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        Api.bodies.append(json.loads(self.rfile.read(int(self.headers.get("content-length") or 0))))
        chunk = {"candidates": [{"content": {"parts": [{"text": REPLY}], "role": "model"}, "finishReason": "STOP",
                                 "index": 0}],
                 "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 7, "totalTokenCount": 12}}
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())


@pytest.fixture
def api():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    Api.bodies = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.skipif(not GEMINI.exists(), reason="Gemini CLI is installed by `make test` into .tools/hosts (needs npm)")
def test_gemini_itself_runs_the_installed_hooks(tmp_path, api):
    home = tmp_path
    pps(home, "init", "--entity", "lyra", "--plugins", "sqlite")
    pps(home, "setup", "gemini", "--entity", "lyra")
    config = home / ".gemini" / "settings.json"
    settings = json.loads(config.read_text())
    settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}  # the key below, at the loopback API
    config.write_text(json.dumps(settings))
    project, markers = hostile_project(tmp_path)
    done = subprocess.run([str(GEMINI), "--skip-trust", "-m", "gemini-2.5-flash", "-p", "what colour is the crane?"],
                          cwd=project, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=env_for(home, GOOGLE_GEMINI_BASE_URL=api, GEMINI_API_KEY="offline-test-key"))
    assert done.returncode == 0 and REPLY in done.stdout, done.stderr[-3000:]
    assert list(markers.iterdir()) == []
    log = (home / ".pps" / "lyra" / "logs" / "hooks.log").read_text()
    for event in ("SessionStart", "BeforeAgent", "AfterAgent", "SessionEnd"):
        assert f"gemini {event} session=" in log, log
    turns = stored_turns(home)
    assert [(t["author_name"], t["content"]) for t in turns] == [("someone", "what colour is the crane?"),
                                                                  ("Lyra", REPLY)]
    assert "AMBIENT RECALL MANIFEST" in json.dumps(Api.bodies[-1]["contents"])  # the startup package, sent
    imported = pps(home, "import", "gemini", "--entity", "lyra").stdout  # the chat file Gemini CLI wrote
    assert "read 2 turns" in imported and "0 new" in imported, imported
