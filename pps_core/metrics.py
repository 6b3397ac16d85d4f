"""Operation metrics of an entity, in memory, and their Prometheus text; OpenTelemetry spans when available.

The built-in plugin ``builtin:metrics`` records every catalog call through ``pps_operation_called`` (a dict
update and a bisect: nothing is written anywhere, nothing on the read path waits). A transport serves
:func:`prometheus_text` (the HTTP transport at ``/metrics``). Labels are the entity, operation names of the
catalog, layer names and HTTP-style statuses: never parameters or stored text.

OpenTelemetry: when ``opentelemetry-api`` is importable and a tracer provider has been set (an SDK configured by
the host), each call becomes a span ``pps <operation>`` with its real start and end, a child of whatever span
was current. Without the package nothing is imported, and without a provider nothing is created (a provider set
later is seen within ``TRACER_RECHECK_S``).
"""

from __future__ import annotations

import functools
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .models import LayerHealth

#: Upper bounds (seconds) of the latency histogram's buckets.
#: How often (seconds) a process without a tracer provider looks again whether one was set.
TRACER_RECHECK_S = 5.0
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class OperationMetrics:
    """Latency histograms and call counts per operation, for one entity in this process."""

    def __init__(self, entity: str) -> None:
        self.entity = entity
        self.started = time.time()
        self.buckets: dict[str, list[int]] = {}
        self.sums: dict[str, float] = {}
        self.calls: dict[tuple[str, int], int] = {}
        self._otel: Any = None  # None: not looked up yet; False: not installed
        self._tracer: Any = None
        self._recheck = 0.0

    def record(self, name: str, status: int, ms: float) -> None:
        counts = self.buckets.get(name)
        if counts is None:
            counts = self.buckets[name] = [0] * (len(BUCKETS) + 1)
            self.sums[name] = 0.0
        seconds = ms / 1000.0
        counts[bisect_left(BUCKETS, seconds)] += 1
        self.sums[name] += seconds
        key = (name, status)
        self.calls[key] = self.calls.get(key, 0) + 1
        if self._otel is not False:
            self._span(name, status, ms)

    def _span(self, name: str, status: int, ms: float) -> None:
        if self._otel is None:
            try:
                from opentelemetry import trace
            except ImportError:
                self._otel = False
                return
            self._otel = trace
        trace = self._otel
        now = time.monotonic()
        if now >= self._recheck:  # asking for the provider costs more than the rest of a record: every few seconds
            provider = trace.get_tracer_provider()
            proxy = type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider")
            self._tracer = None if proxy else provider.get_tracer("pps")  # no SDK set by the host: no spans
            self._recheck = now + TRACER_RECHECK_S
        if self._tracer is None:
            return
        end = time.time_ns()
        span = self._tracer.start_span(f"pps {name}", start_time=end - int(ms * 1e6), attributes={
            "rpc.system": "pps", "rpc.method": name, "pps.entity": self.entity, "pps.status": status})
        if status != 200:
            span.set_status(trace.Status(trace.StatusCode.ERROR, f"status {status}"))
        span.end(end_time=end)


#: The name ``builtin:metrics``'s object for an entity is registered under (``pps_entity_plugin``).
ENTITY_OBJECT = "builtin:metrics:entity"


def metrics_of(memory: Any) -> OperationMetrics:
    """The metrics recorded for one memory: kept by ``builtin:metrics``'s object for its entity (empty metrics for
    a memory whose plugins are not loaded)."""
    pm = getattr(memory, "pm", None)
    recorder = pm.get_plugin(ENTITY_OBJECT) if pm is not None else None
    if recorder is None:
        return OperationMetrics(memory.settings.entity)
    found: OperationMetrics = recorder.metrics
    return found


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: object) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in labels.items()) + "}"


def render(metrics: OperationMetrics, health: Mapping[str, LayerHealth], version: str) -> str:
    """The Prometheus text exposition (format 0.0.4) of one entity."""
    e = metrics.entity
    out: list[str] = [
        "# HELP pps_info The PPS version serving this entity.", "# TYPE pps_info gauge",
        f"pps_info{_labels(entity=e, version=version)} 1",
        "# HELP pps_start_time_seconds When this process began recording the entity's metrics (Unix time).",
        "# TYPE pps_start_time_seconds gauge", f"pps_start_time_seconds{_labels(entity=e)} {metrics.started:.3f}",
        "# HELP pps_operation_duration_seconds How long each operation took, from validation to its answer.",
        "# TYPE pps_operation_duration_seconds histogram",
    ]
    for name in sorted(metrics.buckets):
        counts, total = metrics.buckets[name], 0
        for bound, n in zip((*BUCKETS, float("inf")), counts, strict=True):
            total += n
            le = "+Inf" if bound == float("inf") else repr(float(bound))
            out.append(f"pps_operation_duration_seconds_bucket{_labels(entity=e, operation=name, le=le)} {total}")
        out.append(f"pps_operation_duration_seconds_sum{_labels(entity=e, operation=name)} "
                   f"{metrics.sums[name]:.6f}")
        out.append(f"pps_operation_duration_seconds_count{_labels(entity=e, operation=name)} {total}")
    out += ["# HELP pps_operation_calls_total Calls of each operation by status (200, or the error's HTTP status).",
            "# TYPE pps_operation_calls_total counter"]
    calls = sorted(metrics.calls.items())
    out += [f"pps_operation_calls_total{_labels(entity=e, operation=n, status=s)} {c}" for (n, s), c in calls]
    out += ["# HELP pps_operation_errors_total Failed calls of each operation by status (4xx: the caller's input; "
            "5xx: PPS or a backend).", "# TYPE pps_operation_errors_total counter"]
    out += [f"pps_operation_errors_total{_labels(entity=e, operation=n, status=s)} {c}"
            for (n, s), c in calls if s != 200]
    out += ["# HELP pps_layer_up Whether each layer is available (1) or not (0).", "# TYPE pps_layer_up gauge"]
    out += [f"pps_layer_up{_labels(entity=e, layer=n)} {int(h.available)}" for n, h in sorted(health.items())]
    out += ["# HELP pps_layer_items What each layer holds, by kind (its health counts).",
            "# TYPE pps_layer_items gauge"]
    out += [f"pps_layer_items{_labels(entity=e, layer=n, kind=k)} {v}" for n, h in sorted(health.items())
            for k, v in sorted(h.counts.items())]
    out += ["# HELP pps_backlog Work waiting, by layer and kind (unsummarized turns, turns not ingested, ...).",
            "# TYPE pps_backlog gauge"]
    out += [f"pps_backlog{_labels(entity=e, layer=n, kind=k)} {v}" for n, h in sorted(health.items())
            for k, v in sorted(h.backlog.items())]
    out += ["# HELP pps_layer_search_latency_seconds Each layer's recent search latency.",
            "# TYPE pps_layer_search_latency_seconds gauge"]
    out += [f"pps_layer_search_latency_seconds{_labels(entity=e, layer=n)} {h.latency_ms / 1000:.6f}"
            for n, h in sorted(health.items()) if h.latency_ms is not None]
    return "\n".join(out) + "\n"


async def prometheus_text(memory: Any, health: Callable[[], Awaitable[Mapping[str, LayerHealth]]] | None = None) -> str:
    """One entity's metrics as Prometheus text: operation latencies and calls recorded in this process, and every
    layer's health, items and backlog asked now (each layer within its timeout)."""
    layers = await (health or memory.health)()
    return render(metrics_of(memory), layers, _version())


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pps-core")
    except PackageNotFoundError:  # pragma: no cover - run from a tree that is not installed
        return "unknown"
