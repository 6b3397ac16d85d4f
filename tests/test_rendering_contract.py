"""The rendering contract (issue 24, item 4): ambient_recall formats items from typed, documented fields of
SearchResult (kind, channels, author), never from metadata keys; every field, kind and section style is in
docs/plugin-hooks.md."""

import ast
import typing
from pathlib import Path

from pps_core import LayerHealth, SearchResult
from pps_core.models import ItemKind, SectionConfig
from pps_core.testing import ScriptedLayer, layer_plugin

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "docs" / "plugin-hooks.md").read_text()


def test_every_rendering_field_kind_and_style_is_documented():
    assert "## Rendering" in REFERENCE, "docs/plugin-hooks.md needs a section '## Rendering'"
    RENDERING = REFERENCE[REFERENCE.index("## Rendering"):]
    fields = [name for name, f in SearchResult.model_fields.items() if f.exclude] + ["content", "timestamp"]
    assert {"kind", "channels", "author"} <= set(fields)
    missing = [f for f in fields if f"`{f}`" not in RENDERING]
    missing += [f"kind {k}" for k in typing.get_args(ItemKind) if f"- `{k}`:" not in RENDERING]
    styles = typing.get_args(SectionConfig.model_fields["style"].annotation)
    missing += [f"style {s}" for s in styles if f"- `{s}`:" not in RENDERING]
    assert missing == [], f"docs/plugin-hooks.md, 'Rendering', does not document {missing}"


def test_the_kernel_reads_no_metadata_key():
    """Formatting by ``metadata["kind"]`` or ``metadata["channel"]`` made a layer's look depend on magic keys."""
    found = []
    for path in sorted((ROOT / "pps_core").rglob("*.py")):
        if "testing" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            target = None
            if isinstance(node, ast.Subscript):
                target = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                target = node.func.value
            if isinstance(target, ast.Attribute) and target.attr == "metadata":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


class TurnLayer(ScriptedLayer):
    """A third party's layer of conversation lines: typed fields, no metadata at all."""

    async def search(self, query, limit, offset=0):
        return [SearchResult(layer=self.name, content="the kettle is fixed", source="7", score=1.0,
                             timestamp="2026-01-26T20:24:00.000Z", kind="turn", channels=["irc:home"],
                             author="Ada"),
                SearchResult(layer=self.name, content="Ada fixed the kettle.", source="s1", score=0.5,
                             timestamp="2026-01-26T21:00:00.000Z", kind="summary", channels=["irc:home", "sms"])]

    async def health(self):
        return LayerHealth(layer=self.name, available=True)


async def test_a_layer_controls_its_look_through_the_typed_fields(make_memory):
    layer = TurnLayer("chatlog", [])
    memory = await make_memory(plugins=[], extra_plugins=[layer_plugin(layer)], timezone="UTC")
    out = await memory.call("ambient_recall", {"context": "kettle"})
    assert "[chatlog] (turn 7)\n[2026-01-26 20:24] [irc:home] Ada: the kettle is fixed" in out["text"]
    assert "[chatlog]\n[2026-01-26] [irc:home, sms]\nAda fixed the kettle." in out["text"]
    item = out["results"][0]
    assert "kind" not in item and "channels" not in item and item["metadata"] == {}
