"""The recap's log reader is a capture boundary: ``<private>`` spans (nested: the outermost wins) leave every
part of a mindloop-style log as it is read (content, reasoning, tool arguments, tool results), so no summary,
no LLM request and no ``_recap.md`` holds them (issue 22 item 2). The hooks-driven Claude Code path is tested
end to end in plugins/claude_code/tests/test_claude_code_recap_privacy.py."""

from __future__ import annotations

import json

from pps_llm.client import ChatClient
from pps_recap.logs import read_log
from pps_recap.pipeline import generate
from pps_recap.summarize import LLMSummarizer

from pps_core.testing.scripted_llm import ScriptedLLM

CANARIES = ("pvqmind", "pvqreason", "pvqarg", "pvqresult", "pvqinner")


def mindloop_log(path):
    lines = [
        {"role": "user", "content": "Draft the release notes. The signing key is <private>pvqmind</private>.",
         "timestamp": "2026-03-12T20:01:00+00:00"},
        {"role": "assistant", "content": "", "reasoning": "Keep <PRIVATE>pvqreason</private > out of the notes.",
         "tool_calls": [{"id": "c1", "type": "function", "function": {
             "name": "write", "arguments": json.dumps({"path": "notes.md", "content": "<private>pvqarg</private>"})}}],
         "timestamp": "2026-03-12T20:02:00+00:00"},
        {"role": "tool", "tool_call_id": "c1", "content": "wrote <private>pvqresult</private>",
         "timestamp": "2026-03-12T20:02:00+00:00"},
        {"role": "assistant", "content": "Done <private>a <private>pvqinner</private> b</private> and the notes "
                                         "are drafted.", "timestamp": "2026-03-12T20:03:00+00:00"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_private_spans_leave_a_mindloop_log_as_it_is_read(tmp_path):
    log = mindloop_log(tmp_path / "session.jsonl")
    narrative = " ".join(t.text for t in read_log(log))
    assert "release notes" in narrative and "the notes are drafted" in narrative
    for canary in CANARIES:
        assert canary not in narrative, canary

    with ScriptedLLM(lambda messages: json.dumps(messages)[-800:]) as llm:  # echoes what it was sent
        recap = generate(log, summarizer=LLMSummarizer(ChatClient.for_endpoint(llm.base_url, "m")))
        sent = json.dumps(llm.requests)
    assert "release notes" in sent and "release notes" in recap.text
    for canary in CANARIES:
        assert canary not in sent and canary not in recap.text, canary
