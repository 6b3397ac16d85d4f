"""Plots and the graph drawn on the server as inline SVG: no chart library, no script, every label escaped.

Colours are CSS classes (the Content-Security-Policy allows no inline style); sizes are attributes.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

from markupsafe import Markup, escape

W, H, PAD_L, PAD_B, PAD_T = 720, 230, 52, 28, 26
SERIES = 6  # channel families drawn; the rest are 'other'


def _e(v: Any) -> str:
    return str(escape(str(v)))


def _nice(top: float) -> float:
    if top <= 0:
        return 1
    step = 10 ** math.floor(math.log10(top))
    for m in (1, 2, 5, 10):
        if top <= m * step:
            return m * step
    return 10 * step


def _axes(top: float, days: list[str], unit: str) -> list[str]:
    out = [f'<line class="axis" x1="{PAD_L}" y1="{H - PAD_B}" x2="{W}" y2="{H - PAD_B}"/>']
    for frac in (0, 0.5, 1):
        y = H - PAD_B - frac * (H - PAD_B - PAD_T)
        out.append(f'<line class="grid" x1="{PAD_L}" y1="{y:.1f}" x2="{W}" y2="{y:.1f}"/>')
        label = f"{top * frac:g}"
        out.append(f'<text class="tick" x="{PAD_L - 4}" y="{y + 4:.1f}" text-anchor="end">{_e(label)}</text>')
    if days:  # first, middle and last day; the ends anchored inside the plot so no label is cut off
        n = len(days)
        for i in sorted({0, n // 2, n - 1}):
            x, anchor = PAD_L + (i + 0.5) * (W - PAD_L) / n, "middle"
            if i == 0 and n > 1:
                x, anchor = PAD_L + 2, "start"
            elif i == n - 1 and n > 1:
                x, anchor = W - 2, "end"
            out.append(f'<text class="tick" x="{x:.1f}" y="{H - 8}" text-anchor="{anchor}">{_e(days[i][5:])}</text>')
    out.append(f'<text class="tick" x="4" y="12">{_e(unit)}</text>')
    return out


def family(channel: str) -> str:
    return channel.split(":", 1)[0]


def turns_per_day(activity: dict[str, Any]) -> tuple[Markup, list[tuple[str, int, int]]]:
    """Stacked bars: turns per day per channel family. Returns (svg, legend [(name, total, colour index)])."""
    days = activity["days"]
    totals: dict[str, int] = {}
    for name, n in activity["channels"].items():
        totals[family(name)] = totals.get(family(name), 0) + n
    shown = [n for n, _ in sorted(totals.items(), key=lambda kv: -kv[1])][:SERIES]
    legend = [(n, totals[n], i) for i, n in enumerate(shown)]
    if len(totals) > SERIES:
        legend.append(("other", sum(v for k, v in totals.items() if k not in shown), SERIES))
    top = _nice(max((d["total"] for d in days), default=0))
    bar_w = (W - PAD_L) / max(1, len(days))
    parts = _axes(top, [d["date"] for d in days], "turns")
    for i, day in enumerate(days):
        stack: dict[int, int] = {}
        for name, n in day["turns"].items():
            f = family(name)
            idx = shown.index(f) if f in shown else SERIES
            stack[idx] = stack.get(idx, 0) + n
        y = H - PAD_B
        for idx in sorted(stack):
            h = stack[idx] / top * (H - PAD_B - PAD_T)
            y -= h
            label = legend[idx][0] if idx < len(legend) else "other"
            parts.append(f'<rect class="s{idx}" x="{PAD_L + i * bar_w + 1:.1f}" y="{y:.1f}" '
                         f'width="{max(1.0, bar_w - 2):.1f}" height="{h:.1f}"><title>{_e(day["date"])}: '
                         f'{stack[idx]} {_e(label)}</title></rect>')
    return _svg(parts, "Turns per day per channel"), legend


def backlog(activity: dict[str, Any]) -> Markup:
    days = activity["days"]
    top = _nice(max((d["backlog"] for d in days), default=0))
    step = (W - PAD_L) / max(1, len(days))
    pts = [(PAD_L + (i + 0.5) * step, H - PAD_B - d["backlog"] / top * (H - PAD_B - PAD_T)) for i, d in enumerate(days)]
    parts = _axes(top, [d["date"] for d in days], "unsummarized")
    if pts:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        parts.append(f'<polyline class="line" points="{path}"/>')
        for (x, y), d in zip(pts, days, strict=True):
            parts.append(f'<circle class="dot" cx="{x:.1f}" cy="{y:.1f}" r="2.5"><title>{_e(d["date"])}: '
                         f'{d["backlog"]} unsummarized</title></circle>')
    return _svg(parts, "Unsummarized backlog at the end of each day")


def latencies(samples: list[tuple[str, float]]) -> Markup:
    """One dot per ambient_recall call (oldest left), its latency in ms."""
    top = _nice(max((ms for _t, ms in samples), default=0))
    step = (W - PAD_L) / max(1, len(samples))
    parts = _axes(top, [], "ms")
    for i, (when, ms) in enumerate(samples):
        x, y = PAD_L + (i + 0.5) * step, H - PAD_B - ms / top * (H - PAD_B - PAD_T)
        parts.append(f'<circle class="dot" cx="{x:.1f}" cy="{y:.1f}" r="3"><title>{_e(when)}: {ms:.1f} ms'
                     '</title></circle>')
    return _svg(parts, "ambient_recall latency per call")


def _svg(parts: list[str], title: str) -> Markup:
    return Markup(f'<svg class="plot" viewBox="0 0 {W} {H}" role="img" aria-label="{_e(title)}">'
                  f'<title>{_e(title)}</title>{"".join(parts)}</svg>')


def graph(explored: dict[str, Any], link: str) -> Markup:
    """The neighbourhood of one entity: it in the centre, each hop on a ring; a node links to its own view."""
    gw, gh = 760, 480
    cx, cy = gw / 2, gh / 2
    r1, r2 = 120, 215
    by_dist: dict[int, list[dict[str, Any]]] = {}
    for ent in explored["entities"]:
        by_dist.setdefault(min(ent["distance"], 2), []).append(ent)
    uuid_of = {e["name"]: e["uuid"] for e in explored["entities"]}
    near: dict[str, set[str]] = {}
    for fact in explored["facts"]:
        a, b = uuid_of.get(fact["subject"]), uuid_of.get(fact["object"])
        if a and b:
            near.setdefault(a, set()).add(b)
            near.setdefault(b, set()).add(a)
    pos: dict[str, tuple[float, float]] = {}
    angle: dict[str, float] = {}
    for ent in by_dist.get(0, []):
        pos[ent["uuid"]] = (cx, cy)
    ring1 = by_dist.get(1, [])
    width = 2 * math.pi / max(1, len(ring1))
    for i, ent in enumerate(ring1):  # the first ring evenly, starting off the horizontal
        angle[ent["uuid"]] = a = -math.pi / 2 + width * i + 0.6
        pos[ent["uuid"]] = (cx + r1 * math.cos(a), cy + r1 * math.sin(a) * 0.85)
    children: dict[str, list[str]] = {}
    for ent in by_dist.get(2, []):  # each outer entity near the inner one it hangs from
        parent = next((u for u in near.get(ent["uuid"], ()) if u in angle), None)
        children.setdefault(parent or "", []).append(ent["uuid"])
    for parent, kids in children.items():
        base, span = (angle[parent], width * 0.8) if parent else (0.0, 2 * math.pi)
        for j, uuid in enumerate(kids):
            a = base - span / 2 + span * (j + 0.5) / len(kids)
            pos[uuid] = (cx + r2 * math.cos(a), cy + r2 * math.sin(a) * 0.85)
    parts = []
    for fact in explored["facts"]:
        a, b = pos.get(uuid_of.get(fact["subject"], "")), pos.get(uuid_of.get(fact["object"], ""))
        if not a or not b:
            continue
        cls = "edge expired" if fact.get("invalid_at") else "edge"
        when = f' (valid {fact["valid_at"] or "?"}' + (f' – {fact["invalid_at"]})' if fact.get("invalid_at") else ")")
        parts.append(f'<line class="{cls}" x1="{a[0]:.1f}" y1="{a[1]:.1f}" x2="{b[0]:.1f}" y2="{b[1]:.1f}">'
                     f'<title>{_e(fact["fact"])}{_e(when)}</title></line>')
        mx, my = (a[0] + b[0]) / 2, (a[1] + b[1]) / 2
        parts.append(f'<text class="edge-label" x="{mx:.1f}" y="{my:.1f}" text-anchor="middle">'
                     f'{_e(fact["predicate"][:24])}</text>')
    for ent in explored["entities"]:
        if ent["uuid"] not in pos:
            continue
        x, y = pos[ent["uuid"]]
        cls = "node focal" if ent["distance"] == 0 else f"node d{min(ent['distance'], 2)}"
        href = f"{link}{quote(ent['name'], safe='')}"
        parts.append(f'<a href="{_e(href)}"><circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="{14 if ent["distance"] == 0 else 9}">'
                     f'<title>{_e(ent["name"])}</title></circle><text class="node-label" x="{x:.1f}" y="{y - 14:.1f}" '
                     f'text-anchor="middle">{_e(ent["name"][:32])}</text></a>')
    return Markup(f'<svg class="graph" viewBox="0 0 {gw} {gh}" role="img" aria-label="knowledge graph">'
                  f'{"".join(parts)}</svg>')
