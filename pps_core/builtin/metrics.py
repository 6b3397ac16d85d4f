"""Built-in plugin ``builtin:metrics``: every catalog call recorded for ``/metrics`` (:mod:`pps_core.metrics`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hookspecs import hookimpl
from ..metrics import metrics_of

if TYPE_CHECKING:  # pragma: no cover
    from ..memory import Memory


@hookimpl
def pps_operation_called(memory: Memory, name: str, ms: float, status: int) -> None:
    metrics_of(memory).record(name, status, ms)
