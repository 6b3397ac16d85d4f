"""`GET /metrics` on a real `pps serve http`: Prometheus text read by prometheus_client's parser, behind the
entity's token (another entity's token or none is refused), counting what the server's callers did."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from pps_core.testing.server import init_entity, start_server


def values(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_over_http_with_the_entity_token(tmp_path):
    init_entity(tmp_path, "lyra", "sqlite,http")
    init_entity(tmp_path, "nova", "sqlite,http")
    server = start_server(tmp_path, "--entity", "lyra", "--entities", "nova")
    try:
        for i in range(3):
            assert server.call("store_message", {"content": f"turn {i}", "author_name": "Ana",
                                                 "channel": "terminal"}).status_code == 200
        assert server.call("store_message", {"content": "", "author_name": "Ana", "channel": "t"}).status_code == 422
        assert server.call("get_turns_around", {"timestamp": "not a time"}).status_code == 422
        assert server.call("pps_health", {}, entity="nova").status_code == 200

        assert httpx.get(f"{server.url}/metrics").status_code == 401
        assert httpx.get(f"{server.url}/metrics", headers=server.headers("nova")).status_code == 401
        answer = httpx.get(f"{server.url}/metrics", headers=server.headers())
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain; version=0.0.4")
        got = values(answer.text)

        def one(name, **labels):
            return got[(name, frozenset({"entity": "lyra", **labels}.items()))]

        assert one("pps_operation_calls_total", operation="store_message", status="200") == 3
        assert one("pps_operation_errors_total", operation="store_message", status="422") == 1
        assert one("pps_operation_errors_total", operation="get_turns_around", status="422") == 1
        assert one("pps_operation_duration_seconds_count", operation="store_message") == 4
        assert one("pps_layer_up", layer="raw_capture") == 1
        assert one("pps_backlog", layer="raw_capture", kind="unsummarized") == 3
        assert one("pps_layer_items", layer="raw_capture", kind="messages") == 3
        assert not any(dict(labels).get("entity") == "nova" for _name, labels in got)

        other = values(httpx.get(f"{server.url}/entities/nova/metrics", headers=server.headers("nova")).text)
        assert other[("pps_operation_calls_total", frozenset({"entity": "nova", "operation": "pps_health",
                                                              "status": "200"}.items()))] == 1
        assert httpx.get(f"{server.url}/entities/nova/metrics", headers=server.headers()).status_code == 401
    finally:
        server.stop()
