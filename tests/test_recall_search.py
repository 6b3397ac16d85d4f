"""Non-startup ambient_recall: every layer searched concurrently, fused, failures isolated (fake layers)."""

import pytest

from pps_core import InvalidParams, SearchResult
from pps_core.testing import ScriptedLayer, broken_layer_plugin, layer_plugin


def scripted(*layers):
    return [layer_plugin(*layers)]


async def test_all_layers_searched_and_fused(make_memory):
    turns = ScriptedLayer("turns", ["Brandi says cedar for the garden beds", "lunch plans"], title="Raw capture")
    crystals = ScriptedLayer("crystals", ["Session: cedar beds decided."], title="Crystals")
    notes = ScriptedLayer("notes", ["the cedar beds need oil", "unrelated tax thing"])
    empty = ScriptedLayer("summaries", [])
    m = await make_memory(plugins=[], extra_plugins=scripted(turns, crystals, notes, empty))
    out = await m.call("ambient_recall", {"context": "cedar beds", "limit_per_layer": 3})
    assert {r["layer"] for r in out["results"]} == {"turns", "crystals", "notes"}
    assert {s["layer"]: s["status"] for s in out["layers"]} == {
        "turns": "ok", "crystals": "ok", "notes": "ok", "summaries": "ok"}
    assert all(set(r) == {"layer", "content", "source", "score", "timestamp", "metadata"} for r in out["results"])
    explained = await m.call("ambient_recall", {"context": "cedar beds", "limit_per_layer": 3, "explain": True})
    fused = [r["fused_score"] for r in explained["results"]]
    assert fused == sorted(fused, reverse=True)
    assert all("layer_score" in r["metadata"] for r in explained["results"])
    assert "Raw capture: " in out["text"] and "Crystals: " in out["text"] and "tax" not in out["text"]


async def test_limit_per_layer(make_memory):
    m = await make_memory(plugins=[], extra_plugins=scripted(ScriptedLayer("docs", [f"garden {i}" for i in range(10)])))
    out = await m.call("ambient_recall", {"context": "garden", "limit_per_layer": 4})
    assert len([r for r in out["results"] if r["layer"] == "docs"]) == 4


async def test_a_broken_layer_is_reported_and_the_rest_answers(make_memory):
    m = await make_memory(plugins=[], extra_plugins=[*scripted(ScriptedLayer("docs", ["the kettle is broken"])),
                                                     broken_layer_plugin("anchors", "chroma is down")])
    out = await m.call("ambient_recall", {"context": "kettle"})
    status = {s["layer"]: s for s in out["layers"]}
    assert status["anchors"]["status"] == "unavailable" and "chroma is down" in status["anchors"]["detail"]
    assert "kettle" in out["text"] and "Unavailable: anchors: unavailable (ConnectionError: chroma is down)" in out["text"]
    health = await m.call("pps_health")
    assert health["ok"] is False and health["layers"]["anchors"]["available"] is False
    assert health["layers"]["docs"]["available"] is True


async def test_an_erroring_and_a_slow_layer_never_fail_the_call(make_memory):
    bad = ScriptedLayer("bad", ["x"], fail="index corrupted")
    slow = ScriptedLayer("slow", ["kettle"])
    m = await make_memory(plugins=[], extra_plugins=scripted(ScriptedLayer("docs", ["the kettle"]), bad, slow),
                          recall={"layer_timeout_s": 0.3})
    await m.call("ambient_recall", {"context": "kettle"})  # every layer has answered once: warm, not warming up
    slow.delay = 3  # then stuck
    out = await m.call("ambient_recall", {"context": "kettle"})
    status = {s["layer"]: s["status"] for s in out["layers"]}
    assert status == {"bad": "error", "slow": "timeout", "docs": "ok"}
    assert "the kettle" in out["text"] and out["latency_ms"] < 2500


async def test_a_layer_past_its_own_budget_is_reported_and_the_others_answer(make_memory):
    """Issue 26: ``[recall] layer_budget_ms`` gives one layer a budget of its own (under the common timeout)."""
    graph = ScriptedLayer("graph", ["kettle fact"])
    m = await make_memory(plugins=[], extra_plugins=scripted(
        ScriptedLayer("docs", ["the kettle"]), graph,
        ScriptedLayer("anchors", ["kettle photo"], delay=0.3)), recall={"layer_budget_ms": {"graph": 200}})
    await m.call("ambient_recall", {"context": "kettle"})  # warm: a first answer gets [recall] warmup_timeout_s
    graph.delay = 1.5
    out = await m.call("ambient_recall", {"context": "kettle"})
    status = {s["layer"]: s for s in out["layers"]}
    assert {k: v["status"] for k, v in status.items()} == {"docs": "ok", "graph": "timeout", "anchors": "ok"}
    assert status["graph"]["detail"] == "no answer within 0.2s" and status["graph"]["latency_ms"] < 1000
    assert {r["layer"] for r in out["results"]} == {"docs", "anchors"}
    with pytest.raises(Exception, match="positive"):
        await make_memory("other", plugins=[], recall={"layer_budget_ms": {"graph": 0}})


async def test_recall_layers_can_be_restricted_by_config(make_memory):
    m = await make_memory(plugins=[], recall={"layers": ["crystals"]}, extra_plugins=scripted(
        ScriptedLayer("turns", ["kettle"]), ScriptedLayer("crystals", ["kettle crystal"])))
    out = await m.call("ambient_recall", {"context": "kettle"})
    assert {r["layer"] for r in out["results"]} == {"crystals"}


async def test_blank_context_is_refused(make_memory):
    m = await make_memory(plugins=[])
    with pytest.raises(InvalidParams) as err:
        await m.call("ambient_recall", {"context": "   "})
    assert err.value.param == "context"


async def test_weak_matches_below_a_layers_floor_are_left_out(make_memory):
    class Semantic(ScriptedLayer):
        min_recall_score = 0.5

        async def search(self, query, limit, offset=0):
            return [SearchResult(layer=self.name, content="coffee at dawn", source="a", score=0.05),
                    SearchResult(layer=self.name, content="cedar beds", source="b", score=0.8)][:limit]

    m = await make_memory(plugins=[], extra_plugins=scripted(Semantic("anchors")))
    out = await m.call("ambient_recall", {"context": "garden wood"})
    assert [r["content"] for r in out["results"] if r["layer"] == "anchors"] == ["cedar beds"]
    loose = await make_memory("other", plugins=[], extra_plugins=scripted(Semantic("anchors")),
                              recall={"min_score": {"anchors": 0.0}})
    out = await loose.call("ambient_recall", {"context": "garden wood"})
    assert len([r for r in out["results"] if r["layer"] == "anchors"]) == 2


async def test_a_budget_is_filled_with_the_best_results_not_five_per_layer(make_memory):
    """Issue 40: without a limit_per_layer, a search shows as many of each layer's best results as its budget
    holds (in fused order), not five whatever the budget; an explicit limit still holds."""
    m = await make_memory(plugins=[], extra_plugins=scripted(ScriptedLayer("docs", [f"garden {i}" for i in range(30)])))
    small = await m.call("ambient_recall", {"context": "garden", "budget": 2000})
    large = await m.call("ambient_recall", {"context": "garden", "budget": 4000})
    assert len(small["text"]) <= 2000 and len(large["text"]) <= 4000
    assert 5 < len(small["results"]) < len(large["results"])
    assert [r["content"] for r in large["results"]][:len(small["results"])] == [r["content"] for r in small["results"]]
    limited = await m.call("ambient_recall", {"context": "garden", "budget": 4000, "limit_per_layer": 4})
    assert len(limited["results"]) == 4
