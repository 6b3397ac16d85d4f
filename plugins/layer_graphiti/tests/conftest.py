"""Fixtures for the graphiti plugin's tests: memories on the real embedded graph, a scripted LLM."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

PLUGINS = ["sqlite", "embeddings", "graphiti"]


@pytest.fixture
def graph_memory(make_memory):
    """``memory = await graph_memory(**settings)``: sqlite + embeddings + graphiti, focal entity Lyra."""

    async def factory(**settings):
        settings.setdefault("plugins", list(PLUGINS))
        settings.setdefault("focal_entity", "Lyra")
        return await make_memory(**settings)

    return factory


def _minimal(schema: dict, defs: dict):
    """The smallest instance of a JSON schema (what a terse model would answer)."""
    if "$ref" in schema:
        return _minimal(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        return None if any(s.get("type") == "null" for s in schema["anyOf"]) else _minimal(schema["anyOf"][0], defs)
    kind = schema.get("type")
    if kind == "object":
        return {k: _minimal(v, defs) for k, v in schema.get("properties", {}).items()
                if k in schema.get("required", [])}
    return {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False}.get(kind)


class ScriptedLLM:
    """An OpenAI-compatible chat endpoint on loopback answering graphiti's response models.

    Entities are the capitalised words of the episode's current message; the fact links the first
    two. Every other model gets its smallest valid answer (no duplicates, no summaries).
    """

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, name: str, schema: dict, messages: list[dict]) -> dict:
        text = "\n".join(m["content"] for m in messages)
        current = re.search(r"<CURRENT[_ ]MESSAGE>(.*?)</CURRENT[_ ]MESSAGE>", text, re.S)
        body = current.group(1) if current else ""
        body = re.sub(r"^\s*[\w ]+:\s", "", body.strip())  # drop the "author:" prefix
        names = list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+\b", body)))
        if name == "ExtractedEntities":
            return {"extracted_entities": [{"name": n, "entity_type_id": 0} for n in names]}
        if name == "ExtractedEdges":
            if len(names) < 2:
                return {"edges": []}
            return {"edges": [{"source_entity_name": names[0], "target_entity_name": names[1],
                               "relation_type": "RELATES_TO_SCRIPTED", "fact": body.strip()}]}
        return _minimal(schema, schema.get("$defs", {}))

    def _handler(self):
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fmt = req.get("response_format") or {}
                name = (fmt.get("json_schema") or {}).get("name", "none")
                schema = (fmt.get("json_schema") or {}).get("schema", {})
                llm.calls.append(name)
                if llm.fail:
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "scripted failure"}}')
                    return
                content = json.dumps(llm.answer(name, schema, req["messages"]))
                out = json.dumps({"id": "x", "object": "chat.completion", "created": int(time.time()),
                                  "model": req.get("model", "m"),
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": content}}],
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out.encode())

        return Handler

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted_llm():
    llm = ScriptedLLM()
    yield llm
    llm.close()
