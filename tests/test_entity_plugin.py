"""A plugin is an object per entity (issue 38; pytest's instance plugins are the model): ``pps_entity_plugin(memory)``
returns the object whose hook implementations serve that entity, so per-entity state lives on it, not in a
module-level dictionary keyed by the memory."""

from __future__ import annotations

import ast
from pathlib import Path

from pps_core import Operation, Params, hookimpl
from pps_core.testing import ScriptedLayer

ROOT = Path(__file__).resolve().parents[1]


def _per_entity_dicts(path: Path) -> list[str]:
    """Module-level dictionaries of ``path`` keyed by a memory (or its home): a ``WeakKeyDictionary``, or a dict
    read or written with a key that names ``memory`` or ``home``."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[str] = []
    dicts: set[str] = set()
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        if target is None or value is None:
            continue
        source = ast.unparse(value)
        if "WeakKeyDictionary" in source:
            found.append(f"{path.relative_to(ROOT)}: {target} (a WeakKeyDictionary)")
        elif isinstance(value, ast.Dict) or source.startswith(("dict(", "defaultdict(", "collections.defaultdict(")):
            dicts.add(target)

    def names_entity(key: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in ("memory", "home") or
                   isinstance(n, ast.Attribute) and n.attr in ("memory", "home") for n in ast.walk(key))

    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in dicts:
            key, name = node.slice, node.value.id
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
              and isinstance(node.func.value, ast.Name) and node.func.value.id in dicts
              and node.func.attr in ("get", "setdefault", "pop")):
            key, name = node.args[0], node.func.value.id
        if key is not None and names_entity(key):
            found.append(f"{path.relative_to(ROOT)}: {name} (keyed by {ast.unparse(key)})")
    return found


#: Process-wide on purpose, with the reason.
ALLOWED = {
    # the example's stand-in for a database server: a home's data outlives any one memory (the turn suites open a
    # second memory on the same home as "another process")
    "examples/pps_memstore/pps_memstore/__init__.py: _SERVER (keyed by home)",
}


def test_no_module_level_state_keyed_by_memory():
    sources = [p for top in ("plugins", "examples", "pps_core") for p in (ROOT / top).rglob("*.py")
               if "tests" not in p.relative_to(ROOT).parts and ".venv" not in p.parts]
    assert len(sources) > 100
    found = sorted({hit for p in sources for hit in _per_entity_dicts(p)} - ALLOWED)
    assert found == [], "per-entity state belongs on the plugin's entity object (pps_entity_plugin):\n" + "\n".join(found)


class Counter:
    """A third party's per-entity object: its own layer, its own operation, its own state."""

    def __init__(self, memory):
        self.memory = memory
        self.calls = 0
        self.layer = ScriptedLayer(f"counter_{memory.settings.entity}")

    @hookimpl
    def pps_layers(self):
        return [self.layer]

    @hookimpl
    def pps_operations(self):
        async def count(memory, p: Params):
            assert memory is self.memory
            self.calls += 1
            return {"entity": memory.settings.entity, "calls": self.calls, "layer_open": memory.layers.get(self.layer.name) is self.layer}

        return [Operation(name="count", params=Params, handler=count, description="count the calls", read_only=True)]


class CounterPlugin:
    __pps_name__ = "counter"

    @hookimpl
    def pps_entity_plugin(self, memory):
        return Counter(memory)


async def test_hook_pps_entity_plugin(make_memory):
    """Each entity gets its own object, which owns its layer, its operation and its state."""
    a = await make_memory("a", plugins=[], extra_plugins=[CounterPlugin()])
    b = await make_memory("b", plugins=[], extra_plugins=[CounterPlugin()])
    assert await a.call("count") == {"entity": "a", "calls": 1, "layer_open": True}
    assert await a.call("count") == {"entity": "a", "calls": 2, "layer_open": True}
    assert await b.call("count") == {"entity": "b", "calls": 1, "layer_open": True}
    assert "counter_a" in a.layer_names() and "counter_a" not in b.layer_names()
    # registered with pluggy under its plugin's name, so tracing and `pps plugins` attribute it
    assert isinstance(a.pm.get_plugin("counter:entity"), Counter)
