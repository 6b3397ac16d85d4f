"""Claude Code transcripts (``~/.claude/projects/<project>/<session>.jsonl``) read as turns.

Each line of a transcript is one entry: ``type`` user/assistant (others: summary, system, ...), a
``uuid``, a ``timestamp``, the ``sessionId`` and the API ``message``. A user prompt is a user entry
whose content is text (tool results come back as user entries too); an assistant reply is the text
blocks of an assistant entry (tool calls and thinking are not turns). The entry's uuid makes a stable
``message_id``, so storing the same transcript twice stores nothing new.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pps_hooks.jsonl import read_jsonl

SOURCE = "claude-code"
#: User text that is Claude Code's own (slash commands, local command output, system reminders, the interruption
#: marker), not what the user said: never captured as a turn, never recapped (the recap plugin reads it here).
WRAPPERS = ("<command-name>", "<command-message>", "<local-command-stdout>", "<local-command-stderr>",
            "<command-args>", "<system-reminder>", "[Request interrupted by user")


def is_wrapper(text: str) -> bool:
    """Whether a user entry's text is one of Claude Code's wrappers (:data:`WRAPPERS`), not a prompt."""
    return text.lstrip().startswith(WRAPPERS)


#: Complete JSON lines from byte ``offset`` on, as (offset after the line, entry): the hook core's reader.
read_entries = read_jsonl


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the ``text`` blocks of a block list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(p for p in parts if p)
    return ""


def is_transcript_entry(entry: dict[str, Any]) -> bool:
    """A Claude Code transcript entry (``type`` user/assistant with an API ``message``); the recap plugin asks too."""
    return entry.get("type") in ("user", "assistant") and isinstance(entry.get("message"), dict)


def entry_turn(entry: dict[str, Any], *, entity: str, user_name: str,
               session_id: str | None = None) -> dict[str, Any] | None:
    """The turn (store_message params) of one transcript entry, or None when it is not a turn."""
    if not is_transcript_entry(entry) or entry.get("isSidechain") or entry.get("isMeta"):
        return None
    if entry.get("isCompactSummary") or entry.get("isVisibleInTranscriptOnly"):
        return None
    role = entry["type"]
    content = entry["message"].get("content")
    if role == "user":  # a prompt's own blocks, without the wrappers Claude Code put beside them
        listed = content if isinstance(content, list) else []
        blocks = [content] if isinstance(content, str) else [text_of([b]) for b in listed]
        text = "\n".join(b for b in blocks if b and not is_wrapper(b)).strip()
    else:
        text = text_of(content).strip()
    if not text:
        return None
    session = entry.get("sessionId") or session_id or "unknown"
    uuid = entry.get("uuid")
    if not uuid:
        import hashlib

        uuid = hashlib.sha256(f"{session}\n{entry.get('timestamp')}\n{role}\n{text}".encode()).hexdigest()[:32]
    metadata = {"source": SOURCE, "uuid": entry.get("uuid"), "role": role}
    for key, name in (("cwd", "cwd"), ("gitBranch", "git_branch")):
        if entry.get(key):
            metadata[name] = entry[key]
    if role == "assistant" and entry["message"].get("model"):
        metadata["model"] = entry["message"]["model"]
    turn = {
        "content": text,
        "author_name": entity if role == "assistant" else user_name,
        "channel": f"terminal:{session}",
        "session_id": session,
        "metadata": metadata,
        "message_id": f"{SOURCE}:{uuid}",
    }
    if entry.get("timestamp"):
        turn["created_at"] = entry["timestamp"]
    return turn


def transcript_turns(path: Path, *, entity: str, user_name: str, offset: int = 0,
                     session_id: str | None = None) -> tuple[list[dict[str, Any]], int]:
    """Turns of a transcript from byte ``offset``; returns them and the offset to resume from."""
    turns: list[dict[str, Any]] = []
    end = offset
    for pos, entry in read_entries(path, offset):
        end = pos
        turn = entry_turn(entry, entity=entity, user_name=user_name, session_id=session_id)
        if turn is not None:
            turns.append(turn)
    return turns, end


def find_transcripts(path: Path) -> list[Path]:
    """A transcript file, or every ``*.jsonl`` under a directory (oldest first by modification time)."""
    path = Path(path).expanduser()
    if path.is_dir():
        return sorted((p for p in path.rglob("*.jsonl") if p.is_file()), key=lambda p: (p.stat().st_mtime, str(p)))
    return [path]
