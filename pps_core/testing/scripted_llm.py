"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests only (the one allowed stand-in).

    with ScriptedLLM(lambda messages: "a summary") as llm:
        memory = await make_memory(plugins=[...], llm={"base_url": llm.base_url, "model": "scripted"})

Any plugin that speaks to an OpenAI-compatible endpoint (``[llm]``) talks to it; a test of another chat model
provider registers its plugin instead.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedLLM:
    """Answers POST /v1/chat/completions with ``reply(messages)``; records every request body in
    ``requests`` and its path and Authorization header in ``calls``. A reply of None answers HTTP 500.

    A stand-in that needs the whole request (``response_format``, the model) overrides :meth:`respond`.
    """

    def __init__(self, reply: Callable[[list[dict[str, Any]]], str | None] | None = None,
                 model: str = "scripted-model") -> None:
        self.reply = reply
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.requests.append(body)
                outer.calls.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if not self.path.endswith("/chat/completions"):
                    self.send_response(404)
                    self.end_headers()
                    return
                text = outer.respond(body)
                if text is None:
                    self.send_response(500)
                    self.end_headers()
                    return
                data = json.dumps({"id": "x", "object": "chat.completion", "model": outer.model, "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def respond(self, body: dict[str, Any]) -> str | None:
        """The assistant's text for one request body; None answers HTTP 500."""
        if self.reply is None:
            raise NotImplementedError("pass reply= or override respond()")
        return self.reply(body.get("messages", []))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def minimal_instance(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """The smallest instance of a JSON schema (what a terse model would answer to a structured request)."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if "$ref" in schema:
        return minimal_instance(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        if any(s.get("type") == "null" for s in schema["anyOf"]):
            return None
        return minimal_instance(schema["anyOf"][0], defs)
    kind = str(schema.get("type"))
    if kind == "object":
        return {k: minimal_instance(v, defs) for k, v in schema.get("properties", {}).items()
                if k in schema.get("required", [])}
    return {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False}.get(kind)
