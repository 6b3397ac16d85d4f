"""The OpenAI-compatible provider against a scripted embeddings server on loopback."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pps_embeddings.openai import EmbeddingError, OpenAIEmbedder

from pps_core import Memory
from pps_core.errors import ConfigError


class Scripted:
    """Answers /v1/embeddings with deterministic vectors; records what it was sent."""

    def __init__(self, dimension=4, status=200):
        self.dimension, self.status, self.requests = dimension, status, []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if owner.status != 200:
                    payload = b'{"error": "boom"}'
                else:
                    data = [{"index": i, "embedding": [float(len(t) + 1)] + [1.0] * (owner.dimension - 1)}
                            for i, t in enumerate(body["input"])]
                    payload = json.dumps({"object": "list", "data": list(reversed(data))}).encode()
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_batches_order_and_normalisation():
    with Scripted() as srv:
        e = OpenAIEmbedder(srv.url, "nomic-embed-text", 4, api_key="sk-secret", batch_size=2)
        vectors = e.embed(["a", "bbb", "cc", "d", "eeeee"])
    assert len(srv.requests) == 3
    assert srv.requests[0]["path"] == "/v1/embeddings"
    assert srv.requests[0]["body"] == {"model": "nomic-embed-text", "input": ["a", "bbb"]}
    assert srv.requests[0]["auth"] == "Bearer sk-secret"
    assert len(vectors) == 5
    for v in vectors:
        assert abs(sum(x * x for x in v) - 1.0) < 1e-9
    assert vectors[1][0] > vectors[0][0]  # answers were reordered by index, not taken as sent back


def test_the_hook_builds_it_from_the_entity_settings(tmp_path):
    import asyncio

    with Scripted(dimension=3) as srv:
        async def run():
            memory = Memory.for_entity("e", home=tmp_path, plugins=["embeddings"],
                                       embeddings={"provider": "openai", "base_url": srv.url, "model": "m",
                                                   "dimension": 3})
            async with memory:
                e = memory.embedder
                assert e.name == "openai:m" and e.dimension == 3
                return e.embed(["hello"])

        (v,) = asyncio.run(run())
    assert len(v) == 3 and srv.requests[0]["auth"] is None


def test_missing_settings_name_the_setting(tmp_path):
    import asyncio

    async def run():
        memory = Memory.for_entity("e", home=tmp_path, plugins=["embeddings"], embeddings={"provider": "openai"})
        async with memory:
            return memory.embedder

    with pytest.raises(ConfigError, match="embeddings.base_url"):
        asyncio.run(run())


def test_wrong_dimension_and_errors_are_clear_and_keep_the_key_secret():
    with Scripted(dimension=5) as srv:
        with pytest.raises(EmbeddingError, match="5-dimensional"):
            OpenAIEmbedder(srv.url, "m", 4).embed(["x"])
    with Scripted(status=500) as srv:
        with pytest.raises(EmbeddingError, match="HTTP 500") as info:
            OpenAIEmbedder(srv.url, "m", 4, api_key="sk-secret").embed(["x"])
        assert "sk-secret" not in str(info.value)
    with pytest.raises(EmbeddingError, match="failed"):
        OpenAIEmbedder("http://127.0.0.1:9/v1", "m", 4, timeout_s=2).embed(["x"])


def test_environment_variables_configure_it(tmp_path, monkeypatch):
    import asyncio

    monkeypatch.setenv("PPS_EMBEDDINGS_PROVIDER", "openai")
    monkeypatch.setenv("PPS_EMBEDDINGS_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("PPS_EMBEDDINGS_MODEL", "env-model")
    monkeypatch.setenv("PPS_EMBEDDINGS_DIMENSION", "12")
    monkeypatch.setenv("PPS_EMBEDDINGS_API_KEY", "sk-env")

    async def run():
        async with Memory.for_entity("e", home=tmp_path, plugins=["embeddings"]) as memory:
            return memory.embedder

    e = asyncio.run(run())
    assert isinstance(e.inner, OpenAIEmbedder) and e.name == "openai:env-model" and e.dimension == 12  # under SharedQueries
    from pps_embeddings.settings import EmbeddingSettings

    assert "sk-env" not in repr(EmbeddingSettings()) and "sk-env" not in repr(e)
