"""Automatic upkeep through a scripted OpenAI-compatible server on loopback."""

import re

import pytest

from pps_core.errors import Unavailable
from pps_core.testing.scripted_llm import ScriptedLLM


def summarizer(messages):
    transcript = messages[-1]["content"]
    speakers = sorted(set(re.findall(r"\] ([^:\]]+): ", transcript)))
    return f"{' and '.join(speakers)} talked ({transcript.count(chr(10)) + 1} turns)."


async def seed(memory, n):
    await memory.call("store_messages", {"messages": [
        {"content": f"turn {i} about the garden", "author_name": ["Jeff", "Lyra", "Dr. Brandi O'Neil"][i % 3],
         "channel": "terminal" if i % 2 else "discord:home", "created_at": f"2026-01-26T{i // 60:02d}:{i % 60:02d}:00"}
        for i in range(n)]})


async def test_upkeep_summarizes_until_under_target_and_marks_every_turn(make_memory):
    with ScriptedLLM(summarizer) as llm:
        m = await make_memory(plugins=["sqlite", "upkeep"], llm={"base_url": llm.base_url, "model": "m"},
                              upkeep={"target_unsummarized": 20, "batch_size": 30})
        await seed(m, 130)
        out = await m.call("pps_upkeep", {})
        assert out["unsummarized_count"] <= 20 and out["summaries_written"] == 4
        assert out["turns_covered"] == 110
        stats = await m.call("summary_stats")
        assert stats["unsummarized_count"] == 20 and stats["summary_count"] == 4
        sums = (await m.call("get_recent_summaries", {"limit": 10}))["summaries"]
        assert sum(s["message_count"] for s in sums) == 110
        assert all("Dr. Brandi O'Neil" in s["summary_text"] for s in sums)  # names verbatim from authors
        left = await m.call("get_turns_since_summary", {"limit": 100, "oldest_first": True})
        assert [t["id"] for t in left["turns"]] == list(range(111, 131))
        assert len(llm.requests) == 4 and "add no facts" in llm.requests[0]["messages"][0]["content"]


async def test_upkeep_without_llm_says_so_and_changes_nothing(make_memory):
    m = await make_memory(plugins=["sqlite", "upkeep"])
    await seed(m, 60)
    with pytest.raises(Unavailable, match="no LLM is configured"):
        await m.call("pps_upkeep", {})
    assert (await m.call("summary_stats"))["summary_count"] == 0


async def test_upkeep_with_a_failing_llm_stores_nothing_half_done(make_memory):
    m = await make_memory(plugins=["sqlite", "upkeep"], llm={"base_url": "http://127.0.0.1:9/v1", "model": "m", "timeout_s": 2})
    await seed(m, 80)
    with pytest.raises(Unavailable, match="failed"):
        await m.call("pps_upkeep", {})
    assert (await m.call("summary_stats"))["unsummarized_count"] == 80


async def test_backfilled_turn_is_never_swallowed_by_upkeep(make_memory):
    with ScriptedLLM(summarizer) as llm:
        m = await make_memory(plugins=["sqlite", "upkeep"], llm={"base_url": llm.base_url, "model": "m"})
        await seed(m, 100)
        late = await m.call("store_message", {"content": "backfilled email from last year", "author_name": "Bank",
                                              "channel": "email", "created_at": "2025-01-01T00:00:00"})
        await m.call("pps_upkeep", {"target": 1, "batch_size": 50})
        left = await m.call("get_turns_since_summary", {})
        assert [t["id"] for t in left["turns"]] == [100]  # the newest by time stays; time order (issue 13)
        # the backfilled turn is the oldest by time, so it went into the first batch the summarizer read
        assert "backfilled email from last year" in llm.requests[0]["messages"][-1]["content"]
        first = (await m.call("get_turns_since", {"timestamp": "2024-12-31T00:00:00"}))["messages"][0]
        assert first["id"] == late["id"] and first["summary_id"] is not None


async def test_upkeep_summarizes_with_a_third_party_chat_model(make_memory):
    """No [llm], no HTTP: a provider plugin of its own (``pps_chat_model``) is the model upkeep uses."""
    from pps_core import hookimpl

    asked = []

    class Model:
        name = "in-process"

        def complete(self, system, user, temperature=0.2):
            asked.append(user)
            return summarizer([{"content": user}])

    class Provider:
        __pps_name__ = "my_provider"

        @hookimpl
        def pps_chat_model(self, settings, model):
            return Model()

    m = await make_memory(plugins=["sqlite", "upkeep"], extra_plugins=[Provider()],
                          upkeep={"target_unsummarized": 10, "batch_size": 20})
    await seed(m, 30)
    out = await m.call("pps_upkeep", {})
    assert out["summaries_written"] == 1 and out["turns_covered"] == 20 and len(asked) == 1


async def test_an_older_config_without_the_llm_plugin_still_uses_its_llm_section(make_memory):
    """pps.toml files written before the chat model became the ``llm`` plugin list upkeep without it: upkeep
    requires it (PPS_REQUIRES), so ``[llm]`` keeps working."""
    with ScriptedLLM(summarizer) as llm:
        m = await make_memory(plugins=["sqlite", "upkeep"], llm={"base_url": llm.base_url, "model": "m"},
                              upkeep={"target_unsummarized": 10, "batch_size": 20})
        assert m.pm.get_plugin("llm") is not None and "llm" not in m.settings.plugins
        await seed(m, 30)
        assert (await m.call("pps_upkeep", {}))["summaries_written"] == 1 and len(llm.requests) == 1
