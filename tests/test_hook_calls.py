"""Each hook, exercised through the kernel with fake plugins (pps_core.testing): no bundled plugin needed.

tests/test_plugin_docs.py requires a ``test_hook_<name>`` test for every hook specification.
"""

import logging

import pytest

from pps_core import (
    ConfigError,
    Conflict,
    InvalidParams,
    Message,
    Operation,
    Params,
    SearchResult,
    Summary,
    Text,
    hookimpl,
)
from pps_core.testing import ScriptedLayer, broken_layer_plugin, layer_plugin

MESSAGE = Message(id=1, content="hello", author_name="A", channel="terminal", created_at="2026-01-01T00:00:00Z")
SUMMARY = Summary(id=1, summary_text="we said hello", start_id=1, end_id=1, message_count=1,
                  created_at="2026-01-01T00:00:00Z")


class Say(Params):
    content: Text


class Emits:
    """Operations that fire events the way a store plugin does."""

    __pps_name__ = "emits"

    @hookimpl
    def pps_operations(self, memory):
        async def store(memory, p: Say):
            memory.events.message_stored(MESSAGE.model_copy(update={"content": p.content}))
            return {"stored": True}

        async def summarize(memory, p: Params):
            memory.events.summary_stored(SUMMARY)
            return {"summarized": True}

        async def refuse(memory, p: Params):
            raise Conflict("not now")

        return [Operation(name="say", params=Say, handler=store, description="store a turn"),
                Operation(name="summarize", params=Params, handler=summarize, description="store a summary"),
                Operation(name="refuse", params=Params, handler=refuse, description="always refuses")]


class Recorder:
    __pps_name__ = "recorder"

    @hookimpl
    def pps_turn_copies(self, memory):
        return []  # keeps nothing of a turn

    def __init__(self):
        self.events = []

    @hookimpl
    def pps_memory_opened(self, memory):
        self.events.append(("opened", sorted(memory.layers)))

    @hookimpl
    def pps_memory_closing(self, memory):
        self.events.append(("closing", memory.settings.entity))

    @hookimpl
    def pps_operation_called(self, memory, name, params, ok, ms, status):
        self.events.append(("called", name, params, ok, ms >= 0, status))

    @hookimpl
    def pps_message_stored(self, memory, message):
        self.events.append(("message", message.content))

    @hookimpl
    def pps_summary_stored(self, memory, summary):
        self.events.append(("summary", summary.summary_text))


class Exploding:
    __pps_name__ = "exploding"

    @hookimpl
    def pps_turn_copies(self, memory):
        return []  # keeps nothing of a turn

    @hookimpl
    def pps_message_stored(self, memory, message):
        raise RuntimeError("listener bug")


async def test_hook_pps_layers(make_memory):
    memory = await make_memory(plugins=[], extra_plugins=[
        layer_plugin(ScriptedLayer("alpha", ["the lighthouse keeper"]), name="a"),
        broken_layer_plugin("beta", "connection refused")])
    assert sorted(memory.layers) == ["alpha", "beta"]
    assert [r.content for r in await memory.search_layer("alpha", "lighthouse", 5)] == ["the lighthouse keeper"]
    health = await memory.health()
    assert health["alpha"].available and not health["beta"].available
    assert "connection refused" in health["beta"].detail
    with pytest.raises(ConfigError, match="two plugins provide a layer named 'alpha'"):
        await make_memory("other", plugins=[], extra_plugins=[layer_plugin(ScriptedLayer("alpha"), name="one"),
                                                              layer_plugin(ScriptedLayer("alpha"), name="two")])


async def test_hook_pps_operations(make_memory):
    memory = await make_memory(plugins=[], extra_plugins=[Emits()])
    assert {"say", "summarize", "ambient_recall", "pps_health"} <= set(memory.catalog.names())
    assert await memory.call("say", {"content": "hi"}) == {"stored": True}

    class Again:
        __pps_name__ = "again"

        @hookimpl
        def pps_operations(self, memory):
            return [Operation(name="say", params=Say, handler=None, description="a second say")]

    with pytest.raises(ConfigError, match="'say' is defined twice"):
        await make_memory("other", plugins=[], extra_plugins=[Emits(), Again()])


