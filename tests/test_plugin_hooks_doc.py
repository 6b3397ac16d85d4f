"""docs/plugin-hooks.md leads every hook's section with a short example plugin, and each example works (issue 38:
llm's and datasette's hook references lead with one per hook).

Every example is taken from the page as written, made a module, registered as a plugin of a real memory on a
temporary home (``make_memory(extra_plugins=[module])``, or of the ``pps`` command for the hooks that run before
any memory), and the test checks what a user would see: an operation answers, a layer is listed and searched,
a command runs, an event reaches the listener. A hookspec without an example, or an example without a check
here, fails.
"""

from __future__ import annotations

import inspect
import logging
import re
import sys
import types
from pathlib import Path

import pytest

from pps_core import hookspecs

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "plugin-hooks.md"
HOOKS = sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("pps_"))
HEADING = re.compile(r"^### `(pps_\w+)\(.*`$", re.M)
EXAMPLE = re.compile(r"\A\s*```python\n(.*?)^```$", re.M | re.S)
LOG = "pps.example"


def examples() -> dict[str, str]:
    """Hook name -> the code of the fenced ``python`` block that opens its section (only one that opens it)."""
    text = REFERENCE.read_text()
    found = {}
    headings = list(HEADING.finditer(text))
    for m in headings:
        section = text[m.end():]
        end = re.search(r"^#{2,3} ", section, re.M)
        section = section[:end.start()] if end else section
        first = EXAMPLE.match(section)
        if first:
            found[m.group(1)] = first.group(1)
    return found


@pytest.fixture
def example(monkeypatch):
    """``example("pps_layers")``: the page's example for that hook, as a fresh module (a plugin)."""
    found = examples()

    def load(hook: str) -> types.ModuleType:
        module = types.ModuleType(f"example_{hook}")
        monkeypatch.setitem(sys.modules, module.__name__, module)  # what pydantic and dataclasses look up
        exec(compile(found[hook], f"docs/plugin-hooks.md, the example of {hook}", "exec"), module.__dict__)
        return module

    return load


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_section_leads_with_an_example_that_is_run(hook):
    assert hook in examples(), f"docs/plugin-hooks.md: the section of {hook} must open with a ```python example"
    assert f"test_example_{hook}" in globals(), f"no test here runs the example of {hook}"
    assert re.search(rf"^@hookimpl\ndef {hook}\(", examples()[hook], re.M), \
        f"the example of {hook} implements it as a module-level @hookimpl function"


