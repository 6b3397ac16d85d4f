"""Non-startup ambient_recall: every layer searched concurrently, fused, failures isolated."""

from pps_core.testing import ScriptedLayer, broken_layer_plugin, layer_plugin


async def test_all_layers_searched_and_fused(make_memory):
    notes = ScriptedLayer("notes", ["the cedar beds need oil", "unrelated tax thing"])
    m = await make_memory(plugins=["sqlite", "crystals"], extra_plugins=[layer_plugin(notes)])
    await m.call("store_message", {"content": "Brandi says cedar for the garden beds", "author_name": "Jeff",
                                   "channel": "discord"})
    await m.call("crystallize", {"content": "Session: cedar beds decided."})
    out = await m.call("ambient_recall", {"context": "cedar beds", "limit_per_layer": 3})
    layers = {r["layer"] for r in out["results"]}
    assert layers == {"raw_capture", "crystallization", "notes"}
    assert {s["layer"]: s["status"] for s in out["layers"]} == {
        "raw_capture": "ok", "message_summaries": "ok", "crystallization": "ok", "notes": "ok"}
    fused = [r["fused_score"] for r in out["results"]]
    assert fused == sorted(fused, reverse=True)
    assert all("layer_score" in r["metadata"] for r in out["results"])
    assert "Raw capture: " in out["text"] and "Crystals: " in out["text"] and "tax" not in out["text"]


async def test_limit_per_layer(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_messages", {"messages": [
        {"content": f"garden {i}", "author_name": "A", "channel": "c"} for i in range(10)]})
    out = await m.call("ambient_recall", {"context": "garden", "limit_per_layer": 4})
    assert len([r for r in out["results"] if r["layer"] == "raw_capture"]) == 4


async def test_a_broken_layer_is_reported_and_the_rest_answers(make_memory):
    m = await make_memory(plugins=["sqlite"], extra_plugins=[broken_layer_plugin("core_anchors", "chroma is down")])
    await m.call("store_message", {"content": "the kettle is broken", "author_name": "A", "channel": "c"})
    out = await m.call("ambient_recall", {"context": "kettle"})
    status = {s["layer"]: s for s in out["layers"]}
    assert status["core_anchors"]["status"] == "unavailable" and "chroma is down" in status["core_anchors"]["detail"]
    assert "kettle" in out["text"] and "Unavailable: core_anchors: unavailable (ConnectionError: chroma is down)" in out["text"]
    health = await m.call("pps_health")
    assert health["ok"] is False and health["layers"]["core_anchors"]["available"] is False
    assert health["layers"]["raw_capture"]["available"] is True


async def test_an_erroring_and_a_slow_layer_never_fail_the_call(make_memory):
    bad = ScriptedLayer("bad", ["x"], fail="index corrupted")
    slow = ScriptedLayer("slow", ["kettle"], delay=3)
    m = await make_memory(plugins=["sqlite"], extra_plugins=[layer_plugin(bad, slow)],
                          recall={"layer_timeout_s": 0.3})
    await m.call("store_message", {"content": "the kettle", "author_name": "A", "channel": "c"})
    out = await m.call("ambient_recall", {"context": "kettle"})
    status = {s["layer"]: s["status"] for s in out["layers"]}
    assert status["bad"] == "error" and status["slow"] == "timeout" and status["raw_capture"] == "ok"
    assert out["latency_ms"] < 2500


async def test_recall_layers_can_be_restricted_by_config(make_memory):
    m = await make_memory(plugins=["sqlite", "crystals"], recall={"layers": ["crystallization"]})
    await m.call("store_message", {"content": "kettle", "author_name": "A", "channel": "c"})
    await m.call("crystallize", {"content": "kettle crystal"})
    out = await m.call("ambient_recall", {"context": "kettle"})
    assert {r["layer"] for r in out["results"]} == {"crystallization"}


async def test_blank_context_is_refused(make_memory):
    import pytest

    from pps_core.errors import InvalidParams

    m = await make_memory(plugins=["sqlite"])
    with pytest.raises(InvalidParams) as err:
        await m.call("ambient_recall", {"context": "   "})
    assert err.value.param == "context"


async def test_weak_matches_below_a_layers_floor_are_left_out(make_memory):
    class Semantic(ScriptedLayer):
        min_recall_score = 0.5

        async def search(self, query, limit, offset=0):
            from pps_core.models import SearchResult

            return [SearchResult(layer=self.name, content="coffee at dawn", source="a", score=0.05),
                    SearchResult(layer=self.name, content="cedar beds", source="b", score=0.8)][:limit]

    m = await make_memory(plugins=["sqlite"], extra_plugins=[layer_plugin(Semantic("anchors"))])
    out = await m.call("ambient_recall", {"context": "garden wood"})
    assert [r["content"] for r in out["results"] if r["layer"] == "anchors"] == ["cedar beds"]
    loose = await make_memory("other", plugins=["sqlite"], extra_plugins=[layer_plugin(Semantic("anchors"))],
                              recall={"min_score": {"anchors": 0.0}})
    out = await loose.call("ambient_recall", {"context": "garden wood"})
    assert len([r for r in out["results"] if r["layer"] == "anchors"]) == 2
