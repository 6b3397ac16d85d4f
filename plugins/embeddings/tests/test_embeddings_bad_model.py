"""A model file that is missing or not the pinned one: searches fail as 'unavailable' naming the file, not a 500."""

import pytest

from pps_core.errors import Unavailable


@pytest.mark.parametrize("content", [None, b"not the model"])
async def test_a_wrong_or_missing_model_file_is_unavailable(make_memory, tmp_path, content):
    model = tmp_path / "model.onnx"
    if content is not None:
        model.write_bytes(content)
    memory = await make_memory(plugins=["chroma", "embeddings"], embeddings={"model_path": str(model)})
    saved = await memory.call("anchor_save", {"title": "Harbour", "content": "boats in the harbour"})
    assert saved["indexed"] is False and str(model) in saved["detail"]
    with pytest.raises(Unavailable) as caught:
        await memory.call("anchor_search", {"query": "boats"})
    assert str(model) in caught.value.message
