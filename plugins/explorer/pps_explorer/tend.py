"""Tending pages: word-photos (read, edit, new, delete), the graph (explore, search, delete a fact), forgetting.

Every write is a POST carrying the session's CSRF token (checked before the handler runs) and goes through
an operation, which validates it and writes atomically; the answer is a redirect (post/redirect/get).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.responses import RedirectResponse

from pps_core.contracts import FocalGraph
from pps_core.errors import InvalidParams, NotFound, PPSError

from . import svg
from .pages import PAGE, pager
from .web import Ctx

#: Operations that forget turns, in order of preference, and the parameter that takes their ids.
FORGET_OPS = ("forget_turns",)
ID_PARAMS = ("ids", "message_ids", "turn_ids")


def _see(ctx: Ctx, path: str, **query: Any) -> RedirectResponse:
    return RedirectResponse(ctx.url(path, **query), status_code=303)


async def _form(ctx: Ctx) -> dict[str, Any]:
    form = await ctx.request.form()
    return {k: form.getlist(k) if k == "id" else str(v) for k, v in form.multi_items()}


# -- word-photos ----------------------------------------------------------------------------------


async def photos(ctx: Ctx):
    q, offset = ctx.arg("q"), ctx.int_arg("offset", 0, 0, 100_000)
    if q:
        found, err = await ctx.part("anchor_search", {"query": q, "limit": 20, "offset": offset})
        items = [{"filename": r["source"], "title": r["metadata"].get("title"), "date": r["timestamp"],
                  "score": r["score"], "content": r["content"]} for r in found["results"]] if found else None
        page = pager(ctx, offset, 20, len(items or []), None, "/photos", q=q) if found else None
    else:
        found, err = await ctx.part("anchor_list", {"limit": PAGE, "offset": offset})
        items = found["word_photos"] if found else None
        page = pager(ctx, offset, PAGE, len(items or []), found["total"], "/photos") if found else None
    return "photos.html", {"q": q, "items": items, "err": err, "page": page,
                           "unreadable": (found or {}).get("unreadable", []), "can_write": ctx.has("anchor_save")}


async def photo(ctx: Ctx):
    name = ctx.request.path_params["name"]
    found, err = await ctx.part("anchor_get", {"filename": name})
    return "photo.html", {"photo": found, "err": err, "name": name,
                          "can_edit": ctx.has("anchor_edit"), "can_delete": ctx.has("anchor_delete")}


async def photo_edit(ctx: Ctx):
    name = ctx.request.path_params["name"]
    if ctx.request.method == "POST":
        form = await _form(ctx)
        tags = [t.strip() for t in form.get("tags", "").split(",") if t.strip()]
        out = await ctx.call("anchor_edit", {"filename": name, "content": form.get("content", ""),
                                             "title": form.get("title") or None, "tags": tags,
                                             "location": form.get("location", "")})
        return _see(ctx, f"/photos/{quote(out['edited'], safe='')}")
    found, err = await ctx.part("anchor_get", {"filename": name})
    return "photo_form.html", {"photo": found, "err": err, "name": name, "action": "edit"}


async def photo_new(ctx: Ctx):
    if ctx.request.method == "POST":
        form = await _form(ctx)
        tags = [t.strip() for t in form.get("tags", "").split(",") if t.strip()]
        out = await ctx.call("anchor_save", {"title": form.get("title", ""), "content": form.get("content", ""),
                                             "tags": tags, "location": form.get("location") or None})
        return _see(ctx, f"/photos/{quote(out['saved'], safe='')}")
    err = None if ctx.has("anchor_save") else "not available: this entity does not load the operation anchor_save"
    return "photo_form.html", {"photo": None, "err": err, "name": "", "action": "new"}


async def photo_delete(ctx: Ctx):
    await ctx.call("anchor_delete", {"filename": ctx.request.path_params["name"]})
    return _see(ctx, "/photos")


# -- graph --------------------------------------------------------------------------------------


#: Entities listed beside the graph (the most connected first).
ENTITIES = 30


def _focal(memory) -> str:
    """The graph's focal entity, as the entity's graph layer has it (:class:`pps_core.contracts.FocalGraph`, e.g.
    ``[graphiti] focal_entity``), else the entity's name (no graph layer: the graph pages say so)."""
    graphs = memory.find(FocalGraph)
    return graphs[0].focal_name if graphs else memory.settings.entity


