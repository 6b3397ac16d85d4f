"""Session recap: tool calls collapsed by the table of reference/004, within budget, chronological,
summarized offline (extractive) or by an OpenAI-compatible LLM (a scripted server on loopback)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pps_recap.chunks import tokens
from pps_recap.collapse import collapse
from pps_recap.logs import read_log
from pps_recap.pipeline import generate
from pps_recap.summarize import ExtractiveSummarizer

from pps_core import hookimpl
from pps_core.testing.scripted_llm import ScriptedLLM

FIXTURES = Path(__file__).parent / "fixtures"
#: The fixture logs are this entity's logs (the operation reads only an entity's own logs).
OWN_LOGS = {"recap": {"logs": [str(Path(__file__).parent / "fixtures" / "*.jsonl")]}}
CLAUDE = FIXTURES / "claude_code_session.jsonl"
MINDLOOP = FIXTURES / "mindloop_session.jsonl"


@pytest.mark.parametrize("name,args,result,expected", [
    ("read", {"path": "foo.txt"}, "\n".join("x" * 15), "Read foo.txt (15 lines)."),
    ("ls", {"path": "foo"}, "bar/\nbaz.txt\n", "Listed foo: bar/, baz.txt"),
    ("recall", {"query": "X"}, "a\n---\nb\n---\nc", "Recalled 3 memories about 'X'."),
    ("recall_detail", {"chunk_id": 7}, "long text", "Retrieved full text of memory #7."),
    ("edit", {"path": "foo.txt"}, "ok", "Edited foo.txt."),
    ("write", {"path": "bar.txt", "content": "x\n" * 20}, "ok", "Wrote bar.txt (20 lines)."),
    ("remember", {"abstract": "Tea is best at 80C, never boiling."}, "#4",
     "Remembered: 'Tea is best at 80C, never boiling.'."),
    ("ask", {"message": "Deploy now?"}, "Not yet", "Asked user: 'Deploy now?'. Response: 'Not yet'."),
    ("status", {}, "tokens: 300", None),
    ("done", {"summary": "shipped v2"}, "", "Finished: 'shipped v2'."),
    ("Read", {"file_path": "/a/b.py"}, "1\tx\n2\ty", "Read /a/b.py (2 lines)."),
    ("MultiEdit", {"file_path": "/a/b.py"}, "ok", "Edited /a/b.py."),
    ("mcp__pps__anchor_save", {"content": "A fact worth keeping."}, "saved", "Remembered: 'A fact worth keeping.'."),
])
def test_tool_calls_collapse_per_the_table(name, args, result, expected):
    assert collapse(name, args, result) == expected


def test_both_log_formats_read_as_one_narrative():
    claude = read_log(CLAUDE)
    mindloop = read_log(MINDLOOP)
    for turns in (claude, mindloop):
        assert all(t.ts is not None for t in turns)
        assert [t.ts for t in turns] == sorted(t.ts for t in turns)
    assert not any("tokens used" in t.text or "[stats]" in t.text for t in mindloop)  # status, stats dropped
    assert [t.text for t in mindloop if t.role == "Tool"][:3] == [
        "Recalled 3 memories about 'chunker merge threshold'.", "Read notes/chunker.md (15 lines).",
        "Listed notes: chunker.md, merge.md, plans/, old/, todo.txt, ..."]
    assert not any("/clear" in t.text or "Caveat" in t.text for t in claude)  # wrappers and meta entries
    assert "Ran `python -m pytest -q tests/test_quoted.py tests/test_importer.py` (failed)." in [t.text for t in claude]
    assert not any("line 40" in t.text for t in claude)  # file contents are gone


@pytest.mark.parametrize("budget", [60, 120, 1000])
def test_recap_fits_the_budget_in_chronological_order(budget):
    recap = generate(CLAUDE, budget=budget, summarizer=ExtractiveSummarizer(), tz=ZoneInfo("America/Chicago"),
                     chunk_tokens=120)
    assert recap.text and tokens(recap.text) <= budget
    starts = [i.start for i in recap.items]
    assert starts == sorted(starts)
    assert recap.stats["chunks"] >= recap.stats["merged_chunks"] >= len(recap.items) >= 1
    if budget == 1000:
        assert recap.stats["selected"] == recap.stats["summaries"]
        assert "2026-03-14 04:01" in recap.text and "CDT" in recap.text  # real times, in the entity's zone
    else:  # recency wins: what is kept is the end of the session
        assert recap.items[-1].index == recap.stats["summaries"] - 1


class FakeEmbedder:
    """Every text about CSV points one way, everything else another: merging follows the vectors."""

    name, dimension = "fake", 2

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        return [[1.0, 0.0] if "csv" in t.lower() else [0.0, 1.0] for t in texts]


def test_embeddings_drive_the_merge():
    embedder = FakeEmbedder()
    recap = generate(CLAUDE, budget=1000, summarizer=ExtractiveSummarizer(), embedder=embedder, chunk_tokens=80)
    assert embedder.calls == 1 and recap.stats["similarity"] == "embeddings"
    assert recap.stats["merged_chunks"] < recap.stats["chunks"]


def _summary(messages):
    topic = "export" if "export.py" in messages[-1]["content"] else "import"
    return f"I fixed the CSV {topic} path (scripted summary)."


@pytest.fixture
def llm():
    with ScriptedLLM(_summary) as server:
        yield server


async def test_llm_summaries_through_the_session_recap_operation(make_memory, llm):
    memory = await make_memory(plugins=["sqlite", "recap"],
                               llm={"base_url": llm.base_url, "model": "scripted-1", "api_key": "sk-test"},
                               recap={"chunk_tokens": 120, **OWN_LOGS["recap"]})
    out = await memory.call("session_recap", {"log": str(CLAUDE), "budget": 400})
    assert out["summarizer"] == "llm" and out["tokens"] <= 400
    assert "(scripted summary)" in out["text"] and "llm_failures" not in out["stats"]
    assert llm.calls and all(r["path"] == "/v1/chat/completions" for r in llm.calls)
    first = llm.calls[0]
    assert first["auth"] == "Bearer sk-test" and first["body"]["model"] == "scripted-1"
    assert first["body"]["messages"][0]["role"] == "system"
    assert "line 40" not in json.dumps(llm.requests)  # the LLM never sees file contents
    assert out["written"] and Path(out["written"]).read_text().strip() == out["text"]
    startup = await memory.call("ambient_recall", {"context": "startup"})
    sections = [s["name"] for s in startup["manifest"]["sections"]]
    assert sections[0] == "Last session" and "(scripted summary)" in startup["text"]


async def test_a_failing_llm_falls_back_to_extractive(make_memory):
    with ScriptedLLM(lambda _messages: None) as server:  # every answer is HTTP 500
        memory = await make_memory(plugins=["sqlite", "recap"], llm={"base_url": server.base_url, "model": "m"}, **OWN_LOGS)
        out = await memory.call("session_recap", {"log": str(MINDLOOP), "write": False})
    assert out["stats"]["llm_failures"] >= 1 and out["text"] and out["written"] is None
    assert "merge threshold" in out["text"]


async def test_offline_extractive_recap_and_startup_regeneration(make_memory, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(MINDLOOP, logs / "session-1.jsonl")
    memory = await make_memory(plugins=["sqlite", "recap"], recap={"logs": [str(logs / "*.jsonl")]})
    assert memory.chat_model() is None
    startup = await memory.call("ambient_recall", {"context": "startup"})  # no _recap.md yet: made from the log
    assert "Last session recap" in startup["text"] and "mindloop" not in startup["text"]
    assert (memory.home / "_recap.md").exists()
    out = await memory.call("session_recap", {"summarizer": "extractive", "write": False})
    assert out["source"].endswith("session-1.jsonl") and out["summarizer"] == "extractive"
    assert any(form in out["text"] for form in ("Remembered: '", "Asked user: '", "Wrote notes/"))  # consequential


async def test_bad_recap_input_is_named(make_memory, tmp_path):
    from pps_core.errors import InvalidParams, NotFound, Unavailable

    memory = await make_memory(plugins=["sqlite", "recap"])
    with pytest.raises(InvalidParams) as err:
        await memory.call("session_recap", {"log": str(tmp_path / "missing.jsonl")})
    assert err.value.param == "log"
    with pytest.raises(NotFound):
        await memory.call("session_recap", {})
    with_logs = await make_memory("with-logs", plugins=["sqlite", "recap"], **OWN_LOGS)
    with pytest.raises(Unavailable):
        await with_logs.call("session_recap", {"log": str(CLAUDE), "summarizer": "llm"})


def _embedder_plugin(embedder):
    class Plugin:
        __pps_name__ = "fake_embedder"

        @hookimpl
        def pps_embedder(self, memory):
            return embedder

    return Plugin()


async def test_novelty_weighs_against_existing_memories(make_memory):
    memory = await make_memory(plugins=["sqlite", "crystals", "recap"], **OWN_LOGS)
    await memory.call("crystallize", {"content": "I fixed the CSV import path with the csv module."})
    out = await memory.call("session_recap", {"log": str(CLAUDE), "novelty": True, "write": False})
    assert out["stats"].get("novelty") is True and out["text"]


async def test_the_operation_uses_the_entitys_embedder(make_memory):
    embedder = FakeEmbedder()
    memory = await make_memory(plugins=["sqlite", "recap"], extra_plugins=[_embedder_plugin(embedder)], **OWN_LOGS)
    out = await memory.call("session_recap", {"log": str(CLAUDE), "write": False})
    assert out["stats"]["similarity"] == "embeddings" and embedder.calls >= 1


async def test_the_operation_reads_only_the_entitys_own_logs(make_memory, tmp_path):
    """A caller holding this entity's token cannot recap any file the server can read."""
    from pps_core.errors import InvalidParams

    other = tmp_path / "someone-else" / "session.jsonl"
    other.parent.mkdir()
    shutil.copy(CLAUDE, other)
    memory = await make_memory(plugins=["sqlite", "recap"])
    with pytest.raises(InvalidParams) as err:
        await memory.call("session_recap", {"log": str(other), "write": False})
    assert err.value.param == "log" and "not one of this entity's session logs" in err.value.message
    mine = memory.home / "logs" / "session.jsonl"
    mine.parent.mkdir(exist_ok=True)
    shutil.copy(CLAUDE, mine)
    assert (await memory.call("session_recap", {"log": str(mine), "write": False}))["text"]