async def test_hook_pps_chat_model(make_memory):
    """A third party's chat model (no HTTP, no [llm]) is the entity's: what asks for one gets it."""
    from pps_core import ChatModel

    class Echo:
        name = "echo"

        def complete(self, system, user, temperature=0.2):
            return f"{self.name}: {user[:20]}"

    class Provider:
        __pps_name__ = "provider"

        @hookimpl
        def pps_chat_model(self, settings, model):
            echo = Echo()
            echo.name = model or "echo"
            return echo

    memory = await make_memory(plugins=[], extra_plugins=[Provider()])
    chat = memory.chat_model()
    assert isinstance(chat, ChatModel) and chat.complete("sys", "hello there") == "echo: hello there"
    assert memory.chat_model("other").name == "other"
    assert (await memory.call("pps_health", {}))["llm_configured"] is True
    bare = await make_memory("bare", plugins=[])
    assert bare.chat_model() is None and (await bare.call("pps_health", {}))["llm_configured"] is False


async def test_hook_pps_embedder(make_memory):
    class Fake:
        name, dimension = "fake", 2

        def embed(self, texts):
            return [[1.0, 0.0] for _ in texts]

    class NoEmbedder:
        __pps_name__ = "none"

        @hookimpl
        def pps_embedder(self, memory):
            return None

    class Provides:
        __pps_name__ = "provides"

        @hookimpl
        def pps_embedder(self, memory):
            return Fake()

    memory = await make_memory(plugins=[], extra_plugins=[Provides(), NoEmbedder()])
    assert memory.embedder.name == "fake" and memory.embedder.embed(["x"]) == [[1.0, 0.0]]
    assert (await make_memory("bare", plugins=[])).embedder is None


async def test_hook_pps_rankers(make_memory):
    class Reverse:
        name = "reverse"

        def rerank(self, query, results: list[SearchResult], limit):
            return list(reversed(results))[:limit]

    class Rankers:
        __pps_name__ = "rankers"

        @hookimpl
        def pps_rankers(self, memory):
            return [Reverse()]

    texts = ["kitten kitten kitten", "kitten kitten", "kitten"]
    plain = await make_memory("plain", plugins=[], extra_plugins=[layer_plugin(ScriptedLayer("docs", texts))])
    ranked = await make_memory("ranked", plugins=[], rankers={"docs": ["reverse"]},
                               extra_plugins=[layer_plugin(ScriptedLayer("docs", texts)), Rankers()])
    best_first = [r.content for r in await plain.search_layer("docs", "kitten", 3)]
    assert best_first[0] == "kitten kitten kitten"
    assert [r.content for r in await ranked.search_layer("docs", "kitten", 3)] == list(reversed(best_first))
    with pytest.raises(ConfigError, match="rankers.docs: no ranker named 'nope' \\(loaded: reverse\\)"):
        await make_memory("typo", plugins=[], rankers={"docs": ["nope"]},
                          extra_plugins=[layer_plugin(ScriptedLayer("docs")), Rankers()])


