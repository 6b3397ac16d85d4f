"""The budget of ambient_recall: how many items of each block fit, the manifest that says what was shown and
what was left out, and the exact call that fetches the rest (each layer's ``left_out_call``)."""

from __future__ import annotations

import json
from typing import Any

from .. import render
from ..models import LayerStatus, Pointer
from ..render import SEPARATOR, Block


def assemble(header: list[str], blocks: list[Block], statuses: list[LayerStatus], budget: int | None,
              with_manifest: bool) -> tuple[str, list[int], list[dict[str, Any]], list[int]]:
    """(text, items shown per block, what was left out, characters each block emitted)."""
    problems = [f"{s.layer}: {s.status} ({s.detail})" for s in statuses if s.status not in ("ok", "warming")]
    problem_lines = [f"Unavailable: {p}" for p in problems]
    warming = list(dict.fromkeys(s.detail or s.layer for s in statuses if s.status == "warming"))
    if warming:  # a cold start (a glance, a model still loading): say plainly what this answer is missing
        problem_lines.insert(0, f"Partial: {', '.join(warming)} still warming up (loading; they answer a later "
                                "call); this answer is from the layers that are ready")
    shown = [len(b.items) for b in blocks]

    def compose(counts: list[int], left: list[dict[str, Any]]) -> str:
        return _compose(header, blocks, counts, left, problem_lines, with_manifest)[0]

    full, emitted = _compose(header, blocks, shown, [], problem_lines, with_manifest)
    if budget is None or len(full) <= budget:
        return full, shown, [], emitted

    counts = [0] * len(blocks)
    left = [x for x in (_left_out(b, 0) for b in blocks) if x]

    def fits(trial: list[int]) -> tuple[bool, list[dict[str, Any]]]:
        trial_left = [x for x in (_left_out(bb, trial[j]) for j, bb in enumerate(blocks)) if x]
        return len(compose(trial, trial_left)) <= budget, trial_left

    for i, b in enumerate(blocks):  # in section order, as many items as fit (binary search)
        lo, hi = 0, len(b.items)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            trial = counts.copy()
            trial[i] = mid
            if fits(trial)[0]:
                lo = mid
            else:
                hi = mid - 1
        counts[i] = lo
        left = fits(counts)[1]
    text, emitted = _compose(header, blocks, counts, left, problem_lines, with_manifest)
    if len(text) > budget:  # even the header does not fit: keep its start, say so
        text = text[: max(0, budget - 40)].rstrip() + "\n[... cut to the budget]"
    return text, counts, left, emitted


def _compose(header: list[str], blocks: list[Block], counts: list[int], left: list[dict[str, Any]],
             problem_lines: list[str], with_manifest: bool) -> tuple[str, list[int]]:
    """The package with ``counts`` items of each block, and the characters each block emitted.

    The manifest's figures are characters emitted: a section's whole text (its header line, day lines and turn
    prefixes included; in a fused search, each layer's items), and TOTAL every character of the package, the
    manifest's own included (found as a fixed point: the figure's digits are part of what it counts)."""
    body = [_block_text(b, n) for b, n in zip(blocks, counts, strict=True)]
    emitted = []
    rows: list[tuple[str, int, int]] = []
    for b, n, text in zip(blocks, counts, body, strict=True):
        if b.item_layers is not None:
            per: dict[str, list[int]] = {}
            for i in b.chosen(n):
                per.setdefault(b.item_layers[i], []).append(len(b.items[i]))
            rows += [((b.titles or {}).get(name, name), sum(sizes), len(sizes)) for name, sizes in per.items()]
            emitted.append(sum(sum(sizes) for sizes in per.values()))
        else:
            rows.append((b.name, len(text), len(b.chosen(n))))
            emitted.append(len(text))
    lines = list(problem_lines)
    for item in left:
        lines.append(f"Left out: {item['section']} {item['left_out']} of {item['total']} items"
                     f" - call {item['operation']} {json.dumps(item['params'])}")
    joined = SEPARATOR.join(t for t in body if t)

    def package(total: int) -> str:
        parts = ["\n\n".join(header)] if header else []
        if with_manifest:
            parts.append(render.manifest(rows, lines, total))
        text = "\n\n".join(parts)
        return (text + "\n\n" if text and joined else text) + joined

    total = 0
    text = package(total)
    for _ in range(6):  # converges in two or three rounds (only the figure's digits move)
        if len(text) == total:
            break
        total = len(text)
        text = package(total)
    return text, emitted


def _block_text(b: Block, n: int) -> str:
    if n <= 0:
        return ""
    if b.style == "turns":
        total = b.total if b.total is not None else len(b.items)
        header = f"[unsummarized_turns] (showing {min(n, len(b.items))} of {total}"
        pointer = _pointer(b, n)
        if total > n and pointer is not None:
            more = f"use {pointer.operation} to page through all" if b.quotas or "offset" not in pointer.params \
                else f"use {pointer.operation} with offset={n} for older"
            header += f" - {more})"
        else:
            header += ")"
        return b.text(n, header=header)
    return b.text(n)


def _pointer(b: Block, n: int) -> Pointer | None:
    """The layer's own call for what is not shown, else what the section was handed (``more``)."""
    if b.source is not None and b.section is not None:
        found = b.source.left_out_call(b.section, n, len(b.items))
        if found is not None:
            return found
    return b.more


def _left_out(b: Block, n: int) -> dict[str, Any] | None:
    missing = len(b.items) - n
    if missing <= 0:
        return None
    pointer = _pointer(b, n) or Pointer(operation="ambient_recall", params={"context": "startup"})
    return {"section": b.name, "layer": b.layer, "shown": n, "left_out": missing, "total": len(b.items),
            "operation": pointer.operation, "params": pointer.params}
