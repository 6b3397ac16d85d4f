"""An embedding endpoint that is down makes a search fail as 'unavailable' (503) naming the endpoint, not a 500."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pps_core.errors import Unavailable


@pytest.fixture
def endpoint():
    state = {"status": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            payload = json.dumps({"data": [{"index": i, "embedding": [1.0, float(len(t)), 0.5]}
                                           for i, t in enumerate(body["input"])]}).encode()
            if state["status"] != 200:
                payload = b'{"error": "overloaded"}'
            self.send_response(state["status"])
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    server.shutdown()
    server.server_close()


async def test_search_during_an_outage_is_unavailable(make_memory, endpoint):
    url, state = endpoint
    memory = await make_memory(plugins=["chroma", "embeddings"],
                               embeddings={"provider": "openai", "base_url": url, "model": "m", "dimension": 3})
    await memory.call("anchor_save", {"title": "Harbour", "content": "boats in the harbour"})
    state["status"] = 503
    with pytest.raises(Unavailable) as caught:
        await memory.call("anchor_search", {"query": "boats"})
    assert caught.value.status == 503 and "HTTP 503" in caught.value.message and url in caught.value.message
