import json
import re
import subprocess
import sys

import pluggy
import pytest

from pps_core import Memory, hookimpl
from pps_core.errors import ConfigError
from pps_core.plugins import build_plugin_manager, describe


def test_unknown_plugin_names_what_is_installed():
    with pytest.raises(ConfigError) as err:
        build_plugin_manager(["chorma"])
    assert "no plugin named 'chorma'" in str(err.value)
    assert "sqlite" in str(err.value) and "crystals" in str(err.value)


def test_a_plugin_listed_twice_is_refused():
    with pytest.raises(ConfigError, match="listed twice"):
        build_plugin_manager(["sqlite", "sqlite"])


def test_misspelled_hookimpl_fails_loudly():
    class Typo:
        @hookimpl
        def pps_layerz(self, memory):
            return []

    with pytest.raises(ConfigError, match="pps_layerz"):
        build_plugin_manager([], [Typo()])


def test_broken_plugin_import_names_plugin_and_cause(tmp_path, monkeypatch):
    pkg = tmp_path / "site"
    (pkg / "pps_broken_demo").mkdir(parents=True)
    (pkg / "pps_broken_demo" / "__init__.py").write_text("raise ImportError('needs libfoo 9')\n")
    dist = pkg / "pps_broken_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pps-broken-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[pps.plugins]\nbroken = pps_broken_demo\n")
    code = ("from pps_core.plugins import build_plugin_manager\n"
            "try:\n    build_plugin_manager(['broken'])\nexcept Exception as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(pkg), "PATH": "/usr/bin:/bin"})
    assert "plugin 'broken' could not be imported" in out.stdout
    assert "needs libfoo 9" in out.stdout


def test_unlisted_plugins_are_never_imported():
    code = ("import sys\nfrom pps_core.plugins import build_plugin_manager\n"
            "build_plugin_manager(['crystals'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('pps_') and m != 'pps_core' "
            "and not m.startswith('pps_core.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['pps_crystals', 'pps_crystals.plugin']"


def test_describe_lists_versions_and_hooks():
    pm = build_plugin_manager(["sqlite"])
    (info,) = describe(pm)
    assert info["name"] == "sqlite" and info["distribution"] == "pps-sqlite" and info["version"]
    assert info["hooks"] == ["pps_entity_plugin", "pps_prompts", "pps_resources", "pps_turn_copies"]


def test_trace_switch_prints_hook_calls(tmp_path):
    code = ("import asyncio\nfrom pps_core import Memory\n"
            f"m = Memory.for_entity('t', home={str(tmp_path)!r}, plugins=['crystals'])\n"
            "async def go():\n    async with m: pass\nasyncio.run(go())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PPS_TRACE_PLUGINS": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert "pps_layers" in out.stderr and "pps_operations" in out.stderr


async def test_each_memory_gets_a_fresh_plugin_manager(make_memory, pps_home):
    a = await make_memory("a", plugins=["crystals"])
    b = await make_memory("b", plugins=["sqlite"])
    assert isinstance(a.pm, pluggy.PluginManager) and a.pm is not b.pm
    assert "crystallize" in a.catalog and "crystallize" not in b.catalog
    assert "store_message" in b.catalog and "store_message" not in a.catalog


async def test_second_owner_is_refused_with_the_owner_named(pps_home):
    first = Memory.for_entity("x", home=pps_home, plugins=["crystals"])
    await first.open()
    try:
        second = Memory.for_entity("x", home=pps_home, plugins=["crystals"])
        with pytest.raises(Exception, match=r"owned by another process \(pid \d+"):
            await second.open()
    finally:
        await first.close()
    again = Memory.for_entity("x", home=pps_home, plugins=["crystals"])
    await again.open()
    await again.close()


def test_plugins_are_listed_in_the_configured_order():
    assert [p["name"] for p in describe(build_plugin_manager(["sqlite", "crystals"]))] == ["sqlite", "crystals"]
    assert [p["name"] for p in describe(build_plugin_manager(["crystals", "sqlite"]))] == ["crystals", "sqlite"]


def test_trace_lists_every_hook_a_call_makes_events_included(tmp_path):
    """``PPS_TRACE_PLUGINS=1 pps call`` prints every hook the call made, through pluggy: the events and the
    forget lineage too (they were called past pluggy, so the trace left them out)."""
    from pps_core.testing.server import init_entity, pps, pps_env

    init_entity(tmp_path, "x", "sqlite")
    out = pps(tmp_path, "call", "--entity", "x", "store_message",
              json.dumps({"content": "hello", "author_name": "A", "channel": "terminal"}),
              env=pps_env(tmp_path, PPS_TRACE_PLUGINS="1"))
    called = set(re.findall(r"\b(pps_[a-z_]+)\b", out.stderr))
    for hook in ("pps_operations", "pps_layers", "pps_turn_copies", "pps_rankers", "pps_memory_opened",
                 "pps_message_stored", "pps_operation_called", "pps_memory_closing"):
        assert hook in called, (hook, sorted(called))


async def test_a_hook_wrapper_and_an_applications_own_manager_keep_every_answer(pps_home):
    """Answers are attributed on any plugin manager (an application may build its own), and a plugin's hook
    wrapper is left alone: it sees the layers, and is not taken for a plugin answering."""
    from pps_core import hookspecs
    from pps_core.plugins import register_builtins
    from pps_core.settings import load_settings
    from pps_core.testing import ScriptedLayer, layer_plugin

    seen = []

    class Wraps:
        @hookimpl(wrapper=True)
        def pps_layers(self, memory):
            layers = yield
            seen.append([layer.name for batch in layers for layer in batch])
            return layers

    pm = pluggy.PluginManager("pps")
    pm.add_hookspecs(hookspecs)
    register_builtins(pm)
    pm.register(layer_plugin(ScriptedLayer("docs", ["a lighthouse"])), name="docs")
    pm.register(Wraps(), name="wraps")
    memory = Memory(load_settings("own", pps_home / "own", plugins=[], timezone="UTC"), plugin_manager=pm)
    async with memory:
        assert memory.layer_names() == ["docs"] and seen == [["docs"]]
        assert (await memory.call("ambient_recall", {"context": "lighthouse"}))["results"]
