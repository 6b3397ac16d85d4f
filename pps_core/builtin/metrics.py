"""Built-in plugin ``builtin:metrics``: every catalog call recorded for ``/metrics`` (:mod:`pps_core.metrics`), by an
object per entity that keeps that entity's counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hookspecs import hookimpl
from ..metrics import OperationMetrics

if TYPE_CHECKING:  # pragma: no cover
    from ..memory import Memory


class EntityMetrics:
    """The operation metrics of one entity (``metrics_of(memory)`` finds them)."""

    def __init__(self, memory: Memory) -> None:
        self.metrics = OperationMetrics(memory.settings.entity)

    @hookimpl
    def pps_operation_called(self, name: str, ms: float, status: int) -> None:
        self.metrics.record(name, status, ms)


@hookimpl
def pps_entity_plugin(memory: Memory) -> EntityMetrics:
    return EntityMetrics(memory)
