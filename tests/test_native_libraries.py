"""The native libraries of the default plugins live in one process in either order.

usearch 2.26.2 and later (the SQLite store's turn vector index) crash the process with SIGSEGV when onnxruntime
(the local embedder) is imported after them: libstdc++'s locale facets, at onnxruntime's module initialisation.
A process loads the index first whenever its first dense work is not a query embedding, e.g. ``pps reindex`` of
an entity past ``[sqlite] ann_threshold`` whose turn vectors are complete and whose summaries still need
embedding. ``pps-sqlite`` excludes those usearch releases; this test is what tells the next one apart.
"""

import subprocess
import sys

import pytest

INDEX_FIRST = """
import numpy as np
from pps_sqlite.ann import TurnANN
from pps_embeddings.onnx import OnnxEmbedder

ann = TurnANN(__import__("pathlib").Path("unused.db"), "m", 384)
rng = np.random.default_rng(0)
vecs = rng.standard_normal((50, 384)).astype(np.float32)
ann.add(list(range(1, 51)), vecs / np.linalg.norm(vecs, axis=1, keepdims=True), ["terminal:a"] * 50)
q = np.asarray(OnnxEmbedder().embed(["the index was loaded before the model"])[0], dtype=np.float32)
ids, cos = ann.search(q, 5)
print(len(q), len(ids))
"""

EMBEDDER_FIRST = """
import numpy as np
from pps_embeddings.onnx import OnnxEmbedder
q = np.asarray(OnnxEmbedder().embed(["the model was loaded before the index"])[0], dtype=np.float32)
from pps_sqlite.ann import TurnANN
ann = TurnANN(__import__("pathlib").Path("unused.db"), "m", 384)
ann.add([1, 2], np.stack([q, -q]), ["terminal:a"] * 2)
ids, cos = ann.search(q, 1)
print(len(q), int(ids[0]))
"""


@pytest.mark.parametrize(("script", "expected"), [(INDEX_FIRST, "384 5"), (EMBEDDER_FIRST, "384 1")],
                         ids=["index-then-embedder", "embedder-then-index"])
def test_the_turn_index_and_the_local_embedder_share_a_process(script, expected, tmp_path):
    done = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split() == expected.split()


def test_reindex_of_a_large_entity_whose_summaries_need_vectors(tmp_path):
    """The path a user took to the crash: turn vectors complete, the index built, a summary stored without its
    vector; ``pps reindex`` then repairs the turn index (usearch) before it embeds the summary (onnxruntime)."""
    import json

    from pps_core.testing.server import init_entity, pps

    init_entity(tmp_path, "rx", "sqlite,embeddings", "[sqlite]", "ann_threshold = 10")
    turns = [{"content": f"turn {i} about the garden and the tomatoes", "author_name": "Ann", "channel": "terminal:a"}
             for i in range(15)]
    pps(tmp_path, "call", "-e", "rx", "--local", "store_messages", json.dumps({"messages": turns}))
    pps(tmp_path, "reindex", "-e", "rx", "--local")  # every turn embedded, the HNSW index built
    assert (tmp_path / "rx" / "pps.db.turns.usearch").exists()
    pps(tmp_path, "call", "-e", "rx", "--local", "store_summary",
        json.dumps({"summary_text": "Ann talked about her garden and the tomatoes", "message_ids": list(range(1, 11))}))
    done = pps(tmp_path, "reindex", "-e", "rx", "--local", check=False)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    found = json.loads(pps(tmp_path, "call", "-e", "rx", "--local", "search_summaries",
                           json.dumps({"query": "vegetables Ann grows"})).stdout)
    assert "garden" in json.dumps(found)
