"""Built-in plugin ``builtin:recall``: ambient_recall, the startup package (recency, no search) or a fused
search across every layer. It knows layers only through the :class:`~pps_core.layer.Layer` contract."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field, field_validator

from .. import render
from ..catalog import Operation
from ..contracts import UnreadSource
from ..hookspecs import hookimpl
from ..layer import FailedLayer, Layer, WarmingLayer
from ..memory import LayerTimeout
from ..models import (
    LayerHealth,
    LayerStatus,
    Pointer,
    SearchResult,
    SectionConfig,
    SectionItem,
    StartupItems,
    item_json,
)
from ..privacy import Captured
from ..render import SEPARATOR, Block
from ..timeutil import now_utc
from .budget import assemble

if TYPE_CHECKING:  # pragma: no cover
    from ..memory import Memory

T = TypeVar("T")
RRF_K = 60
TURN_CHARS = 1000
#: The largest ``limit`` a navigation operation takes: a "left out" pointer asks for at most one page.
PAGE_LIMIT = 1000


class AmbientRecallParams(BaseModel):
    model_config = {"extra": "forbid"}
    context: str = Field(..., min_length=1, max_length=20_000,
                         description="what is being talked about, or 'startup' for the startup package")
    limit_per_layer: int | None = Field(None, ge=0, le=100,
                                        description="results per layer (default: what the budget can show)")
    channel: str | None = Field(None, max_length=200, description="the caller's channel, e.g. 'terminal:abc'")
    consumer_key: Captured | None = Field(None, max_length=200,
                                     description="the caller's read cursor: shows unread turns from other channels")
    budget: int | None = Field(None, ge=0, le=2_000_000,
                               description="most characters of text (default from pps.toml; 0: no limit); "
                                           "what is left out is listed")
    explain: bool = Field(False, description="add each result's scoring signals")
    min_score: dict[str, float] | None = Field(
        None, max_length=100, description="layer -> lowest score shown, for this call (over [recall] min_score and "
                                          "the layer's own floor); 0 for a layer shows every match it found")

    @field_validator("min_score")
    @classmethod
    def _finite(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is not None and any(x != x or x in (float("inf"), float("-inf")) for x in v.values()):
            raise ValueError("floors must be finite numbers")
        return v

    @field_validator("budget")
    @classmethod
    def _budget(cls, v: int | None) -> int | None:
        if v is not None and 0 < v < 200:
            raise ValueError("at least 200 characters (0 = no limit)")
        return v

    @field_validator("context")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


async def ambient_recall(memory: Memory, p: AmbientRecallParams) -> dict[str, Any]:
    started = time.perf_counter()
    now = now_utc()
    st = memory.settings.startup
    health = await memory.health()
    header = [render.clock_lines(now, memory.tz, st.late_night)] if st.clock else []
    if st.health:
        header.append(_health_line(memory, health))
    is_startup = p.context.strip().lower() == "startup"
    # every path answers within a budget unless the call names one; 0 asks for everything
    given = p.budget if p.budget is not None else (st.budget if is_startup else memory.settings.recall.budget)
    budget = given or None
    if memory.settings.identity and budget is not None:
        header.insert(0, memory.settings.identity)
    unread = await _unread_items(memory, p) if p.consumer_key else None
    seen = _channels(unread[1].items) if unread else []
    if is_startup:
        blocks, statuses, results, labels = await _startup_blocks(memory, p, seen)
    else:
        blocks, statuses, results, labels = await _search_blocks(memory, p, seen, budget)
    if unread is not None:
        blocks = [_unread_block(memory, unread[0], unread[1], labels)] + blocks
    named = {s.layer for s in statuses}
    statuses += [LayerStatus(layer=w.name, status="warming", detail=w.title) for w in memory.warming()
                 if w.name not in named]  # a glance: every layer it could not open, sectioned or not

    text, shown, left_out, emitted = assemble(header, blocks, statuses, budget, st.manifest)
    # the structured answer holds what the text shows (and what a layer searched but does not render), never the
    # items a budget left out: the manifest's left_out names the call that fetches them
    results = [r for b, n in zip(blocks, shown, strict=True) if b.data is not None
               for r in (b.data[i] for i in b.chosen(n))] + results
    return {
        "context": p.context,
        "startup": is_startup,
        "text": text,
        "clock": {"utc": now.isoformat(timespec="seconds"), "local": now.astimezone(memory.tz).isoformat(
            timespec="seconds"), "timezone": memory.tz.key},
        "health": {name: h.model_dump() for name, h in health.items()},
        "manifest": {
            "sections": [{"name": b.name, "layer": b.layer, "chars": emitted[i], "items": shown[i],
                          "total": b.total if b.total is not None else len(b.items)}
                         for i, b in enumerate(blocks)],
            "total_chars": len(text),  # every character of the package, as the manifest's TOTAL says
            "left_out": left_out,
        },
        "layers": [s.model_dump() for s in statuses],
        "results": results,
        "latency_ms": round((time.perf_counter() - started) * 1000, 2),
    }


def _health_line(memory: Memory, health: dict[str, LayerHealth]) -> str:
    """Every layer's backlog, in layer order, each count as its layer words it: the kernel gives no key a
    meaning of its own (thresholds and wording belong to the layer that knows what its backlog means)."""
    parts = []
    for name, h in health.items():
        layer = memory.layer(name)
        for key, n in h.backlog.items():
            text = layer.backlog_text(key, n) if layer is not None else None
            if text:
                parts.append(text)
    return render.health_line(parts)


async def _guarded(memory: Memory, name: str, kind: str, coro: Coroutine[Any, Any, T],
                   budget_ms: float | None = None) -> tuple[T | None, LayerStatus]:
    """Await one layer's part, at most ``budget_ms`` (else ``[recall] layer_timeout_s``; a first answer of this
    ``kind`` in this process gets ``[recall] warmup_timeout_s``): a layer that fails or overruns is reported in
    its status (``warming`` past its first answer's budget, ``timeout`` when stuck), never fails the call."""
    started = time.perf_counter()
    layer = memory.layer(name)
    if isinstance(layer, WarmingLayer):  # a glance: opened by the owner, not here (yet)
        coro.close()
        return None, LayerStatus(layer=name, status="warming", detail=layer.title)
    if isinstance(layer, FailedLayer):
        coro.close()
        return None, LayerStatus(layer=name, status="unavailable", detail=layer.reason)
    try:
        value = await memory.answer(name, kind, coro, None if budget_ms is None else budget_ms / 1000)
        status = LayerStatus(layer=name, status="ok")
    except LayerTimeout as exc:  # a first answer still loading (warming), or a warm layer stuck (timeout)
        value = None
        status = (LayerStatus(layer=name, status="warming", detail=_title(layer, name)) if exc.warming else
                  LayerStatus(layer=name, status="timeout", detail=str(exc)))
    except Exception as exc:
        value, status = None, LayerStatus(layer=name, status="error", detail=f"{type(exc).__name__}: {exc}")
    status.latency_ms = round((time.perf_counter() - started) * 1000, 2)
    return value, status


# -- startup -----------------------------------------------------------------------------------


def startup_sections(memory: Memory) -> list[SectionConfig]:
    """The sections of the startup package: ``[startup] sections`` if given, else every loaded layer's
    defaults by position; then ``add``, less ``omit`` (section or layer names). Unloaded layers are skipped."""
    st = memory.settings.startup
    if st.sections is not None:
        sections = list(st.sections)
    else:
        defaults = [sec for layer in memory.layers.values() for sec in layer.default_sections()]
        sections = sorted(defaults, key=lambda sec: sec.position)  # stable: plugin order among equals
    sections += st.add
    omit = set(st.omit)
    return [sec for sec in sections if memory.layer(sec.layer) is not None
            and sec.name not in omit and sec.layer not in omit]


Blocks = tuple[list[Block], list[LayerStatus], list[dict[str, Any]], dict[str, str]]


def _channels(items: Sequence[SectionItem]) -> list[str]:
    """Every channel the items name (a turn's, a summary's), for the package's short channel labels."""
    return [c for r in items for c in r.channels]


async def _startup_blocks(memory: Memory, p: AmbientRecallParams, seen: list[str]) -> Blocks:
    sections = startup_sections(memory)

    async def one(sec: SectionConfig) -> tuple[StartupItems | None, LayerStatus]:
        layer = memory.require_layer(sec.layer)
        count = None if sec.quotas else sec.count  # quotas choose among all, below
        return await _guarded(memory, sec.layer, "startup", layer.startup(count))

    outcomes = await asyncio.gather(*(one(s) for s in sections))
    blocks: list[Block] = []
    statuses: list[LayerStatus] = []
    results: list[dict[str, Any]] = []
    labels = render.channel_labels(seen + [c for items, _s in outcomes if items for c in _channels(items.items)])
    for sec, (items, status) in zip(sections, outcomes, strict=True):
        statuses.append(status)
        if items is None:
            continue
        assert isinstance(items, StartupItems)
        status.count = len(items.items)
        block = _section_block(memory, sec, items, labels)
        blocks.append(block)
    return blocks, statuses, results, labels


def _section_block(memory: Memory, sec: SectionConfig, found: StartupItems, labels: dict[str, str]) -> Block:
    items = list(found.items)
    total = found.total if found.total is not None else len(items)
    keep = None
    if sec.style == "turns":
        keep = _quota_order(items, sec.quotas) if sec.quotas else list(reversed(range(len(items))))
        if sec.count is not None and sec.count < len(items):
            chosen = sorted(keep[:sec.count])
            items = [items[i] for i in chosen]
            keep = [chosen.index(i) for i in keep[:sec.count]]
    if sec.order == "newest_first":
        items.reverse()
    days = None
    if sec.style == "turns":
        lines, counts, days = render.turn_lines(items, memory.tz, sec.max_chars, labels=labels)
        rendered = list(zip(lines, counts, strict=True))
    elif sec.style == "summaries":
        rendered = [render.summary_item(r, memory.tz, sec.max_chars, labels=labels) for r in items]
    else:
        rendered = [render.document_item(r, sec.max_chars) for r in items]
    if sec.style == "turns":
        header, joiner = "[unsummarized_turns]", "\n"
    elif sec.style == "summaries":
        header, joiner = "[summaries] (compressed history)", "\n\n"
    else:
        header, joiner = None, SEPARATOR
    return Block(name=sec.name, layer=sec.layer, header=header, items=[t for t, _ in rendered],
                 chars=[c for _, c in rendered], joiner=joiner, total=total, style=sec.style, keep=keep,
                 quotas=bool(sec.quotas), section=sec, source=memory.layer(sec.layer), more=found.more, days=days,
                 data=[item_json(r) for r in items])  # a TurnItem's JSON without a model per turn


def _channel_group(channel: str, quotas: dict[str, int]) -> str:
    best = "*"
    for prefix in quotas:
        if prefix != "*" and channel.startswith(prefix) and (best == "*" or len(prefix) > len(best)):
            best = prefix
    return best


def _quota_order(items: list[SectionItem], quotas: dict[str, int]) -> list[int]:
    """Indices by priority: each channel group's newest turns up to its quota, taken round-robin
    (so a budget cut stays fair), then everything else newest first."""
    groups: dict[str, list[int]] = {}
    for i in reversed(range(len(items))):
        groups.setdefault(_channel_group(items[i].channels[0] if items[i].channels else "", quotas), []).append(i)
    quota_lists = [g[: quotas.get(name, 0)] for name, g in groups.items()]
    order: list[int] = []
    for rank in range(max((len(q) for q in quota_lists), default=0)):
        order.extend(q[rank] for q in quota_lists if rank < len(q))
    taken = set(order)
    order.extend(i for i in reversed(range(len(items))) if i not in taken)
    return order


# -- search ------------------------------------------------------------------------------------


#: Results per layer of a search that names no ``limit_per_layer``: the original five without a budget; with one,
#: as many as a budget of this many characters each could show (a turn line is 100-300 characters), at most
#: LIMIT_CAP. The budget then keeps the best of them in fused order: a 2,000-character answer is no longer five
#: turns and 700 unused characters, nor a 4,000-character one the same five (issue 40; bench/locomo.py).
DEFAULT_PER_LAYER = 5
CHARS_PER_RESULT = 150
LIMIT_CAP = 20


def per_layer(budget: int | None) -> int:
    if budget is None:
        return DEFAULT_PER_LAYER
    return max(DEFAULT_PER_LAYER, min(LIMIT_CAP, budget // CHARS_PER_RESULT))


async def _search_blocks(memory: Memory, p: AmbientRecallParams, seen: list[str], budget: int | None) -> Blocks:
    names = memory.settings.recall.layers or list(memory.layers)
    names = [n for n in names if memory.layer(n) is not None]
    limit = p.limit_per_layer if p.limit_per_layer is not None else per_layer(budget)
    budgets = memory.settings.recall.layer_budget_ms
    # every layer searches at once (each waits on its own store or model off the event loop), each within its budget
    outcomes = await asyncio.gather(
        *(_guarded(memory, n, "search", memory.search_layer(n, p.context, limit), budgets.get(n)) for n in names))
    fused: list[tuple[float, int, SearchResult]] = []
    statuses: list[LayerStatus] = []
    floors = {**memory.settings.recall.min_score, **(p.min_score or {})}
    for order, (name, (found, status)) in enumerate(zip(names, outcomes, strict=True)):
        statuses.append(status)
        layer = memory.layer(name)
        if found and name in floors:  # configured floor
            found = [r for r in found if r.score >= floors[name]]
        elif found and layer is not None:  # the layer's own judgement: a semantic nearest neighbour is not always a match
            found = [r for r in found if layer.relevant(r)]
        for rank, r in enumerate((found or [])[:limit]):
            fused.append((1.0 / (RRF_K + rank + 1), order, r))
        status.count = len(found or [])
    fused.sort(key=lambda t: (-t[0], t[1]))
    hidden = set(memory.settings.recall.skip_in_text)
    results: list[dict[str, Any]] = []
    item_layers: list[str] = []
    # One block, in fused order, so the ranking stays visible in the text; the manifest counts per layer.
    merged = Block(name="Results", layer="*", header=None, items=[], chars=[], item_layers=item_layers,
                   titles={n: _title(memory.layer(n), n) for n in names}, data=[],
                   more=Pointer(operation="ambient_recall", params={"context": p.context, "budget": 0}))
    labels = render.channel_labels(seen + _channels([r for _s, _o, r in fused]))
    for score, _order, r in fused:
        item = r.model_dump(mode="json")  # one score: the layer's; how it was made only when asked
        if p.explain:
            item["fused_score"] = round(score, 6)
            item["signals"] = r.signals
            item.setdefault("metadata", {}).setdefault("layer_score", r.score)
        if r.layer in hidden:
            results.append(item)
            continue
        text, chars = _search_item(memory, r, labels)
        merged.items.append(text)
        merged.chars.append(chars)
        assert merged.data is not None
        merged.data.append(item)
        item_layers.append(r.layer)
    return [merged], statuses, results, labels


def _title(layer: Layer | None, name: str) -> str:
    return (layer.title if layer is not None else "") or name


def _search_item(memory: Memory, r: SearchResult, labels: dict[str, str]) -> tuple[str, int]:
    if r.kind == "turn":
        line, chars = render.turn_item(r, memory.tz, TURN_CHARS, labels=labels)
        return f"[{r.layer}] (turn {r.source})\n{line}", chars
    if r.kind == "summary":
        line, chars = render.summary_item(r, memory.tz, 500, labels=labels)
        return f"[{r.layer}]\n{line}", chars
    return render.document_item(r, TURN_CHARS)


async def _unread_items(memory: Memory, p: AmbientRecallParams) -> tuple[str, StartupItems] | None:
    """Unread turns from other channels, from the first layer that is an :class:`UnreadSource`."""
    assert p.consumer_key is not None
    for source in memory.find(UnreadSource):
        name = source.name  # type: ignore[attr-defined]
        found, _status = await _guarded(memory, name, "unread", source.unread_for_recall(p.consumer_key, p.channel))
        return (name, found) if found else None
    return None


def _unread_block(memory: Memory, name: str, items: StartupItems, labels: dict[str, str]) -> Block:
    rendered = [render.turn_item(r, memory.tz, TURN_CHARS, labels=labels, with_day=False) for r in items.items]
    total = items.total if items.total is not None else len(rendered)
    header = f"[unread_from_other_channels] (showing newest {len(rendered)} of {total}"
    if items.older:  # the cursor has moved past all of them: this is the way back
        header += f" - older: {items.older.operation} {json.dumps(items.older.params)}"
    return Block(name="Unread", layer=name, header=header + ")", items=[t for t, _ in rendered],
                 chars=[c for _, c in rendered], joiner="\n", total=total, more=items.older or items.more,
                 days=[render.turn_day(r, memory.tz) for r in items.items])


@hookimpl
def pps_operations(memory: Memory) -> list[Operation]:
    return [Operation(
        name="ambient_recall", params=AmbientRecallParams, handler=ambient_recall, group="recall", essential=True,
        read_only=True, idempotent=True,
        description=(
            "Recall memory for the current moment. context='startup' returns the startup package "
            "(recency, no search): clock, memory health, manifest, and each layer's startup section (the newest "
            "crystals, word-photos and summaries, ALL unsummarized turns with the default plugins). Any other "
            "context searches every layer concurrently and returns fused, ranked results. The answer stays within a "
            "budget of characters (default from pps.toml; budget=0 for everything) and lists what was left out "
            "with the call that fetches it."))]
