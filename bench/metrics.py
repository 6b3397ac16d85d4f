"""What recording metrics costs each operation call (pps_core.metrics, through pps_operation_called).

    .venv/bin/python bench/metrics.py [--calls 20000]

One in-process entity with a store (sqlite); `summary_stats` (a cheap read: two counters) is called N times
with the built-in metrics plugin unregistered (the baseline) and registered, alternating rounds in the same run,
then once more with an OpenTelemetry SDK tracer provider set (spans to an in-memory exporter). Prints the
median microseconds per call of each and the ratio to the baseline, and how long rendering /metrics takes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time


async def timed(memory, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        await memory.call("summary_stats", {})
    return (time.perf_counter() - started) / n * 1e6


async def main(calls: int) -> None:
    from pps_core import Memory
    from pps_core.metrics import ENTITY_OBJECT, metrics_of, prometheus_text
    from pps_core.settings import load_settings

    with tempfile.TemporaryDirectory() as root:
        os.environ["PPS_ROOT"] = root
        async with Memory(load_settings("bench", plugins=["sqlite"], timezone="UTC")) as memory:
            plugin = memory.pm.get_plugin(ENTITY_OBJECT)  # builtin:metrics' object for this entity records
            await timed(memory, 500)  # warm up
            off, on = [], []
            for _ in range(5):
                memory.pm.unregister(plugin)
                off.append(await timed(memory, calls // 5))
                memory.pm.register(plugin, name=ENTITY_OBJECT)
                on.append(await timed(memory, calls // 5))
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
            trace.set_tracer_provider(provider)
            metrics_of(memory)._recheck = 0.0  # seen now rather than within TRACER_RECHECK_S
            spans = [await timed(memory, calls // 5) for _ in range(3)]
            started = time.perf_counter()
            text = await prometheus_text(memory)
            render_ms = (time.perf_counter() - started) * 1000
    base = statistics.median(off)
    print(f"{calls} calls of summary_stats (sqlite), median of rounds, microseconds per call:")
    for label, runs in (("no metrics (baseline)", off), ("metrics recorded", on), ("metrics + OTel spans", spans)):
        med = statistics.median(runs)
        print(f"  {label:<24} {med:8.1f} us   x{med / base:.3f}")
    print(f"/metrics rendered in {render_ms:.1f} ms ({len(text.splitlines())} lines)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().calls))
