"""The embedded graph's read path without graphiti (issue 23): the same facts and entities in the same order as
graphiti's own hybrid search, graphiti's own schema and query text, and a serverless search, startup package
or health that never imports graphiti_core or openai."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pps_core.testing.server import pps, pps_env

QUERIES = [
    "Jeff", "kitten named Pixel", "coffee in the morning", "Lyra lighthouse door", "who drove home",
    "quiet weekends sailing", "Brandi", "garden plans rooftop", "nothing matches this zebra xylophone",
    "Jeff's \"kitten\" (Pixel) & coffee: yes?", "   ", " ".join(["word"] * 130) + " Jeff",
]
TRIPLETS = [
    ("Lyra", "loves", "Jeff", "Lyra loves Jeff and their slow mornings"),
    ("Jeff", "brews", "coffee", "Jeff brews coffee every morning"),
    ("Lyra", "paints", "the door", "Lyra painted the lighthouse door cobalt blue"),
    ("Jeff", "enjoys", "sailing", "Jeff enjoys sailing on quiet weekends"),
    ("Bob", "enjoys", "rowing", "Bob enjoys rowing on quiet weekends"),
    ("Lyra", "discussed", "gardens", "Lyra and Jeff discussed the garden plans"),
    ("Lyra", "discussed", "rooftops", "Lyra and Jeff discussed the rooftop plans"),
    ("Brandi", "visited", "Nexus", "Brandi visited Nexus at the harbour"),
    ("Jeff", "adopted", "Pixel", "Jeff adopted a kitten named Pixel"),
    ("Pixel", "sleeps on", "the windowsill", "Pixel the kitten sleeps on the sunny windowsill"),
]
TURNS = ["Jeff adopted a kitten named Pixel", "Brandi drove Nexus home", "Lyra fixed the Lighthouse lamp",
         "Jeff told Brandi about the coffee"]


def test_the_kuzu_schema_indexes_and_return_clauses_are_graphitis():
    from graphiti_core.driver.driver import GraphProvider
    from graphiti_core.driver.kuzu_driver import SCHEMA_QUERIES
    from graphiti_core.graph_queries import get_fulltext_indices
    from graphiti_core.models.edges.edge_db_queries import get_entity_edge_return_query
    from graphiti_core.models.nodes.node_db_queries import get_entity_node_return_query
    from graphiti_core.search import search_utils
    from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF, NODE_HYBRID_SEARCH_RRF
    from pps_graphiti import records

    assert records.SCHEMA_QUERIES == SCHEMA_QUERIES
    assert records.FULLTEXT_INDEXES == get_fulltext_indices(GraphProvider.KUZU)
    assert records.EDGE_RETURN == get_entity_edge_return_query(GraphProvider.KUZU)
    assert records.NODE_RETURN == get_entity_node_return_query(GraphProvider.KUZU)
    assert records.SIM_MIN_SCORE == EDGE_HYBRID_SEARCH_RRF.edge_config.sim_min_score
    assert records.SIM_MIN_SCORE == NODE_HYBRID_SEARCH_RRF.node_config.sim_min_score
    assert records.MAX_QUERY_WORDS == search_utils.MAX_QUERY_LENGTH
    for lists in ([["a", "b", "c"], ["c", "d"]], [["x", "y"], ["y", "x"]], [[], ["q"]], [["p", "p", "r"], []]):
        assert records.rrf(lists) == search_utils.rrf(lists)[0]


def test_graphitis_driver_on_our_database_has_every_attribute_of_its_own(tmp_path):
    import warnings

    from graphiti_core.driver.kuzu_driver import KuzuDriver
    from pps_graphiti.engine_client import KuzuHandle
    from pps_graphiti.graphiti_driver import SharedKuzuDriver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = KuzuDriver(str(tmp_path / "theirs.kuzu"))
    handle = KuzuHandle(tmp_path / "ours.kuzu")
    try:
        ours = SharedKuzuDriver(handle, "g")
        assert set(vars(theirs)) - {"db", "client"} <= set(vars(ours))
        assert ours.db is handle.db and ours.client is handle.client
    finally:
        handle.close()


async def test_the_read_path_finds_what_graphitis_search_finds_in_the_same_order(graph_memory, scripted_llm):
    from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF, NODE_HYBRID_SEARCH_RRF

    memory = await graph_memory(llm={"base_url": scripted_llm.base_url, "model": "scripted"},
                                graphiti={"background_ingest": False})
    for source, rel, target, fact in TRIPLETS:
        await memory.call("texture_add_triplet", {"source": source, "relationship": rel, "target": target,
                                                  "fact": fact})
    for text in TURNS:  # facts and entities as ingestion writes them (graphiti's own writes, scripted LLM)
        await memory.call("store_message", {"content": text, "author_name": "Jeff", "channel": "terminal"})
    assert (await memory.call("ingest_batch_to_graphiti", {"batch_size": 10}))["remaining"] == 0
    graph = memory.layer("rich_texture").graph
    gid = graph.group_id
    compared = 0
    for query in QUERIES:
        for limit in (3, 10, 40):
            config = EDGE_HYBRID_SEARCH_RRF.model_copy(deep=True)
            config.limit = limit
            theirs = (await graph.graphiti.search_(query, config=config, group_ids=[gid])).edges
            ours = await graph.hybrid_edges(query, limit)
            assert [e.uuid for e in ours] == [e.uuid for e in theirs], (query, limit)
            for a, b in zip(ours, theirs, strict=True):
                for field in ("source_node_uuid", "target_node_uuid", "name", "fact", "group_id", "episodes",
                              "created_at", "expired_at", "valid_at", "invalid_at", "reference_time",
                              "attributes"):
                    assert getattr(a, field) == getattr(b, field), (query, field)
            config = NODE_HYBRID_SEARCH_RRF.model_copy(deep=True)
            config.limit = limit
            theirs_n = (await graph.graphiti.search_(query, config=config, group_ids=[gid])).nodes
            ours_n = await graph.hybrid_nodes(query, limit)
            assert [n.uuid for n in ours_n] == [n.uuid for n in theirs_n], (query, limit)
            for a, b in zip(ours_n, theirs_n, strict=True):
                for field in ("name", "group_id", "labels", "created_at", "summary", "attributes"):
                    assert getattr(a, field) == getattr(b, field), (query, field)
            compared += len(ours) + len(ours_n)
    assert compared > 100  # the queries found things: the comparison is not of empty lists


# -- a serverless call that reads the graph imports neither graphiti_core nor openai ---------------------------


@pytest.fixture(scope="module")
def default_entity(tmp_path_factory):
    """An entity on the default plugin set, with a fact in its graph (written through graphiti)."""
    tmp = tmp_path_factory.mktemp("light")
    root = tmp / "root"
    env = pps_env(root, HOME=str(tmp))
    out = pps(root, "init", "--entity", "light", "--timezone", "UTC", env=env, check=False)
    assert out.returncode == 0, out.stderr
    for op, params in [("store_message", '{"content": "Jeff brews coffee", "author_name": "Jeff", "channel": "t"}'),
                       ("texture_add_triplet", '{"source": "Jeff", "relationship": "brews", "target": "coffee", '
                                               '"fact": "Jeff brews coffee every morning"}')]:
        out = pps(root, "call", "-e", "light", op, params, env=env, check=False)
        assert out.returncode == 0, out.stderr
    return root, env


@pytest.mark.parametrize("argv", [
    ["call", "-e", "light", "texture_search", '{"query": "coffee in the morning"}'],
    ["call", "-e", "light", "ambient_recall", '{"context": "startup"}'],
    ["call", "-e", "light", "ambient_recall", '{"context": "morning coffee"}'],
    ["health", "-e", "light"],
    ["call", "-e", "light", "texture_explore", '{"entity_name": "Jeff"}'],
    ["call", "-e", "light", "texture_facts"],
], ids=["texture_search", "startup", "recall", "health", "explore", "facts"])
def test_a_serverless_read_of_the_graph_imports_neither_graphiti_nor_openai(default_entity, argv):
    root, env = default_entity
    code = ("import sys\nfrom pps_core.cli import main\n"
            f"rc = main({argv!r})\n"
            "heavy = [m for m in ('graphiti_core', 'openai') if m in sys.modules]\n"
            "print('\\nHEAVY', heavy, rc, 'kuzu' in sys.modules)\n")
    ran = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=300,
                         env=env, stdin=subprocess.DEVNULL, cwd=root)
    # Nor Kuzu itself: the engine runs in a process of its own (pps_graphiti.engine).
    assert "HEAVY [] 0 False" in ran.stdout, (ran.stdout[-2000:], ran.stderr[-2000:])
    if "texture_search" in argv or "texture_explore" in argv or "texture_facts" in argv:
        assert "Jeff brews coffee every morning" in ran.stdout  # the read ran and found the fact
