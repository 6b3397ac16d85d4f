"""``pps reindex`` and the ``pps_reindex`` operation: rebuild derived indexes from the source of truth.

Each layer that keeps a derived index (word-photo vectors in Chroma, turn and summary vectors) implements
:meth:`pps_core.layer.Layer.reindex`; this module only picks the layers, runs them one after another and
draws a bar per layer when the command runs here on a terminal. Through a server the operation runs there,
without a bar.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..catalog import Operation
from ..errors import InvalidParams

if TYPE_CHECKING:  # pragma: no cover
    from tqdm import tqdm

    from ..cli import CommandRegistry
    from ..memory import Memory

Progress = Callable[[int, int], None]


class ReindexParams(BaseModel):
    model_config = {"extra": "forbid"}

    layer: str | None = Field(None, max_length=100, description="one layer (default: every layer that has an index)")
    full: bool = Field(False, description="drop the derived index and rebuild all of it (else: only what is "
                                          "missing or stale)")


def _quiet(_done: int, _total: int) -> None:
    return None


async def reindex(memory: Memory, layer: str | None = None, full: bool = False,
                  progress_for: Callable[[str], Progress] | None = None) -> dict[str, Any]:
    """Run ``reindex`` on one layer or every layer that has one; ``progress_for(name)`` gives a callback."""
    if layer is not None and layer not in memory.layers:
        raise InvalidParams(f"layer: no layer named {layer!r} (loaded: {', '.join(memory.layers) or 'none'})",
                            param="layer")
    names = [layer] if layer is not None else list(memory.layers)
    report: dict[str, Any] = {}
    for name in names:
        method = memory.layers[name].reindex
        progress = progress_for(name) if progress_for else _quiet
        started = time.perf_counter()
        result = await method(progress, full)
        if result is None:
            continue
        report[name] = {**result, "seconds": round(time.perf_counter() - started, 3)}
    if layer is not None and not report:
        raise InvalidParams(f"layer: {layer!r} keeps no derived index to rebuild", param="layer")
    return {"entity": memory.settings.entity, "full": full, "layers": report}


async def pps_reindex(memory: Memory, p: ReindexParams) -> dict[str, Any]:
    return await reindex(memory, p.layer, p.full)


def reindex_operation() -> Operation:
    return Operation(
        name="pps_reindex", params=ReindexParams, handler=pps_reindex, group="health", idempotent=True,
        description=("Rebuild derived indexes from the source of truth: word-photo vectors from the files, turn and "
                     "summary vectors from the database (those missing, e.g. stored before an embedder was "
                     "loaded; with full=true all of them). One layer or every layer that keeps one. Can take "
                     "minutes on a large memory."))


# -- the command ---------------------------------------------------------------------------------


def add_commands(cli: CommandRegistry) -> None:
    p = cli.add("reindex", cmd_reindex, help="rebuild derived indexes (vectors, search indexes) with progress")
    cli.entity_args(p)
    p.add_argument("--layer", help="only this layer (default: every layer that keeps a derived index)")
    p.add_argument("--full", action="store_true", help="drop and rebuild everything, not only what is missing")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")


def cmd_reindex(args: Any) -> int:
    import asyncio

    from ..settings import load_settings

    settings = load_settings(args.entity, args.home, must_exist=True)
    params = {k: v for k, v in {"layer": args.layer, "full": args.full or None}.items() if v is not None}
    result = None
    if not args.local:
        from ..forward import try_forward

        result = try_forward(settings, "pps_reindex", params)  # the owner does the work; no bar here
    if result is None:
        result = asyncio.run(_here(settings, args.layer, args.full))
    print(json.dumps(result, indent=2))
    return 0


async def _here(settings: Any, layer: str | None, full: bool) -> dict[str, Any]:
    from ..memory import Memory
    from ..progress import progress

    bars: list[tqdm[Any]] = []

    def progress_for(name: str) -> Progress:
        for old in bars:
            old.close()
        bar = progress(None, f"reindex {name}", unit="item")
        bars.append(bar)

        def tick(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        return tick

    async with Memory(settings) as memory:
        try:
            return await reindex(memory, layer, full, progress_for)
        finally:
            for bar in bars:
                bar.close()

