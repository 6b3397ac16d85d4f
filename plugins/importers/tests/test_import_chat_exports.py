"""`pps import chatgpt|claude-ai`: real export files (the zip as downloaded and the bare conversations.json), the
branch the user saw, names from pps.toml, one channel per conversation, `<private>` dropped, importing twice."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from pps_importers import chatgpt, claude_ai
from pps_importers.turns import Speakers

from pps_core.testing.server import pps

FIXTURES = Path(__file__).parent / "fixtures"
CHATGPT = FIXTURES / "chatgpt_conversations.json"
CLAUDE_AI = FIXTURES / "claude_ai_conversations.json"


@pytest.fixture
def root(tmp_path):
    pps(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite", "--timezone", "UTC")
    toml = tmp_path / "lyra" / "pps.toml"
    toml.write_text('user_name = "Ana"\ndisplay_name = "Lyra"\n' + toml.read_text())
    return tmp_path


def turns_of(root: Path) -> list[dict]:
    page = json.loads(pps(root, "call", "--entity", "lyra", "list_turns", '{"limit": 500}').stdout)
    return page["turns"]


def zipped(tmp_path: Path, fixture: Path, name: str, extra: dict[str, str]) -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, text in extra.items():
            zf.writestr(member, text)
        zf.writestr("conversations.json", fixture.read_text())
    return path


def test_chatgpt_export_zip_imports_the_branch_the_user_saw_once(root, tmp_path):
    export = zipped(tmp_path, CHATGPT, "chatgpt-export.zip",
                    {"user.json": '{"id": "user-x", "email": "ana@example.org"}', "chat.html": "<html></html>",
                     "message_feedback.json": "[]", "shared_conversations.json": "[]"})
    first = pps(root, "import", "chatgpt", str(export), "--entity", "lyra")
    assert "read 8 messages in 2 conversations" in first.stdout and "8 new" in first.stdout
    assert first.stderr == ""  # no progress bar when stderr is not a terminal
    turns = turns_of(root)
    swarm = [t for t in turns if t["channel"] == "chatgpt:6760f2a1-0c3e-8000-a1b2-3c4d5e6f7a8b"]
    assert [" ".join(t["content"].split()) for t in swarm] == [  # (spacing as the <private> filter leaves it)
        "My hive swarmed this morning. What now?",
        "Look for the cluster nearby, usually within a hundred metres.",
        "It is in an apple tree, about three metres up. Can I reach it?",  # the edited question, private dropped
        "Yes: a stepladder and a box, shake the branch once, firmly.",     # the regenerated reply the user kept
        "[image] This is the box I used.",
        "That box will do; keep it shaded until evening.",
    ]
    assert swarm[4]["content"] == "[image]\nThis is the box I used."
    assert [t["author_name"] for t in swarm] == ["Ana", "Lyra"] * 3
    assert swarm[0]["created_at"].startswith("2026-01-01T10:00:00.512")
    assert swarm[-1]["created_at"].startswith("2026-01-01T11:00:10")
    assert swarm[1]["metadata"] == {"source": "chatgpt", "conversation_id": "6760f2a1-0c3e-8000-a1b2-3c4d5e6f7a8b",
                                    "conversation": "Swarm in the apple tree", "model": "gpt-4o"}
    assert swarm[0]["message_id"] == "chatgpt:u1" and swarm[0]["session_id"] == swarm[0]["metadata"]["conversation_id"]
    everything = json.dumps(turns)
    for left_out in ("How tall is the tree", "I cannot see the tree", "Call a professional", "stepladder.\"",
                     "print(3", "3.6", "I keep bees", "neighbour"):
        assert left_out not in everything, left_out
    again = pps(root, "import", "chatgpt", str(export), "--entity", "lyra")
    assert "0 new" in again.stdout and len(turns_of(root)) == 8
    # the bare conversations.json of the same export is the same messages: nothing new either
    assert "0 new" in pps(root, "import", "chatgpt", str(CHATGPT), "--entity", "lyra").stdout
    # a forgotten message is never stored again, and the report says so rather than "already stored"
    pps(root, "call", "--entity", "lyra", "forget_turns", json.dumps({"ids": [swarm[2]["id"]]}))
    after_forget = pps(root, "import", "chatgpt", str(export), "--entity", "lyra")
    assert "0 new" in after_forget.stdout and "1 forgotten earlier, not stored again" in after_forget.stdout
    assert len(turns_of(root)) == 7 and "apple tree, about" not in json.dumps(turns_of(root))


def test_claude_ai_export_imports_text_blocks_with_their_times(root, tmp_path):
    export = zipped(tmp_path, CLAUDE_AI, "data-2026-02-04-batch-0000.zip",
                    {"users.json": '[{"uuid": "0a1b2c3d"}]', "projects.json": "[]"})
    first = pps(root, "import", "claude-ai", str(export), "--entity", "lyra", "--user-name", "ana")
    assert "read 6 messages in 2 conversations (3 in the export)" in first.stdout and "6 new" in first.stdout
    turns = turns_of(root)
    assert [t["content"] for t in turns] == [
        "What wax melts at the lowest temperature?",              # the older export's `text`, oldest first
        "Of the common ones, paraffin, then beeswax near 63 C.",
        "I found three queen cells on one frame. Should I remove them?\n\n[attached: frame.txt]\n\n"
        "[attached: frame.jpg]",
        "Where are they? Cells on the bottom edge mean swarming; in the middle of the comb, supersedure.",
        "Bottom edge.",
        "Then they are swarm cells: split the colony today.",
    ]
    assert [t["author_name"] for t in turns] == ["ana", "Lyra"] * 3
    assert {t["channel"] for t in turns} == {"claude-ai:4b7e1c2a-5d6f-4a8b-9c0d-1e2f3a4b5c6d",
                                             "claude-ai:5c8f2d3b-6e7a-4b9c-8d1e-2f3a4b5c6d7e"}
    assert turns[2]["created_at"].startswith("2026-02-03T08:15:02.544")
    assert turns[2]["metadata"]["conversation"] == "Queen cells" and "conversation" not in turns[0]["metadata"]
    everything = json.dumps(turns)
    for left_out in ("Supersedure or swarm", "web_search", "notes about frame 4", "neighbour"):
        assert left_out not in everything, left_out
    assert "0 new" in pps(root, "import", "claude-ai", str(CLAUDE_AI), "--entity", "lyra", "--user-name", "ana").stdout
    assert len(turns_of(root)) == 6


def test_a_file_that_is_not_the_export_is_refused_by_name(root, tmp_path):
    wrong = pps(root, "import", "chatgpt", str(CLAUDE_AI), "--entity", "lyra", check=False)
    assert wrong.returncode == 2 and "conversation 0 has no 'mapping': not a ChatGPT export" in wrong.stderr
    wrong = pps(root, "import", "claude-ai", str(CHATGPT), "--entity", "lyra", check=False)
    assert wrong.returncode == 2 and "has no 'chat_messages': not a claude.ai export" in wrong.stderr
    empty_zip = tmp_path / "other.zip"
    with zipfile.ZipFile(empty_zip, "w") as zf:
        zf.writestr("notes.txt", "hello")
    proc = pps(root, "import", "chatgpt", str(empty_zip), "--entity", "lyra", check=False)
    assert proc.returncode == 2 and "other.zip: no conversations.json in this zip" in proc.stderr
    garbage = tmp_path / "conversations.json"
    garbage.write_text('{"not": "a list"')
    proc = pps(root, "import", "claude-ai", str(garbage), "--entity", "lyra", check=False)
    assert proc.returncode == 2 and "conversations.json: not JSON" in proc.stderr
    missing = pps(root, "import", "chatgpt", str(tmp_path / "nope.zip"), "--entity", "lyra", check=False)
    assert missing.returncode == 2 and "nope.zip: no such file" in missing.stderr
    assert turns_of(root) == []


SPEAKERS = Speakers("Ana", "Lyra")


def test_chatgpt_without_current_node_follows_the_newest_branch():
    conversation = json.loads(CHATGPT.read_text())[0]
    conversation.pop("current_node")
    texts = [t["content"] for t in chatgpt.conversation_turns(conversation, SPEAKERS)]
    assert texts[2].startswith("It is in an apple tree") and "I cannot see the tree." not in texts
    assert texts[-1] == "That box will do; keep it shaded until evening."


def test_claude_ai_branches_take_the_current_leaf():
    def m(uuid, parent, sender, text, at):
        return {"uuid": uuid, "parent_message_uuid": parent, "sender": sender, "text": text,
                "content": [{"type": "text", "text": text}], "created_at": at}

    conversation = {"uuid": "c1", "name": "x", "created_at": "2026-01-01T00:00:00Z",
                    "current_leaf_message_uuid": "a2", "chat_messages": [
                        m("h1", "00000000-0000-4000-8000-000000000000", "human", "first try", "2026-01-01T00:00:01Z"),
                        m("a1", "h1", "assistant", "reply to the first try", "2026-01-01T00:00:02Z"),
                        m("h2", "00000000-0000-4000-8000-000000000000", "human", "edited question", "2026-01-01T00:01:00Z"),
                        m("a2", "h2", "assistant", "reply to the edit", "2026-01-01T00:01:05Z"),
                        m("a3", "h2", "assistant", "a retry nobody kept", "2026-01-01T00:01:09Z")]}
    assert [t["content"] for t in claude_ai.conversation_turns(conversation, SPEAKERS)] == [
        "edited question", "reply to the edit"]
    conversation.pop("current_leaf_message_uuid")  # no leaf named: the newest message's branch
    assert [t["content"] for t in claude_ai.conversation_turns(conversation, SPEAKERS)][-1] == "a retry nobody kept"
