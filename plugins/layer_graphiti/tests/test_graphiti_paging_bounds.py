"""No parameter value can crash the process: every graph listing at its largest allowed offset and limit.

Kuzu 0.11.3 (and LadybugDB 0.22.0) segfault on some ``SKIP`` values past the end of the rows (an offset above
about 8,300 on a three-fact graph): ``texture_entities`` or ``texture_facts`` with such an offset took the whole
process down (exit 139), and on ``pps serve http --entities a,b`` every entity with it. The bounds are read from
the operations' own parameter schemas, so a wider bound is tested too.
"""

from __future__ import annotations

import json

from pps_graphiti.operations import EntitiesParams, FactsParams, TextureSearchParams

from pps_core.testing.server import pps


def _max(model, field: str) -> int:
    prop = model.model_json_schema()["properties"][field]
    return int(prop["maximum"] if "maximum" in prop else next(o["maximum"] for o in prop["anyOf"] if "maximum" in o))


def test_graph_listings_at_their_largest_offset_and_limit_answer_and_do_not_crash(tmp_path):
    root = tmp_path / "root"
    pps(root, "init", "--entity", "g", "--plugins", "sqlite,embeddings,graphiti", "--timezone", "UTC")
    for source, target in (("Ada", "Lamp"), ("Ada", "Tower"), ("Bo", "Lamp")):
        pps(root, "call", "--entity", "g", "texture_add_triplet",
            json.dumps({"source": source, "relationship": "TENDS", "target": target}))
    calls = [
        ("texture_entities", {"offset": _max(EntitiesParams, "offset"), "limit": _max(EntitiesParams, "limit")}),
        ("texture_facts", {"offset": _max(FactsParams, "offset"), "limit": _max(FactsParams, "limit")}),
        ("texture_entities", {"offset": 9000, "limit": 1}),
        ("texture_facts", {"offset": 9000, "limit": 1}),
        ("texture_search", {"query": "who tends the lamp", "offset": _max(TextureSearchParams, "offset"),
                            "limit": _max(TextureSearchParams, "limit"),
                            "node_limit": _max(TextureSearchParams, "node_limit")}),
    ]
    for name, params in calls:
        done = pps(root, "call", "--entity", "g", name, json.dumps(params), check=False)
        assert done.returncode == 0, f"{name} {params}: exit {done.returncode}\n{done.stderr[-2000:]}"
        out = json.loads(done.stdout)
        assert out["count"] == 0, (name, out)  # past the end: an empty page
        if name != "texture_search":
            assert out["total"] == (4 if name == "texture_entities" else 3)
    # The pages below the end still hold every entity and fact once, in order.
    entities = json.loads(pps(root, "call", "--entity", "g", "texture_entities", '{"offset": 1, "limit": 2}').stdout)
    assert [e["name"] for e in entities["entities"]] == ["Lamp", "Bo"]
    facts = json.loads(pps(root, "call", "--entity", "g", "texture_facts", '{"offset": 1, "limit": 5}').stdout)
    assert [(f["subject"], f["object"]) for f in facts["facts"]] == [("Ada", "Tower"), ("Bo", "Lamp")]
    assert facts["next_offset"] is None
