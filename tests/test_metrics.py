"""Operation metrics (pps_core.metrics): latency histograms and calls by status recorded through
pps_operation_called, layer health and backlogs, rendered as Prometheus text and read back with
prometheus_client's own parser; OpenTelemetry spans only when a tracer provider is set."""

from __future__ import annotations

import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pps_core import Conflict, LayerHealth, Operation, Params, Text, hookimpl
from pps_core.metrics import BUCKETS, metrics_of, prometheus_text
from pps_core.testing import ScriptedLayer, broken_layer_plugin, layer_plugin


class Say(Params):
    content: Text


class Ops:
    __pps_name__ = "ops"

    @hookimpl
    def pps_operations(self, memory):
        async def say(memory, p: Say):
            return {"said": p.content}

        async def refuse(memory, p: Params):
            raise Conflict("not now")

        async def crash(memory, p: Params):
            raise RuntimeError("a bug")

        return [Operation(name="say", params=Say, handler=say, description="say"),
                Operation(name="refuse", params=Params, handler=refuse, description="refuses"),
                Operation(name="crash", params=Params, handler=crash, description="crashes")]


class Backlogged(ScriptedLayer):
    async def health(self):
        return LayerHealth(layer=self.name, available=True, counts={"items": 7}, backlog={"unsummarized": 42},
                           latency_ms=12.5)


def samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_calls_latencies_health_and_backlog_as_prometheus_text(make_memory):
    memory = await make_memory(plugins=[], extra_plugins=[Ops(), layer_plugin(Backlogged("notes", ["a"])),
                                                          broken_layer_plugin("graph", "connection refused")])
    for _ in range(3):
        await memory.call("say", {"content": "zebrafish"})
    with pytest.raises(Conflict):
        await memory.call("refuse")
    with pytest.raises(Exception, match="content"):
        await memory.call("say", {"content": " "})
    with pytest.raises(RuntimeError):
        await memory.call("crash")
    text = await prometheus_text(memory)
    got = samples(text)
    e = ("entity", memory.settings.entity)

    def one(name, **labels):
        return got[(name, tuple(sorted([e, *labels.items()])))]

    assert one("pps_operation_calls_total", operation="say", status="200") == 3
    assert one("pps_operation_errors_total", operation="say", status="422") == 1
    assert one("pps_operation_errors_total", operation="refuse", status="409") == 1
    assert one("pps_operation_errors_total", operation="crash", status="500") == 1
    assert ("pps_operation_errors_total", (e, ("operation", "say"), ("status", "200"))) not in got
    assert one("pps_operation_duration_seconds_count", operation="say") == 4
    assert one("pps_operation_duration_seconds_bucket", operation="say", le="+Inf") == 4
    assert one("pps_operation_duration_seconds_bucket", operation="say", le="30.0") == 4
    assert one("pps_operation_duration_seconds_sum", operation="say") < 1
    assert one("pps_layer_up", layer="notes") == 1 and one("pps_layer_up", layer="graph") == 0
    assert one("pps_layer_items", layer="notes", kind="items") == 7
    assert one("pps_backlog", layer="notes", kind="unsummarized") == 42
    assert one("pps_layer_search_latency_seconds", layer="notes") == 0.0125
    assert one("pps_info", version=__import__("pps_core").__version__) == 1
    assert "zebrafish" not in text  # no parameter ever becomes a label


def test_histogram_buckets_are_cumulative_and_labels_escaped():
    from pps_core.metrics import OperationMetrics, render

    m = OperationMetrics('a "quoted"\\entity\nname')
    for ms in (0.5, 3, 3, 40, 20_000, 99_000):
        m.record("op", 200, ms)
    text = render(m, {}, "0")
    fam = {f.name: f for f in text_string_to_metric_families(text)}["pps_operation_duration_seconds"]
    buckets = {s.labels["le"]: s.value for s in fam.samples if s.name.endswith("_bucket")}
    assert fam.samples[0].labels["entity"] == 'a "quoted"\\entity\nname'
    assert buckets["0.001"] == 1 and buckets["0.005"] == 3 and buckets["0.05"] == 4 and buckets["30.0"] == 5
    assert buckets["+Inf"] == 6 and len(buckets) == len(BUCKETS) + 1


async def test_spans_when_a_tracer_provider_is_set(make_memory, monkeypatch):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = await make_memory(plugins=[], extra_plugins=[Ops()])
    await memory.call("say", {"content": "before any provider"})  # the default proxy provider: no span made
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    monkeypatch.setattr(metrics_of(memory), "_recheck", 0.0)  # as if TRACER_RECHECK_S had passed
    await memory.call("say", {"content": "secret words"})
    with pytest.raises(Conflict):
        await memory.call("refuse")
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["pps say", "pps refuse"]
    assert spans[0].attributes["pps.status"] == 200 and spans[0].attributes["rpc.method"] == "say"
    assert spans[1].status.status_code == trace.StatusCode.ERROR and spans[1].attributes["pps.status"] == 409
    assert spans[0].end_time > spans[0].start_time
    assert "secret" not in repr([dict(s.attributes) for s in spans])


async def test_without_opentelemetry_nothing_is_imported(make_memory, monkeypatch):
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # `import opentelemetry` raises ImportError
    memory = await make_memory(plugins=[], extra_plugins=[Ops()])
    await memory.call("say", {"content": "hi"})
    await memory.call("say", {"content": "hi"})
    assert metrics_of(memory)._otel is False  # looked up once, then never again
    assert metrics_of(memory).calls[("say", 200)] == 2
