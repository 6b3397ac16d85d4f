"""The startup health line advises graph ingestion only when an LLM can do it (issue 23)."""

from pps_core import Memory
from pps_core.settings import load_settings


async def _layer(tmp_path, **llm):
    settings = load_settings("g", tmp_path / "g", plugins=["sqlite", "embeddings", "graphiti"], timezone="UTC",
                             **({"llm": llm} if llm else {}))
    memory = await Memory(settings, lazy=True).open()  # builds the layer; opens no graph
    return memory, memory.pm.get_plugin("graphiti:entity").layer  # the layer its entity object built


async def test_no_ingestion_advice_without_an_llm(tmp_path):
    memory, layer = await _layer(tmp_path)
    try:
        assert layer.backlog_note("uningested", 30) == "(graph ingestion is off: no [llm] configured)"
        assert "recommended" not in layer.backlog_note("uningested", 500)
        assert layer.backlog_note("uningested", 0) == "(healthy)"
    finally:
        await memory.close()


async def test_the_original_thresholds_with_an_llm(tmp_path):
    memory, layer = await _layer(tmp_path, base_url="http://127.0.0.1:9/v1", model="m")
    try:
        assert layer.backlog_note("uningested", 19) == "(healthy)"
        assert layer.backlog_note("uningested", 20) == "(batch ingestion recommended)"
        assert layer.backlog_note("uningested", 99) == "(batch ingestion recommended)"
        assert layer.backlog_note("uningested", 100) == "(HIGH - ingest soon!)"
        assert layer.backlog_note("something_else", 100) is None
    finally:
        await memory.close()
