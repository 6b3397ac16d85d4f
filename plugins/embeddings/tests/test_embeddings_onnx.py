"""The local embedder with the real model: the pinned file, sentence-transformers' pipeline, no torch."""

import os
import threading

import pytest
from pps_embeddings.onnx import ModelFileError, OnnxEmbedder, shared_embedder
from pps_embeddings.settings import EmbeddingSettings

from pps_core import Memory
from pps_core.embedding import Embedder


def _dot(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def embedder():
    return shared_embedder(EmbeddingSettings())


def test_memory_gets_the_onnx_embedder_from_the_hook(tmp_path):
    memory = Memory.for_entity("e", home=tmp_path, plugins=["embeddings"])

    async def run():
        async with memory:
            e = memory.embedder
            assert isinstance(e, Embedder)
            assert e.name == "onnx:all-MiniLM-L6-v2-onnx-int8" and e.dimension == 384
            assert e is memory.embedder
    import asyncio

    asyncio.run(run())
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "1"


def test_vectors_are_unit_length_and_384_wide(embedder):
    vectors = embedder.embed(["hello", "", "ünïcödé and emoji 🌙", "word " * 1000])
    assert len(vectors) == 4
    for v in vectors:
        assert len(v) == 384
        assert abs(_dot(v, v) - 1.0) < 1e-4
    assert embedder.embed([]) == []


def test_same_vectors_as_the_published_fp32_model(embedder):
    # First dimensions of all-MiniLM-L6-v2 for this sentence, as printed on its model card (fp32);
    # the int8 file stays within a few thousandths.
    v = embedder.embed(["This is an example sentence"])[0]
    published = [0.0676569, 0.0634960, 0.0487131, 0.0793050, 0.0374481, 0.0026528]
    for ours, ref in zip(v[:6], published, strict=True):
        assert abs(ours - ref) < 0.006


def test_meaning_not_spelling(embedder):
    cat, kitten, revenue = embedder.embed(["The cat sits on the mat", "A kitten is resting on a rug",
                                           "Quarterly revenue grew by eight percent"])
    assert _dot(cat, kitten) > 0.5
    assert _dot(cat, kitten) > _dot(cat, revenue) + 0.4


def test_batching_and_padding_do_not_change_a_vector(embedder):
    texts = [f"sentence number {i} " + "with more words " * (i % 7) for i in range(50)]
    alone = [embedder.embed([t])[0] for t in texts[:5]]
    batched = embedder.embed(texts)
    for a, b in zip(alone, batched[:5], strict=True):
        assert _dot(a, b) > 0.9999


def test_concurrent_first_use_loads_once_and_agrees(tmp_path):
    e = OnnxEmbedder(batch_size=8)
    results, errors = [], []

    def work():
        try:
            results.append(e.embed(["the river remembers", "one river, many channels"]))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    for r in results[1:]:
        assert _dot(r[0], results[0][0]) > 0.9999


def test_one_loaded_model_per_process_and_configuration():
    a = shared_embedder(EmbeddingSettings())
    assert shared_embedder(EmbeddingSettings()) is a
    assert shared_embedder(EmbeddingSettings(batch_size=8)) is not a


def test_a_model_file_that_is_not_the_pinned_one_is_refused(tmp_path):
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    with pytest.raises(ModelFileError, match="not the pinned file"):
        OnnxEmbedder(fake).embed(["x"])
    with pytest.raises(ModelFileError, match="does not exist"):
        OnnxEmbedder(tmp_path / "missing.onnx").embed(["x"])


def test_non_text_input_is_a_clear_error(embedder):
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        embedder.embed(["fine", 3])