def test_hook_pps_transports(pps_home, monkeypatch, capsys):
    from pps_core import cli, plugins

    served = []

    from pps_core.transport import Transport

    class Fake(Transport):
        name, help = "fake", "a transport for tests"

        def add_arguments(self, parser):
            parser.add_argument("--greeting", default="hello")

        async def serve(self, entities, options):
            served.append((options.greeting, entities.primary.name))

    class Transports:
        __pps_name__ = "transports"

        @hookimpl
        def pps_transports(self):
            return [Fake()]

    real = plugins.build_plugin_manager
    monkeypatch.setattr(plugins, "build_plugin_manager", lambda names, extra=(): real(names, [Transports()]))
    home = pps_home / "lyra"
    home.mkdir()
    (home / "pps.toml").write_text('entity = "lyra"\nplugins = []\n')
    assert cli.main(["serve", "fake", "--home", str(home), "--greeting", "hi"]) == 0
    assert served == [("hi", "lyra")]  # the kernel opened the entity and handed it over
    assert cli.main(["serve", "nosuch", "--home", str(home)]) == 2
    err = capsys.readouterr().err
    assert "no transport named 'nosuch'" in err and "(loaded: fake;" in err


async def test_hook_pps_memory_opened(make_memory):
    rec = Recorder()
    await make_memory(plugins=[], extra_plugins=[layer_plugin(ScriptedLayer("alpha")), rec])
    assert rec.events == [("opened", ["alpha"])]


async def test_hook_pps_memory_closing(make_memory):
    rec = Recorder()
    memory = await make_memory(plugins=[], extra_plugins=[rec])
    await memory.close()
    assert rec.events[-1] == ("closing", "testentity")


async def test_hook_pps_operation_called(make_memory):
    rec = Recorder()
    memory = await make_memory(plugins=[], extra_plugins=[Emits(), rec])
    await memory.call("say", {"content": "hi"})
    with pytest.raises(Conflict):
        await memory.call("refuse")
    with pytest.raises(InvalidParams):
        await memory.call("say", {"content": "  "})  # refused before the handler: a 422, the input not passed on
    assert [e for e in rec.events if e[0] == "called"] == [("called", "say", {"content": "hi"}, True, True, 200),
                                                           ("called", "refuse", {}, False, True, 409),
                                                           ("called", "say", {}, False, True, 422)]


async def test_hook_pps_message_stored(make_memory, caplog):
    rec = Recorder()
    memory = await make_memory(plugins=[], extra_plugins=[Emits(), rec, Exploding()])
    with caplog.at_level(logging.WARNING, logger="pps"):
        assert await memory.call("say", {"content": "kept"}) == {"stored": True}  # a failing listener: logged
    assert ("message", "kept") in rec.events
    assert "a plugin failed in pps_message_stored: listener bug" in caplog.text

    class Refuses:
        __pps_name__ = "refuses"

        @hookimpl
        def pps_turn_copies(self, memory):
            return []

        @hookimpl
        def pps_message_stored(self, memory, message):
            raise Conflict("meant for the caller")

    strict = await make_memory("strict", plugins=[], extra_plugins=[Emits(), Refuses()])
    with pytest.raises(Conflict, match="meant for the caller"):  # a PPSError from a listener propagates
        await strict.call("say", {"content": "x"})


async def test_hook_pps_summary_stored(make_memory):
    rec = Recorder()
    memory = await make_memory(plugins=[], extra_plugins=[Emits(), rec])
    await memory.call("summarize")
    assert ("summary", "we said hello") in rec.events


async def test_hook_pps_messages_forgotten(make_memory):
    forgotten = []

    class Index:
        __pps_name__ = "index"

        @hookimpl
        def pps_turn_copies(self, memory):
            return []

        @hookimpl
        def pps_messages_forgotten(self, memory, ids):
            async def drop():
                forgotten.extend(ids)
            return drop()

    class Broken:
        __pps_name__ = "broken"

        @hookimpl
        def pps_turn_copies(self, memory):
            return []

        @hookimpl
        def pps_messages_forgotten(self, memory, ids):
            raise RuntimeError("index offline")

    memory = await make_memory(plugins=[], extra_plugins=[Index(), Broken()])
    problems = await memory.events.messages_forgotten([3, 4])
    assert forgotten == [3, 4]  # awaited, and not stopped by the listener that failed
    assert problems == ["broken: RuntimeError: index offline"]
    assert await memory.events.messages_forgotten([]) == []
