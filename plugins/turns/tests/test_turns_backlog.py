"""The turn domain words its own backlog in the startup health line: the unsummarized count and the thresholds
that say when to summarize (the original's), on every turn store; the kernel gives the key no meaning."""

import pytest
from pps_turns.layers import RawCaptureLayer, unsummarized_status


@pytest.mark.parametrize("n,status", [(0, "(healthy)"), (49, "(healthy)"), (50, "(healthy, summarization available)"),
                                      (99, "(healthy, summarization available)"), (100, "(summarization recommended)"),
                                      (199, "(summarization recommended)"), (200, "(HIGH - summarize soon!)")])
def test_unsummarized_thresholds(n, status):
    assert unsummarized_status(n) == status
    layer = object.__new__(RawCaptureLayer)
    layer._summarizer = lambda: True  # an [llm] is configured
    assert RawCaptureLayer.backlog_text(layer, "unsummarized", n) == f"{n} unsummarized messages {status}"


def test_without_an_llm_nothing_claims_summarization_is_available():
    assert unsummarized_status(60, summarizer=False) == "(healthy, enough to summarize)"
    assert unsummarized_status(150, summarizer=False) == "(summarization recommended)"


async def test_the_health_line_shows_the_turn_backlog_as_the_turn_domain_words_it(make_memory):
    memory = await make_memory(plugins=["sqlite"])
    await memory.call("store_messages", {"messages": [
        {"content": f"turn {i}", "author_name": "Jeff", "channel": "terminal"} for i in range(60)]})
    text = (await memory.call("ambient_recall", {"context": "startup"}))["text"]
    # issue 39: with no [llm] configured nothing is "available" to summarize with: the line says only that there
    # is enough to summarize (the entity summarizes through its tools, or an [llm] once one is configured)
    assert "**Memory Health**: 60 unsummarized messages (healthy, enough to summarize)\n" in text
    assert "summarization available" not in text
