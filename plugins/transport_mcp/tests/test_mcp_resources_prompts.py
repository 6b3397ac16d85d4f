"""MCP resources and prompts from the entity's plugins (pps_resources / pps_prompts), through a real MCP client
session: the startup package, each crystal, each word-photo and the newest summaries as resources (templates for
the long lists), notifications when they change, and the wake-up, summarize and crystallize prompts."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from pps_mcp.server import create_server

from pps_core import ConfigError, Prompt, PromptArgument, PromptMessage, ResourceItem, Resources, hookimpl
from pps_core.publish import Published, tail

PLUGINS = ["sqlite", "crystals", "chroma", "embeddings"]


async def seed(memory):
    await memory.call("store_messages", {"messages": [
        {"content": f"turn {i} about the lighthouse", "author_name": "Jeff" if i % 2 else "Lyra",
         "channel": "terminal:s1", "created_at": f"2026-01-0{1 + i // 3}T10:0{i % 3}:00Z"} for i in range(6)]})
    batch = await memory.call("summarize_messages", {"limit": 3})
    await memory.call("store_summary", {"summary_text": "They painted the lighthouse door blue.",
                                        "message_ids": batch["message_ids"]})
    for i in range(3):
        await memory.call("crystallize", {"content": f"# Crystal {i}\n\nthe lamp turns, part {i}"})
    await memory.call("anchor_save", {"content": "Snow on the *harbor* wall.", "title": "First snow",
                                      "tags": ["winter"]})


async def test_resources_templates_and_reads(make_memory):
    memory = await make_memory(plugins=PLUGINS, crystals={"window": 2})
    await seed(memory)
    async with Client(create_server(memory)) as client:
        caps = client.initialize_result.capabilities if hasattr(client, "initialize_result") else None
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert set(listed) == {"pps://startup", "pps://summaries", "pps://crystals/crystal_002.md",
                               "pps://crystals/crystal_003.md", "pps://word-photos/first-snow.md"}
        assert listed["pps://word-photos/first-snow.md"].title == "First snow"
        assert all(r.mime_type == "text/markdown" for r in listed.values())
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {"pps://crystals/{name}", "pps://word-photos/{filename}"}

        async def read(uri):
            contents = (await client.read_resource(uri)).contents
            assert len(contents) == 1 and str(contents[0].uri) == uri
            return contents[0].text

        startup = await read("pps://startup")
        assert startup == (await memory.call("ambient_recall", {"context": "startup"}))["text"]
        assert "They painted the lighthouse door blue." in await read("pps://summaries")
        assert await read("pps://crystals/crystal_001.md") == "# Crystal 0\n\nthe lamp turns, part 0"  # archived
        photo = await read("pps://word-photos/first-snow.md")
        assert photo.startswith('---\ntitle: "First snow"\n') and 'tags: ["winter"]' in photo
        assert photo.endswith("Snow on the *harbor* wall.\n")
        for missing in ("pps://crystals/crystal_009.md", "pps://word-photos/nope.md", "pps://nothing/here",
                        "pps://word-photos/../pps.toml", "pps://crystals/"):
            with pytest.raises(MCPError) as err:
                await read(missing)
            # SEP-2164 (protocol 2026-07-28, what the SDK's own servers do): -32602 with the URI in data
            assert err.value.error.code == -32602 and err.value.error.data["uri"] == missing, missing
        done = await client.complete(types.ResourceTemplateReference(type="ref/resource", uri="pps://crystals/{name}"),
                                     {"name": "name", "value": "crystal_00"})
        assert done.completion.values == ["crystal_003.md", "crystal_002.md", "crystal_001.md"]
    del caps


async def test_prompts(make_memory):
    memory = await make_memory(plugins=PLUGINS, crystals={"window": 2})
    await seed(memory)
    async with Client(create_server(memory)) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(prompts) == {"wake_up", "summarize_backlog", "crystallize_session"}
        assert [a.name for a in prompts["summarize_backlog"].arguments] == ["limit"]
        wake = await client.get_prompt("wake_up", {})
        text = wake.messages[0].content.text
        assert wake.messages[0].role == "user" and "You are waking up" in text and "Crystal 2" in text
        backlog = (await client.get_prompt("summarize_backlog", {"limit": "2"})).messages[0].content.text
        unsummarized = await memory.call("summarize_messages", {"limit": 2})
        assert f"message_ids: {unsummarized['message_ids']}" in backlog and "turn 3 about the lighthouse" in backlog
        crystal = (await client.get_prompt("crystallize_session", {"channel": "terminal:s1"})).messages[0].content.text
        assert "Crystal 2" in crystal and "turn 5 about the lighthouse" in crystal and "crystallize tool" in crystal
        with pytest.raises(MCPError) as err:
            await client.get_prompt("summarize_backlog", {"limit": "many"})
        assert err.value.error.code == -32602 and "limit" in err.value.error.message
        with pytest.raises(MCPError):
            await client.get_prompt("no_such_prompt", {})
        with pytest.raises(MCPError) as err:
            await client.get_prompt("wake_up", {"colour": "blue"})
        assert "colour" in err.value.error.message


async def test_changes_are_announced_on_listen_streams(make_memory):
    """Protocol 2026-07-28: subscriptions/listen. A crystal made through MCP changes the list; a turn stored by
    another caller in the same process updates the startup package."""
    from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated

    memory = await make_memory(plugins=PLUGINS, crystals={"window": 2})
    await seed(memory)
    async with Client(create_server(memory)) as client:
        await client.list_resources()
        async with client.listen(resources_list_changed=True, resource_subscriptions=["pps://startup"]) as sub:
            await client.call_tool("crystallize", {"content": "# Crystal 3\n\nnew"})
            events = []
            with anyio.fail_after(10):
                async for event in sub:
                    events.append(event)
                    if isinstance(event, ResourcesListChanged):
                        break
            await memory.call("store_message", {"content": "said elsewhere", "author_name": "Jeff",
                                                "channel": "discord:home"})
            with anyio.fail_after(10):
                async for event in sub:
                    if event == ResourceUpdated(uri="pps://startup"):
                        break
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert "pps://crystals/crystal_004.md" in listed and "pps://crystals/crystal_002.md" not in listed
        assert "said elsewhere" in (await client.read_resource("pps://startup")).contents[0].text


async def test_changes_are_announced_to_2025_clients(make_memory):
    """The 2025 protocol: resources/subscribe, notifications/resources/list_changed and updated; the capability
    says so."""
    memory = await make_memory(plugins=PLUGINS, crystals={"window": 2})
    await seed(memory)
    heard: list[str] = []

    async def on_message(message):
        root = getattr(message, "root", message)
        heard.append(type(root).__name__)

    async with Client(create_server(memory), mode="legacy", cache=None, message_handler=on_message) as client:
        caps = client.session.server_capabilities if hasattr(client.session, "server_capabilities") else None
        await client.list_resources()
        from mcp.shared.exceptions import MCPDeprecationWarning

        with pytest.warns(MCPDeprecationWarning):  # the SDK marks the 2025 way; 2025 clients still use it
            await client.subscribe_resource("pps://startup")
        await client.call_tool("store_message", {"content": "a new turn", "author_name": "Jeff",
                                                 "channel": "terminal"})
        with anyio.fail_after(10):
            while "ResourceUpdatedNotification" not in heard:
                await anyio.sleep(0.05)
        assert "ResourceListChangedNotification" not in heard  # the list did not change: only the package
        await client.call_tool("anchor_save", {"content": "Fog at dawn.", "title": "Fog"})
        with anyio.fail_after(10):
            while "ResourceListChangedNotification" not in heard:
                await anyio.sleep(0.05)
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert "pps://word-photos/fog.md" in listed
    if caps is not None:
        assert caps.resources.list_changed and caps.resources.subscribe


class Shelf:
    """A plugin of its own publishing one resource family (the crystals' names as plain text) and one prompt."""

    __pps_name__ = "shelf"

    def __init__(self, family: str = "shelf") -> None:
        self.family = family
        self.settings = []

    @hookimpl
    def pps_resources(self, settings):
        self.settings.append(settings.entity)

        async def items(call):
            return [ResourceItem(uri=f"pps://{self.family}/{n}", name=n, mime_type="text/plain")
                    for n in (await call("crystal_list", {}))["current"]]

        async def read(call, uri):
            name = tail(uri, family, "shelf item")
            return f"{name} is on the shelf"

        family = Resources(family=self.family, description="crystal names", items=items, read=read,
                           changed_by=frozenset({"crystallize"}), mime_type="text/plain")
        return [family]

    @hookimpl
    def pps_prompts(self, settings):
        async def render(call, arguments):
            newest = (await call("get_crystals", {"count": 1}))["crystals"][0]["name"]
            return [PromptMessage("user", f"Dear {arguments['who']}, the newest crystal is {newest}."),
                    PromptMessage("assistant", "Noted.")]

        return [Prompt(name="letter", description="a letter", render=render,
                       arguments=(PromptArgument("who", "whom to write to", required=True),))]


async def test_hook_pps_resources(make_memory):
    shelf = Shelf()
    memory = await make_memory(plugins=["crystals"], extra_plugins=[shelf])
    await memory.call("crystallize", {"content": "one"})
    async with Client(create_server(memory)) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert set(listed) == {"pps://startup", "pps://crystals/crystal_001.md", "pps://shelf/crystal_001.md"}
        assert listed["pps://shelf/crystal_001.md"].mime_type == "text/plain"
        read = (await client.read_resource("pps://shelf/crystal_001.md")).contents[0]
        assert (read.text, read.mime_type) == ("crystal_001.md is on the shelf", "text/plain")
        with pytest.raises(MCPError) as err:
            await client.read_resource("pps://shelf/a/b")
        assert err.value.error.code == -32602 and err.value.error.data["param"] == "uri"
    assert shelf.settings == ["testentity"]  # called with the entity's settings
    published = Published.collect(memory.pm, memory.settings)
    assert [f.family for f in published.changed("crystallize", read_only=False)] == ["startup", "crystals", "shelf"]
    assert [f.family for f in published.changed("texture_add", read_only=False)] == ["startup"]  # any write
    assert published.changed("crystal_list", read_only=True) == []
    with pytest.raises(ConfigError, match="two plugins publish resources under pps://crystals"):
        create_server(await make_memory("twice", plugins=["crystals"], extra_plugins=[Shelf("crystals")]))
    with pytest.raises(ConfigError, match="resource family 'Shelf!'"):
        Resources(family="Shelf!", description="", items=Shelf().pps_resources, read=Shelf().pps_resources)


async def test_hook_pps_prompts(make_memory):
    memory = await make_memory(plugins=["crystals"], extra_plugins=[Shelf()])
    await memory.call("crystallize", {"content": "one"})
    async with Client(create_server(memory)) as client:
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(listed) == {"wake_up", "crystallize_session", "letter"}  # no turn store: no summarize_backlog
        assert [(a.name, a.required) for a in listed["letter"].arguments] == [("who", True)]
        got = await client.get_prompt("letter", {"who": "Jeff"})
        assert [(m.role, m.content.text) for m in got.messages] == [
            ("user", "Dear Jeff, the newest crystal is crystal_001.md."), ("assistant", "Noted.")]
        with pytest.raises(MCPError) as err:
            await client.get_prompt("letter", {})
        assert err.value.error.code == -32602 and err.value.error.data["param"] == "who"
