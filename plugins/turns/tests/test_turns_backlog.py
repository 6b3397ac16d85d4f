"""The turn domain words its own backlog in the startup health line: the unsummarized count and the thresholds
that say when to summarize (the original's), on every turn store; the kernel gives the key no meaning."""

import pytest
from pps_turns.layers import RawCaptureLayer, unsummarized_status


@pytest.mark.parametrize("n,status", [(0, "(healthy)"), (49, "(healthy)"), (50, "(healthy, summarization available)"),
                                      (99, "(healthy, summarization available)"), (100, "(summarization recommended)"),
                                      (199, "(summarization recommended)"), (200, "(HIGH - summarize soon!)")])
def test_unsummarized_thresholds(n, status):
    assert unsummarized_status(n) == status
    assert RawCaptureLayer.backlog_text(object.__new__(RawCaptureLayer), "unsummarized", n) == \
        f"{n} unsummarized messages {status}"


async def test_the_health_line_shows_the_turn_backlog_as_the_turn_domain_words_it(make_memory):
    memory = await make_memory(plugins=["sqlite"])
    await memory.call("store_messages", {"messages": [
        {"content": f"turn {i}", "author_name": "Jeff", "channel": "terminal"} for i in range(60)]})
    text = (await memory.call("ambient_recall", {"context": "startup"}))["text"]
    assert "**Memory Health**: 60 unsummarized messages (healthy, summarization available)\n" in text