def test_an_example_missing_from_a_section_is_found(tmp_path, monkeypatch):
    """The check above can fail: a section whose text comes before its example has none."""
    page = tmp_path / "hooks.md"
    page.write_text("### `pps_layers(memory: Memory) -> list[Layer]`\n\nText first.\n\n```python\nx = 1\n```\n"
                    "### `pps_operations(memory: Memory) -> list[Operation]`\n\n```python\ny = 2\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "REFERENCE", page)
    assert examples() == {"pps_operations": "y = 2\n"}


# -- plugin machinery and commands (before any memory) ------------------------------------------------------------


async def test_example_pps_addhooks(example, make_memory):
    memory = await make_memory("lyra", plugins=[], extra_plugins=[example("pps_addhooks")])
    assert memory.pm.hook.pps_greeting(memory=memory) == ["hello, lyra"]


def _commands_with(monkeypatch, module):
    """``pps`` builds its commands from every installed plugin: the example is one more."""
    from pps_core import plugins

    real = plugins.load_installed

    def load_installed(pm):
        failures = real(pm)
        pm.register(module, name="example")
        return failures

    monkeypatch.setattr(plugins, "load_installed", load_installed)


def test_example_pps_register_commands(example, monkeypatch, capsys):
    from pps_core import cli

    _commands_with(monkeypatch, example("pps_register_commands"))
    assert cli.main(["greet", "--entity", "lyra"]) == 0
    assert capsys.readouterr().out == "hello, lyra\n"


def _entity_plugins_with(monkeypatch, module):
    """What ``pps init`` and ``pps serve`` load for an entity, and the example."""
    from pps_core import plugins

    real = plugins.build_plugin_manager
    monkeypatch.setattr(plugins, "build_plugin_manager", lambda names, extra=(): real(names, [*extra, module]))


def test_example_pps_init_hints(example, monkeypatch, pps_home):
    from pps_core import cli
    from pps_core.settings import load_settings

    _entity_plugins_with(monkeypatch, example("pps_init_hints"))
    home = pps_home / "lyra"
    assert cli.main(["init", "--entity", "lyra", "--home", str(home), "--plugins", "sqlite"]) == 0
    toml = (home / "pps.toml").read_text()
    assert '# [greeter]\n# greeting = "hello"  # what `pps greet` says\n' in toml
    assert load_settings("lyra", home).plugins == ["sqlite"]  # the hint is a comment: the file loads as written


def test_example_pps_transports(example, monkeypatch, pps_home, capsys):
    from pps_core import cli

    _entity_plugins_with(monkeypatch, example("pps_transports"))
    home = pps_home / "lyra"
    home.mkdir()
    (home / "pps.toml").write_text('entity = "lyra"\nplugins = []\ntimezone = "UTC"\n')
    assert cli.main(["serve", "list", "--home", str(home), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"lyra \d+ operations: \w+, \w+\n", out), out


# -- what an entity's memory has ----------------------------------------------------------------------------------


async def test_example_pps_layers(example, make_memory):
    memory = await make_memory(plugins=[], extra_plugins=[example("pps_layers")])
    assert "notes" in memory.layers
    found = await memory.search_layer("notes", "where is the key", 5)
    assert [(r.content, r.source) for r in found] == [("the spare key is under the blue pot", "note 1")]
    assert (await memory.health())["notes"].counts == {"notes": 1}


async def test_example_pps_operations(example, make_memory):
    memory = await make_memory("lyra", plugins=[], extra_plugins=[example("pps_operations")])
    assert await memory.call("echo", {"text": "hi"}) == {"entity": "lyra", "echo": "hi"}
    assert memory.operation("echo").read_only


async def test_example_pps_entity_plugin(example, make_memory):
    plugin = example("pps_entity_plugin")
    lyra = await make_memory("lyra", plugins=[], extra_plugins=[plugin])
    orion = await make_memory("orion", plugins=[], extra_plugins=[plugin])
    assert await lyra.call("count_calls", {}) == {"entity": "lyra", "calls": 1}
    assert await lyra.call("count_calls", {}) == {"entity": "lyra", "calls": 2}
    assert await orion.call("count_calls", {}) == {"entity": "orion", "calls": 1}  # an object per entity


async def test_example_pps_embedder(example, make_memory):
    memory = await make_memory(plugins=[], extra_plugins=[example("pps_embedder")])
    assert memory.embedder.name == "hash-4"
    [vector] = memory.embedder.embed(["the blue pot"])
    assert len(vector) == 4 and abs(sum(x * x for x in vector) - 1) < 1e-9


async def test_example_pps_chat_model(example, make_memory):
    memory = await make_memory(plugins=[], extra_plugins=[example("pps_chat_model")])
    assert memory.chat_model().complete("be brief", " hello ") == "HELLO"
    assert memory.chat_model("other").name == "other"
    assert (await memory.call("pps_health", {}))["llm_configured"] is True


async def test_example_pps_rankers(example, make_memory):
    from pps_core.testing import ScriptedLayer, layer_plugin

    texts = ["kitten kitten kitten", "kitten kitten", "kitten"]
    memory = await make_memory(plugins=[], rankers={"docs": ["shortest_first"]},
                               extra_plugins=[layer_plugin(ScriptedLayer("docs", texts)), example("pps_rankers")])
    assert [r.content for r in await memory.search_layer("docs", "kitten", 3)] == list(reversed(texts))


async def test_example_pps_resources(example, make_memory):
    from pps_core.publish import Published

    memory = await make_memory("lyra", plugins=[], extra_plugins=[example("pps_resources")])
    published = Published.collect(memory.pm, memory.settings)
    assert "pps://motto/today" in [item.uri for item in await published.items(memory.call)]
    assert await published.read(memory.call, "pps://motto/today") == ("text/markdown", "lyra: one thing at a time.")


async def test_example_pps_prompts(example, make_memory):
    from pps_core.publish import Published

    memory = await make_memory("lyra", plugins=[], extra_plugins=[example("pps_prompts")])
    published = Published.collect(memory.pm, memory.settings)
    _prompt, messages = await published.prompt(memory.call, "letter", {"who": "Jeff"})
    assert [(m.role, m.text) for m in messages] == [("user", "As lyra, write a short letter to Jeff.")]


# -- events -------------------------------------------------------------------------------------------------------


def logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOG]


async def test_example_pps_memory_opened(example, make_memory, caplog):
    from pps_core.testing import ScriptedLayer, layer_plugin

    with caplog.at_level(logging.INFO, logger=LOG):
        await make_memory("lyra", plugins=[], extra_plugins=[layer_plugin(ScriptedLayer("docs")),
                                                              example("pps_memory_opened")])
    assert logged(caplog) == ["lyra opened with layers: docs"]


async def test_example_pps_memory_closing(example, make_memory, caplog):
    memory = await make_memory("lyra", plugins=[], extra_plugins=[example("pps_memory_closing")])
    with caplog.at_level(logging.INFO, logger=LOG):
        assert logged(caplog) == []
        await memory.close()
    assert logged(caplog) == ["lyra is closing"]


TURN = {"content": "the spare key is under the blue pot", "author_name": "Jeff", "channel": "terminal:x"}


async def test_example_pps_message_stored(example, make_memory, caplog):
    memory = await make_memory(plugins=["sqlite"], extra_plugins=[example("pps_message_stored")])
    with caplog.at_level(logging.INFO, logger=LOG):
        stored = await memory.call("store_message", TURN)
    assert logged(caplog) == [f"turn {stored['id']} stored on terminal:x"]
    assert "blue pot" not in caplog.text


async def test_example_pps_messages_forgotten(example, make_memory, caplog):
    memory = await make_memory(plugins=["sqlite"], extra_plugins=[example("pps_messages_forgotten")])
    stored = await memory.call("store_message", TURN)
    with caplog.at_level(logging.INFO, logger=LOG):
        await memory.call("forget_turns", {"ids": [stored["id"]]})
    assert logged(caplog) == [f"turns [{stored['id']}] forgotten"]


async def test_example_pps_turn_copies(example, make_memory, caplog):
    memory = await make_memory(plugins=["sqlite"], extra_plugins=[example("pps_turn_copies")])
    listed = await memory.call("turn_copies", {})
    assert {"plugin": "example_pps_turn_copies", "name": "cache"}.items() <= \
        next(c for c in listed["copies"] if c["name"] == "cache").items()
    stored = await memory.call("store_message", TURN)
    with caplog.at_level(logging.INFO, logger=LOG):
        answer = await memory.call("forget_turns", {"ids": [stored["id"]]})
    assert logged(caplog) == [f"dropped turns [{stored['id']}] from the cache"] and answer["pending"] == []


async def test_example_pps_summary_stored(example, make_memory, caplog):
    memory = await make_memory(plugins=["sqlite"], extra_plugins=[example("pps_summary_stored")])
    ids = [(await memory.call("store_message", TURN))["id"] for _ in range(2)]
    with caplog.at_level(logging.INFO, logger=LOG):
        summary = await memory.call("store_summary", {"summary_text": "Jeff hid the key", "message_ids": ids})
    assert logged(caplog) == [f"summary {summary['id']} covers 2 turns"]


async def test_example_pps_operation_called(example, make_memory, caplog):
    memory = await make_memory("lyra", plugins=[], extra_plugins=[example("pps_operation_called")])
    with caplog.at_level(logging.INFO, logger=LOG):
        await memory.call("pps_health", {})
    [line] = logged(caplog)
    assert re.fullmatch(r"lyra pps_health answered 200 in \d+\.\d ms", line), line
