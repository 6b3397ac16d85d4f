"""A recap that says where you left off (reference/004: recency weighting, the end of the session is the
unfinished work): a 4-topic, 160-minute session keeps its last topic, last; a session ending on a
failing test names the failure and the next step the session stated. Offline and through an LLM."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pps_llm.client import ChatClient
from pps_recap.chunks import tokens
from pps_recap.pipeline import generate
from pps_recap.summarize import ExtractiveSummarizer, LLMSummarizer

from pps_core.testing.scripted_llm import ScriptedLLM

TOPICS = [
    ("csv importer", "importer.py", "quoted fields with commas", "csv.reader with quotechar"),
    ("export path", "export.py", "semicolon delimiters for the export", "a delimiter option"),
    ("retry queue", "queue.py", "jobs retried forever after a timeout", "exponential backoff capped at five tries"),
    ("auth middleware", "auth.py", "expired tokens accepted by the middleware", "checking the exp claim"),
]


def _entry(kind: str, ts: datetime, content, n: int) -> dict:
    return {"type": kind, "uuid": f"{kind}-{n}", "sessionId": "s-1", "timestamp": ts.isoformat().replace("+00:00", "Z"),
            "message": {"role": kind, "content": content}}


def session_log(path: Path, *, fail_at_end: bool = False) -> Path:
    """A Claude Code transcript: four topics, 40 minutes each, from 09:00 to 11:40 UTC."""
    start = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
    lines, n = [], 0
    for t, (topic, file, problem, fix) in enumerate(TOPICS):
        at = start + timedelta(minutes=40 * t)
        for k in range(4):
            n += 1
            when = at + timedelta(minutes=10 * k)
            # short turns with the words every topic shares (tests, commit, fix): what made lexical merging
            # swallow a whole session into one chunk
            ask = (f"Next: the {topic}, {problem}." if k == 0 else "ok, run the tests again and commit if they pass")
            lines.append(_entry("user", when, ask, n))
            n += 1
            said = (f"Fixed {file} with {fix}." if k == 0 else "Ran the tests again: all pass. Committed the fix.")
            lines.append(_entry("assistant", when + timedelta(minutes=1), [
                {"type": "text", "text": said},
                {"type": "tool_use", "id": f"tu-{n}", "name": "Edit", "input": {"file_path": f"/src/{file}"}}], n))
            n += 1
            lines.append(_entry("user", when + timedelta(minutes=2), [
                {"type": "tool_result", "tool_use_id": f"tu-{n - 1}", "content": "ok"}], n))
    if fail_at_end:
        when = start + timedelta(minutes=158)
        n += 1
        lines.append(_entry("assistant", when, [
            {"type": "text", "text": "Running the auth tests now."},
            {"type": "tool_use", "id": "tu-final", "name": "Bash",
             "input": {"command": "python -m pytest -q tests/test_auth.py"}}], n))
        n += 1
        lines.append(_entry("user", when + timedelta(seconds=30), [
            {"type": "tool_result", "tool_use_id": "tu-final", "is_error": True,
             "content": "FAILED tests/test_auth.py::test_expired_token_rejected - assert 200 == 401"}], n))
        n += 1
        lines.append(_entry("assistant", when + timedelta(minutes=1), [
            {"type": "text", "text": "test_expired_token_rejected still fails: the middleware reads exp as "
                                     "milliseconds. Next step: convert exp to seconds in auth.py and rerun the "
                                     "auth tests."}], n))
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def bullets(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- ")]


def summaries(text: str) -> list[str]:
    """The chronological bullets, without the closing end-state line."""
    return [b for b in bullets(text) if not b.startswith("- **Where I left off**")]


@pytest.mark.parametrize("budget", [300, 600, 1000])
def test_a_multi_topic_session_keeps_its_last_topic_last(tmp_path, budget):
    log = session_log(tmp_path / "s.jsonl")
    recap = generate(log, budget=budget, summarizer=ExtractiveSummarizer(), tz=ZoneInfo("UTC"))
    assert tokens(recap.text) <= budget
    assert recap.stats["merged_chunks"] >= 3  # never one chunk for the whole session
    items = summaries(recap.text)
    assert len(items) >= 2 and bullets(recap.text)[-1].startswith("- **Where I left off** (11:31)")

    def last_mention(word: str) -> int:
        return max((i for i, b in enumerate(items) if word in b.lower()), default=-1)

    auth = last_mention("auth")
    assert auth >= 0 and "[11:" in items[auth]  # the last topic is there, with its time
    assert all(last_mention(w) < auth for w in ("csv", "export", "retry"))  # and it is the last topic
    if budget >= 1000:
        text = recap.text.lower()
        assert all(topic.split()[0] in text for topic, *_ in TOPICS[1:])  # the later topics are all named


def test_a_session_ending_on_a_failing_test_says_what_fails_and_what_is_next(tmp_path):
    log = session_log(tmp_path / "s.jsonl", fail_at_end=True)
    for budget in (250, 1000):
        recap = generate(log, budget=budget, summarizer=ExtractiveSummarizer(), tz=ZoneInfo("UTC"))
        assert tokens(recap.text) <= budget
        last = bullets(recap.text)[-1]
        assert last.startswith("- **Where I left off**"), recap.text
        assert "test_auth.py" in last and "failed" in last.lower()  # what failed
        assert "still fails" in last or "convert exp to seconds" in last  # the state, the next step
        assert "Next step: convert exp to seconds" in last


def _scripted(messages):
    text = messages[-1]["content"]
    if "WHERE I LEFT OFF" in messages[0]["content"]:
        return "I was fixing the auth middleware; test_expired_token_rejected still fails (exp read as ms). " \
               "Next: convert exp to seconds in auth.py and rerun the auth tests."
    for topic, file, *_ in TOPICS:
        if topic in text or file in text or f"test_{topic.split()[0]}" in text:
            return f"I worked on the {topic} (scripted)."
    return "I worked (scripted)."


def test_the_llm_path_names_the_final_state_too(tmp_path):
    log = session_log(tmp_path / "s.jsonl", fail_at_end=True)
    with ScriptedLLM(_scripted) as server:
        summarizer = LLMSummarizer(ChatClient.for_endpoint(server.base_url, "scripted-1"))
        recap = generate(log, budget=600, summarizer=summarizer, tz=ZoneInfo("UTC"))
    items = bullets(recap.text)
    assert "auth" in items[-2]
    assert items[-1].startswith("- **Where I left off**") and "still fails" in items[-1]
    assert "convert exp to seconds" in items[-1] and recap.stats["end_state"] == "llm"
    assert tokens(recap.text) <= 600


def test_a_failing_llm_falls_back_to_the_extractive_end_state(tmp_path):
    log = session_log(tmp_path / "s.jsonl", fail_at_end=True)
    with ScriptedLLM(lambda _m: None) as server:  # every answer is HTTP 500
        recap = generate(log, budget=600, summarizer=LLMSummarizer(ChatClient.for_endpoint(server.base_url, "m")), tz=ZoneInfo("UTC"))
    assert bullets(recap.text)[-1].startswith("- **Where I left off**") and recap.stats["end_state"] == "extractive"
    assert "Next step: convert exp to seconds" in recap.text
