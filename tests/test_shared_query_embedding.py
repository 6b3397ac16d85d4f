"""Issue 26: a recall embeds its context once, not once per layer that searches by meaning.

The turn search, the summary search and the word-photo search each embed the query: three runs of the model on
the same text, at the same moment, on a machine whose cores the layers share. ``memory.embedder`` now hands every
layer the same vector (pps_core.embedding.SharedQueries); real ONNX model, real layers.
"""

import threading

import pytest

from pps_core.embedding import SharedQueries


def count_runs(memory) -> list[list[str]]:
    """Every call that reaches the model itself (under the shared wrapper), with its texts."""
    inner = memory.embedder.inner
    runs: list[list[str]] = []
    real = inner.embed

    def counted(texts):
        runs.append(list(texts))
        return real(texts)

    inner.embed = counted
    return runs


async def test_a_recall_runs_the_model_once_for_its_context(make_memory):
    m = await make_memory(plugins=["sqlite", "embeddings", "chroma"])
    await m.call("store_messages", {"messages": [
        {"content": f"turn {i}: the violin needs new strings", "author_name": "Jeff", "channel": "terminal"}
        for i in range(40)]})
    await m.call("store_summary", {"summary_text": "Jeff restrung the violin", "start_id": 1, "end_id": 30})
    await m.call("anchor_save", {"title": "violin", "content": "The violin sat by the window, strings new."})
    await m.call("raw_search", {"query": "warm up", "limit": 1})  # turn and summary vectors exist now
    await m.call("search_summaries", {"query": "warm up"})
    runs = count_runs(m)
    context = "when did Jeff change the violin strings?"
    out = await m.call("ambient_recall", {"context": context})
    assert {s["layer"] for s in out["layers"] if s["status"] == "ok"} >= {"raw_capture", "message_summaries",
                                                                          "core_anchors"}
    assert {r["layer"] for r in out["results"]} >= {"raw_capture", "message_summaries"}
    assert runs.count([context]) == 1, runs


def test_concurrent_asks_share_one_run_and_a_failure_reaches_every_asker():
    from pps_embeddings.onnx import OnnxEmbedder

    model = OnnxEmbedder()
    gate = threading.Event()
    runs: list[list[str]] = []

    class Slow:  # the real model, held at the gate so that every asker is in flight at once
        name, dimension = model.name, model.dimension

        def embed(self, texts):
            runs.append(list(texts))
            gate.wait(10)
            return model.embed(texts)

    shared = SharedQueries(Slow())
    got: list[list[list[float]]] = []
    askers = [threading.Thread(target=lambda: got.append(shared.embed(["the violin"]))) for _ in range(4)]
    for t in askers:
        t.start()
    while not runs:
        threading.Event().wait(0.01)
    threading.Event().wait(0.2)  # the others ask meanwhile
    gate.set()
    for t in askers:
        t.join(10)
    assert runs == [["the violin"]] and len(got) == 4
    assert all(g == got[0] for g in got) and got[0] == model.embed(["the violin"])
    assert shared.embed(["a", "b"]) == model.embed(["a", "b"])  # a batch passes through
    assert len(runs) == 2

    class Broken:
        name, dimension = "broken", 3

        def embed(self, texts):
            raise RuntimeError("model file unreadable")

    with pytest.raises(RuntimeError, match="unreadable"):
        SharedQueries(Broken()).embed(["x"])


def test_a_kept_vector_expires():
    from pps_embeddings.onnx import OnnxEmbedder

    model = OnnxEmbedder()
    runs: list[list[str]] = []

    class Counted:
        name, dimension = model.name, model.dimension

        def embed(self, texts):
            runs.append(list(texts))
            return model.embed(texts)

    shared = SharedQueries(Counted(), ttl_s=0.05)
    shared.embed(["garden"])
    shared.embed(["garden"])
    assert len(runs) == 1
    threading.Event().wait(0.1)
    shared.embed(["garden"])
    assert len(runs) == 2
    shared.clear()
    shared.embed(["garden"])
    assert len(runs) == 3
