"""The focal entity is the graph plugin's setting (issue 24 item 6): ``[graphiti] focal_entity``, not a kernel one;
a pps.toml written before the move (a top-level ``focal_entity``) still ranks the graph from it."""

from __future__ import annotations

from pps_core.settings import EntitySettings

PLUGINS = ["sqlite", "embeddings", "graphiti"]


async def test_the_focal_entity_is_read_from_the_graph_plugins_section(make_memory):
    assert "focal_entity" not in EntitySettings.model_fields
    memory = await make_memory(plugins=PLUGINS, graphiti={"focal_entity": "Ana"})
    assert memory.layer("rich_texture").focal_name == "Ana"
    older = await make_memory("older", plugins=PLUGINS, focal_entity="Jeff")
    assert older.layer("rich_texture").focal_name == "Jeff"
    plain = await make_memory("plain", plugins=PLUGINS)
    assert plain.layer("rich_texture").focal_name == plain.settings.entity