async def graph(ctx: Ctx):
    focal = _focal(ctx.memory)
    depth = ctx.int_arg("depth", 1, 1, 2)
    q, offset = ctx.arg("q"), ctx.int_arg("offset", 0, 0, 10_000)
    listed, _ = await ctx.part("texture_entities", {"limit": ENTITIES}) if ctx.has("texture_entities") \
        else (None, None)
    entities = (listed or {}).get("entities") or []
    # no entity asked for: the most connected one (the focal entity may not be in the graph at all)
    top = [e["name"] for e in entities if e["facts"] == entities[0]["facts"]] if entities else [focal]
    name = ctx.arg("entity") or (focal if focal in top else top[0])  # among equals, the focal entity
    values: dict[str, Any] = {"name": name, "focal": focal, "depth": depth, "q": q, "explored": None,
                              "drawing": None, "err": None, "facts": None, "page": None, "search_err": None,
                              "entities": entities, "entity_total": (listed or {}).get("total")}
    if not q and ctx.has("texture_explore"):  # a search shows facts; each entity links to its neighbourhood
        try:
            explored = await ctx.call("texture_explore", {"entity_name": name, "depth": depth, "limit": 60})
            values.update(explored=explored, drawing=svg.graph(explored, ctx.url("/graph", depth=depth) + "&entity="))
        except NotFound:
            values["err"] = (f"no entity named {name!r} in the graph yet" if entities or ctx.arg("entity")
                             else "the graph is empty: facts appear here once turns are ingested or triplets added")
        except PPSError as exc:  # an unavailable graph says why; the rest of the page stands
            values["err"] = exc.message
    elif not q:
        values["err"] = "not available: this entity does not load the operation texture_explore (plugin graphiti)"
    if q:
        found, err = await ctx.part("texture_search", {"query": q, "limit": 20, "offset": offset, "node_limit": 0})
        values["search_err"] = err
        if found:
            values["facts"] = [r for r in found["results"] if r["metadata"].get("kind") == "edge"]
            values["page"] = pager(ctx, offset, 20, found["edges"], None, "/graph", entity=name, q=q)
    values["can_delete"] = ctx.has("texture_delete")
    return "graph.html", values


async def fact_delete(ctx: Ctx):
    form = await _form(ctx)
    await ctx.call("texture_delete", {"uuid": ctx.request.path_params["uuid"]})
    back = form.get("back", "")
    if back.startswith(ctx.base + "/graph"):
        return RedirectResponse(back, status_code=303)
    return _see(ctx, "/graph")


# -- forgetting ---------------------------------------------------------------------------------


def _forget_op(ctx: Ctx) -> tuple[str | None, str | None]:
    for name in FORGET_OPS:
        op = ctx.memory.catalog.get(name)
        if op is not None:
            fields = getattr(op.params, "model_fields", {})
            return name, next((p for p in ID_PARAMS if p in fields), None)
    return None, None


SEARCH_OP = "forget_search"
WHO = "the memory explorer (web UI)"  # for the forget log; never the content


