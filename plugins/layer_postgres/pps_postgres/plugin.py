"""Entry point of the postgres plugin: the sqlite plugin's layers and operations, on a PostgreSQL store."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_layers(memory):
    from pps_sqlite.layers import RawCaptureLayer, SummariesLayer

    from .store import PostgresStore

    raw = RawCaptureLayer(memory, PostgresStore(memory))
    return [raw, SummariesLayer(memory, raw)]


@hookimpl
def pps_operations(memory):
    from pps_sqlite.operations import operations

    return operations()  # the same Operation objects: their handlers call the raw_capture layer's TurnStore
