"""Word-photos with the alternative embedder: an OpenAI-compatible endpoint (scripted, on loopback)."""

import hashlib
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

DIM = 64


def _vector(text: str) -> list[float]:
    v = [0.0] * DIM
    for word in re.findall(r"\w+", text.lower()):
        v[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


state = {"down": False}


@pytest.fixture
def endpoint():
    state["down"] = False
    calls = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            calls.append(len(body["input"]))
            if state["down"]:
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            payload = json.dumps({"data": [{"index": i, "embedding": _vector(t)}
                                           for i, t in enumerate(body["input"])]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", calls
    server.shutdown()
    server.server_close()


async def test_word_photos_on_an_openai_compatible_embedder(make_memory, endpoint):
    url, calls = endpoint
    memory = await make_memory(plugins=["chroma", "embeddings"],
                               embeddings={"provider": "openai", "base_url": url, "model": "bow", "dimension": DIM})
    await memory.call("anchor_save", {"title": "Harbour", "content": "fishing boats in the harbour"})
    await memory.call("anchor_save", {"title": "Bread", "content": "baking sourdough bread"})
    out = await memory.call("anchor_search", {"query": "sourdough bread", "limit": 1})
    assert out["results"][0]["source"] == "bread.md"
    assert calls  # vectors came from the endpoint
    health = (await memory.call("pps_health", {}))["layers"]["core_anchors"]
    assert "openai:bow" in health["detail"]


async def test_an_endpoint_outage_leaves_the_file_and_indexes_it_later(make_memory, endpoint, pps_home):
    url, _calls = endpoint
    memory = await make_memory(plugins=["chroma", "embeddings"],
                               embeddings={"provider": "openai", "base_url": url, "model": "bow", "dimension": DIM})
    await memory.call("anchor_save", {"title": "Harbour", "content": "fishing boats in the harbour"})
    state["down"] = True
    saved = await memory.call("anchor_save", {"title": "Bread", "content": "baking sourdough bread"})
    assert saved["saved"] == "bread.md" and saved["indexed"] is False and "HTTP 503" in saved["detail"]
    assert (pps_home / "testentity" / "word_photos" / "bread.md").exists()  # the file is the truth
    out = await memory.call("ambient_recall", {"context": "sourdough bread"})
    assert {s["layer"]: s["status"] for s in out["layers"]}["core_anchors"] == "error"
    state["down"] = False
    out = await memory.call("anchor_search", {"query": "sourdough bread", "limit": 1})
    assert out["results"][0]["source"] == "bread.md"
