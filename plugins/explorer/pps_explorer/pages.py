"""Reading pages: home, startup package, timeline and search, a moment, summaries, crystals, plots.

Each handler builds its page from the entity's operations and returns (template, values); a part whose
operation is not loaded or fails carries the reason instead of its data. Every list is one page of results.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from . import svg
from .web import Ctx

PAGE = 50
ARCHIVE_PAGE = 10
RECENT = 500  # the home page's 'last capture per channel' looks at this many newest turns


def pager(ctx: Ctx, offset: int, size: int, shown: int, total: int | None, path: str, **query: Any) -> dict:
    more = (offset + shown < total) if total is not None else shown >= size
    return {"offset": offset, "shown": shown, "total": total,
            "prev": ctx.url(path, **query, offset=max(0, offset - size) or None) if offset > 0 else None,
            "next": ctx.url(path, **query, offset=offset + size) if more else None}


async def home(ctx: Ctx):
    health, health_err = await ctx.part("pps_health")
    stats, _ = await ctx.part("summary_stats") if ctx.has("summary_stats") else (None, None)
    last: list[dict[str, Any]] = []
    newest, _ = await ctx.part("list_turns", {"newest_first": True, "limit": RECENT}) if ctx.has("list_turns") \
        else (None, None)
    seen: set[str] = set()
    for turn in (newest or {}).get("turns", []):  # the newest turn of each channel family among them
        if svg.family(turn["channel"]) not in seen:
            seen.add(svg.family(turn["channel"]))
            last.append({"channel": svg.family(turn["channel"]), "turn": turn})
    samples = ctx.recall_latencies()
    recall_ms = sorted(ms for _t, ms in samples)
    return "home.html", {"health": health, "health_err": health_err, "stats": stats, "last": last,
                         "recall": {"n": len(recall_ms), "median": recall_ms[len(recall_ms) // 2] if recall_ms else None,
                                    "worst": recall_ms[-1] if recall_ms else None}}


async def startup(ctx: Ctx):
    budget = ctx.int_arg("budget", 0, 0, 2_000_000)
    params: dict[str, Any] = {"context": "startup"}
    if budget:
        params["budget"] = max(200, budget)
    package, err = await ctx.part("ambient_recall", params)
    return "startup.html", {"package": package, "err": err, "budget": budget or ""}


async def _newest_day(ctx: Ctx) -> str:
    newest, _ = await ctx.part("list_turns", {"newest_first": True, "limit": 1})
    if newest and newest["turns"]:
        return newest["turns"][0]["local_time"][:10]
    from pps_core.timeutil import now_utc

    return now_utc().astimezone(ctx.memory.tz).date().isoformat()


async def timeline(ctx: Ctx):
    q, channel, author = ctx.arg("q"), ctx.arg("channel"), ctx.arg("author")
    offset = ctx.int_arg("offset", 0, 0, 100_000)
    values: dict[str, Any] = {"q": q, "channel": channel, "author": author, "day": "", "turns": None,
                              "results": None, "err": None, "page": None, "prev_day": None, "next_day": None}
    if q:
        found, err = await ctx.part("raw_search", {"query": q, "limit": 20, "offset": offset, "explain": True,
                                                   **({"channel": channel} if channel else {})})
        values.update(results=found["results"] if found else None, err=err)
        if found:
            values["page"] = pager(ctx, offset, 20, found["count"], None, "/timeline", q=q, channel=channel)
        return "timeline.html", values
    if not ctx.has("list_turns"):
        values["err"] = "not available: this entity does not load the operation list_turns (plugin sqlite or postgres)"
        return "timeline.html", values
    day = ctx.arg("day") or await _newest_day(ctx)
    try:
        d = date.fromisoformat(day)
    except ValueError:
        from pps_core.errors import InvalidParams

        raise InvalidParams(f"day: {day!r} is not a date (YYYY-MM-DD)", param="day") from None
    params = {"since": d.isoformat(), "until": (d + timedelta(days=1)).isoformat(), "limit": PAGE,
              "offset": offset, **({"channel": channel} if channel else {}), **({"author": author} if author else {})}
    page, err = await ctx.part("list_turns", params)
    values.update(day=d.isoformat(), err=err, turns=page["turns"] if page else None,
                  prev_day=ctx.url("/timeline", day=(d - timedelta(days=1)).isoformat(), channel=channel, author=author),
                  next_day=ctx.url("/timeline", day=(d + timedelta(days=1)).isoformat(), channel=channel, author=author))
    if page:
        values["page"] = pager(ctx, offset, PAGE, len(page["turns"]), page["total"], "/timeline", day=d.isoformat(),
                                channel=channel, author=author)
    return "timeline.html", values


async def around(ctx: Ctx):
    ts, centre = ctx.arg("ts"), ctx.int_arg("id", 0)
    if not ts:
        from pps_core.errors import InvalidParams

        raise InvalidParams("ts: give a moment (ISO 8601) to look around", param="ts")
    from pps_core.timeutil import parse_timestamp, to_storage

    moment = to_storage(parse_timestamp(ts, ctx.memory.tz, "ts"))  # naive input is in the entity's zone
    found, err = await ctx.part("get_turns_around", {"timestamp": ts, "count": 40})
    return "around.html", {"ts": moment, "centre": centre, "turns": found["messages"] if found else None, "err": err}


async def summaries(ctx: Ctx):
    q, offset = ctx.arg("q"), ctx.int_arg("offset", 0, 0, 1_000_000)
    if q:
        found, err = await ctx.part("search_summaries", {"query": q, "limit": 20, "offset": offset})
        items = found["results"] if found else None
        page = pager(ctx, offset, 20, len(items or []), None, "/summaries", q=q) if found else None
    else:
        stats, _ = await ctx.part("summary_stats")
        found, err = await ctx.part("get_recent_summaries", {"limit": 20, "offset": offset})
        items = found["summaries"] if found else None
        total = stats.get("summary_count") if stats else None
        page = pager(ctx, offset, 20, len(items or []), total, "/summaries") if found else None
    return "summaries.html", {"q": q, "items": items, "err": err, "page": page}


async def crystals(ctx: Ctx):
    listing, err = await ctx.part("crystal_list")
    n_current = len(listing["current"]) if listing else 4
    archived = len(listing["archived"]) if listing else 0
    offset = ctx.int_arg("offset", 0, 0, 1_000_000)
    # get_crystals(count) is the newest `count`, reaching into the archive: read only what this page shows
    found, err2 = await ctx.part("get_crystals", {"count": min(n_current + offset + ARCHIVE_PAGE,
                                                                n_current + archived)})
    newest_first = list(reversed(found["crystals"])) if found else []
    shown = newest_first[n_current + offset:n_current + offset + ARCHIVE_PAGE]
    return "crystals.html", {"current": list(reversed(newest_first[:n_current])) if found else None,
                             "err": err or err2, "archived": shown, "window": (listing or {}).get("window"),
                             "page": pager(ctx, offset, ARCHIVE_PAGE, len(shown), archived, "/crystals")}


async def plots(ctx: Ctx):
    days, until = ctx.int_arg("days", 30, 7, 366), ctx.arg("until")
    params: dict[str, Any] = {"days": days}
    if until:
        try:
            params["until"] = f"{date.fromisoformat(until).isoformat()}T12:00:00"
        except ValueError:
            from pps_core.errors import InvalidParams

            raise InvalidParams(f"until: {until!r} is not a date (YYYY-MM-DD)", param="until") from None
    activity, err = await ctx.part("turn_activity", params)
    values: dict[str, Any] = {"days": days, "until": until, "err": err, "turns_svg": None, "legend": [],
                              "backlog_svg": None, "span": activity and f"{activity['first']} – {activity['last']}"}
    if activity:
        values["turns_svg"], values["legend"] = svg.turns_per_day(activity)
        values["backlog_svg"] = svg.backlog(activity)
    samples = ctx.recall_latencies()
    values["latency_svg"] = svg.latencies(samples) if samples else None
    values["samples"] = len(samples)
    return "plots.html", values


def routes() -> list[tuple[str, Any, list[str]]]:
    from . import tend

    return [("/startup", startup, ["GET"]), ("/timeline", timeline, ["GET"]), ("/around", around, ["GET"]),
            ("/summaries", summaries, ["GET"]), ("/crystals", crystals, ["GET"]), ("/plots", plots, ["GET"]),
            *tend.ROUTES]
