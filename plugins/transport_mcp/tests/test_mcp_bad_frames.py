"""Frames no parser can read (issue 14): nested past the JSON parser's depth, not JSON, or JSON that is no
JSON-RPC message. Each gets a JSON-RPC error (the request's id when it has one), nothing is written, and the
session keeps serving: over stdio (`pps serve mcp --local`, a real subprocess) and over MCP on HTTP."""

import json
import queue
import subprocess
import sys
import threading

import httpx

from pps_core.testing.server import init_entity, pps_env, start_server

DEEP = 5000
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bad-frames", "version": "1"}}}


def deep_frames():
    """(frame, expected code, expected id) for each unreadable frame."""
    return [
        ('{"jsonrpc":"2.0","id":5,"method":"tools/list","params":' + "[" * DEEP + "]" * DEEP + "}", -32700, None),
        ('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"store_message","arguments":'
         '{"content":"x","author_name":"A","channel":"c","metadata":' + '{"a":' * DEEP + "1" + "}" * DEEP + "}}}",
         -32700, None),
        ("{bad json", -32700, None),
        ('{"jsonrpc":"2.0","method":5}', (-32600, -32602), None),
        ("[1, 2]", (-32600, -32602), None),
    ]


def tool_call(rid, name, arguments):
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def nested(depth):
    value = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


class StdioClient:
    def __init__(self, root):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pps_core.cli", "serve", "mcp", "--entity", "lyra", "--local"],
            env=pps_env(root), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, frame):
        self.proc.stdin.write((frame if isinstance(frame, str) else json.dumps(frame)) + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout=60):
        try:
            return json.loads(self.lines.get(timeout=timeout))
        except queue.Empty:
            return None

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        return self.proc.stderr.read()


def check_error(answer, frame, code, rid):
    assert answer is not None, f"no answer to {frame[:60]!r}"
    assert "error" in answer, (frame[:60], answer)
    assert answer["error"]["code"] in (code if isinstance(code, tuple) else (code,)), (frame[:60], answer)
    assert answer.get("id") == rid, (frame[:60], answer)


def test_unreadable_frames_over_stdio_get_an_error_and_the_session_goes_on(tmp_path):
    init_entity(tmp_path, "lyra", "sqlite,mcp")
    client = StdioClient(tmp_path)
    try:
        client.send(INIT)
        assert client.answer()["id"] == 0
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for frame, code, rid in deep_frames():
            client.send(frame)
            check_error(client.answer(timeout=30), frame, code, rid)
        client.send('{"jsonrpc":"2.0","id":9,"method":5}')  # a usable id comes back with the error
        check_error(client.answer(timeout=30), "method 5", (-32600, -32602), 9)
        client.send("")  # a blank line is not a frame: nothing to answer
        # Deep, but within the parser: the catalog refuses it as a tool error, nothing stored.
        client.send(tool_call(10, "store_message", {"content": "x", "author_name": "A", "channel": "c",
                                                    "metadata": nested(100)}))
        refused = client.answer()
        assert refused["id"] == 10 and refused["result"]["isError"], refused
        assert "nest deeper" in refused["result"]["content"][0]["text"]
        # The session still serves: a real write and a read.
        client.send(tool_call(11, "store_message", {"content": "still here", "author_name": "A", "channel": "c"}))
        stored = client.answer()
        assert stored["id"] == 11 and not stored["result"].get("isError"), stored
        client.send(tool_call(12, "summary_stats", {}))
        stats = client.answer()
        assert stats["id"] == 12, stats
        assert stats["result"]["structuredContent"]["total_messages"] == 1
    finally:
        stderr = client.close()
    assert client.proc.returncode == 0, stderr
    assert "Traceback" not in stderr


def test_unreadable_frames_over_mcp_http_get_an_error_and_the_session_goes_on(tmp_path):
    init_entity(tmp_path, "lyra", "sqlite,mcp,http")
    server = start_server(tmp_path, "--entity", "lyra")
    try:
        url = f"{server.url}/entities/lyra/mcp"
        headers = {**server.headers("lyra"), "Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json"}
        with httpx.Client(timeout=60, headers=headers) as http:
            init = http.post(url, json=INIT)
            http.headers["mcp-session-id"] = init.headers["mcp-session-id"]
            http.headers["mcp-protocol-version"] = "2025-06-18"
            http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            for frame, code, rid in deep_frames():
                r = http.post(url, content=frame)
                assert r.status_code == 400, (frame[:60], r.status_code, r.text[:300])
                check_error(r.json(), frame, code, rid)
            refused = http.post(url, json=tool_call(10, "store_message", {
                "content": "x", "author_name": "A", "channel": "c", "metadata": nested(100)})).json()
            assert refused["result"]["isError"] and "nest deeper" in refused["result"]["content"][0]["text"]
            stored = http.post(url, json=tool_call(11, "store_message",
                                                   {"content": "still here", "author_name": "A", "channel": "c"}))
            assert stored.status_code == 200 and not stored.json()["result"].get("isError"), stored.text
        assert server.call("summary_stats").json()["total_messages"] == 1
    finally:
        server.stop()
    assert "Traceback" not in server.log.read_text()
