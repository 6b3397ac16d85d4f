"""pps_http_mount: a plugin adds routes to the HTTP app for each hosted entity, once its memory is open."""

from __future__ import annotations

import httpx
from pps_http.app import create_app
from starlette.responses import PlainTextResponse

from pps_core import hookimpl


class Pages:
    __pps_name__ = "pages"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    @hookimpl(optionalhook=True)
    def pps_http_mount(self, app, memory, auth):
        self.calls.append((memory.settings.entity, memory.opened, auth.entity))

        async def hello(request):
            return PlainTextResponse(f"{memory.settings.entity}: {len(memory.catalog)} operations")

        app.add_route(f"/hello/{memory.settings.entity}", hello)


async def test_a_plugin_mounts_routes_for_each_entity(make_memory, pps_home):
    pages = Pages()
    lyra = await make_memory("lyra", plugins=["crystals", "http"], extra_plugins=[pages])
    nexus = await make_memory("nexus", plugins=["crystals"], extra_plugins=[pages])  # no 'http': still mounted
    app = create_app([lyra, nexus])
    async with app.router.lifespan_context(app):
        assert pages.calls == [("lyra", True, "lyra"), ("nexus", True, "nexus")]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            answer = await client.get("/hello/nexus")
    assert answer.status_code == 200 and answer.text.startswith("nexus: ") and "operations" in answer.text


async def test_without_an_implementation_nothing_is_mounted(make_memory):
    memory = await make_memory("lyra", plugins=["crystals", "http"])
    app = create_app([memory])
    before = len(app.router.routes)
    async with app.router.lifespan_context(app):
        paths = {getattr(r, "path", "") for r in app.router.routes[before:]}
    assert not any(p.startswith("/ui") or p.startswith("/hello") for p in paths)