async def forget(ctx: Ctx):
    op, param = _forget_op(ctx)
    values: dict[str, Any] = {"op": op, "param": param, "turns": None, "err": None, "page": None,
                              "day": ctx.arg("day"), "channel": ctx.arg("channel"), "author": ctx.arg("author"),
                              "q": ctx.arg("q"), "can_search": ctx.has(SEARCH_OP), "found": None}
    if values["q"]:  # the first step of forget_search: the matches and a token; nothing is deleted
        params = {"query": values["q"], "limit": 50, "requested_by": WHO,
                  **({"channel": values["channel"]} if values["channel"] else {})}
        found, err = await ctx.part(SEARCH_OP, params)
        values.update(found=found, err=err)
        return "forget.html", values
    if op is None:
        values["err"] = ("not available: forgetting needs an operation such as forget_turns, which this entity "
                         "does not load")
        return "forget.html", values
    if param is None:
        values["err"] = f"{op} is loaded, but its parameters are not ones this explorer knows ({', '.join(ID_PARAMS)})"
        return "forget.html", values
    offset = ctx.int_arg("offset", 0, 0, 1_000_000)
    params: dict[str, Any] = {"limit": PAGE, "offset": offset, "newest_first": True}
    for key in ("channel", "author"):
        if values[key]:
            params[key] = values[key]
    if values["day"]:
        from datetime import date, timedelta

        try:
            d = date.fromisoformat(values["day"])
        except ValueError:
            raise InvalidParams("day: not a date (YYYY-MM-DD)", param="day") from None
        params.update(since=d.isoformat(), until=(d + timedelta(days=1)).isoformat())
    page, err = await ctx.part("list_turns", params)
    values.update(turns=page["turns"] if page else None, err=err)
    if page:
        values["page"] = pager(ctx, offset, PAGE, len(page["turns"]), page["total"], "/forget",
                                day=values["day"], channel=values["channel"], author=values["author"])
    return "forget.html", values


def _ids(form: dict[str, Any]) -> list[int]:
    raw = form.get("id") or []
    try:
        ids = sorted({int(i) for i in raw})
    except ValueError:
        raise InvalidParams("id: turn ids are whole numbers", param="id") from None
    if not ids:
        raise InvalidParams("id: select at least one turn to forget", param="id")
    if len(ids) > 1000:
        raise InvalidParams("id: at most 1000 turns at a time", param="id")
    return ids


async def forget_confirm(ctx: Ctx):
    form = await _form(ctx)
    if form.get("confirm"):  # the matches of a search: forget_search forgets exactly what it listed
        ids = _ids(form)
        shown, _ = await ctx.part("list_turns", {"ids": ids, "limit": 500})
        return "forget_confirm.html", {"op": SEARCH_OP, "ids": ids, "turns": (shown or {}).get("turns"),
                                       "q": form.get("q", ""), "confirm": form["confirm"]}
    op, param = _forget_op(ctx)
    if op is None or param is None:
        return await forget(ctx)
    ids = _ids(form)
    shown, _ = await ctx.part("list_turns", {"ids": ids, "limit": 500})  # what exactly will be forgotten
    return "forget_confirm.html", {"op": op, "ids": ids, "turns": (shown or {}).get("turns")}


async def forget_do(ctx: Ctx):
    form = await _form(ctx)
    if form.get("confirm"):
        result = await ctx.call(SEARCH_OP, {"query": form.get("q", ""), "confirm": form["confirm"],
                                            "requested_by": WHO})
        return "forget_done.html", {"op": SEARCH_OP, "result": result, "ids": result.get("forgotten", [])}
    op, param = _forget_op(ctx)
    if op is None or param is None:
        return await forget(ctx)
    ids = _ids(form)
    params: dict[str, Any] = {param: ids}
    if "requested_by" in getattr(ctx.memory.catalog.get(op).params, "model_fields", {}):
        params["requested_by"] = WHO
    result = await ctx.call(op, params)
    return "forget_done.html", {"op": op, "ids": ids, "result": result}


ROUTES = [
    ("/photos", photos, ["GET"]), ("/photos/new", photo_new, ["GET", "POST"]),
    ("/photos/{name}", photo, ["GET"]), ("/photos/{name}/edit", photo_edit, ["GET", "POST"]),
    ("/photos/{name}/delete", photo_delete, ["POST"]),
    ("/graph", graph, ["GET"]), ("/graph/facts/{uuid}/delete", fact_delete, ["POST"]),
    ("/forget", forget, ["GET"]), ("/forget/confirm", forget_confirm, ["POST"]), ("/forget/do", forget_do, ["POST"]),
]
