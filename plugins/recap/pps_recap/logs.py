"""Session logs -> a narrative of turns, with tool calls collapsed and real timestamps kept.

Two formats, told apart line by line:
- mindloop-style: chat messages, one per line (``role`` system/user/assistant/tool, ``content``,
  optional ``reasoning``, ``tool_calls`` with ``function.name/arguments``, ``tool_call_id``), with an
  optional ``timestamp`` (ISO 8601 or epoch seconds; ``ts``/``time``/``created_at`` also read);
- Claude Code transcripts (``type`` user/assistant, ``message.content`` blocks: text, thinking,
  tool_use, tool_result), recognised and read through ``pps_claude_code.transcripts`` (the format's owner).

Every entry passes the one ``<private>`` filter (:func:`pps_core.privacy.drop_private_deep`) as it is read:
private spans never reach a summary, the ``[llm]`` endpoint or ``_recap.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pps_claude_code.transcripts import is_transcript_entry, is_wrapper, text_of

from pps_core.privacy import drop_private_deep

from .collapse import category, collapse

_SKIP_SYSTEM = ("[stop]", "[stats]", "Warning:")


@dataclasses.dataclass
class Turn:
    """One line of the narrative: who (User, Assistant, Thinking, Tool, System), what, when."""

    role: str
    text: str
    ts: datetime | None = None
    category: str | None = None  # tool turns: consequential / observational / other


def parse_time(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    try:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(float(value), UTC)
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _entry_time(entry: dict[str, Any]) -> datetime | None:
    for key in ("timestamp", "ts", "time", "created_at"):
        if key in entry:
            return parse_time(entry[key])
    return None


#: What changes when the same entry is written again elsewhere (a resumed Claude Code session copies the old
#: entries under its new session id; a moved or rotated log): left out of an entry's digest.
PLACEMENT = frozenset({"sessionId", "session_id", "cwd", "version", "gitBranch", "uuid", "parentUuid",
                       "logicalParentUuid", "leafUuid", "requestId", "userType"})


def entry_digest(entry: dict[str, Any]) -> str:
    """What a log entry is, wherever it is written: a digest of its content (what was said, by whom, when), without
    the fields that place it (:data:`PLACEMENT`). The recap remembers what it forgot by these (never text)."""
    kept = {k: v for k, v in entry.items() if k not in PLACEMENT}
    raw = json.dumps(kept, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def is_narrative(entry: dict[str, Any]) -> bool:
    """Whether the entry can give the recap a line (a transcript entry, or a chat message with a role)."""
    return is_transcript_entry(entry) or "role" in entry


def iter_entries(path: Path, start: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    """(the byte offset after its line, the entry) for each entry (a JSON object, one a line) from byte ``start`` on,
    ``<private>`` spans dropped. A ``start`` inside a line skips that line. A last line without its newline (being
    written, or a file that ends so) is read too, with the offset of its start: read from there again later."""
    with Path(path).open("rb") as fh:
        if start > 0:
            fh.seek(start - 1)
            if fh.read(1) != b"\n":
                fh.readline()  # the rest of a line begun before start
        pos = fh.tell()
        for line in fh:
            whole = line.endswith(b"\n")
            if whole:
                pos += len(line)
            raw = line.decode("utf-8", errors="replace").strip()
            if not raw:
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield pos, drop_private_deep(entry, strict=False)


def read_lines(path: Path, start: int = 0, skip: frozenset[str] | set[str] = frozenset()) -> list[dict[str, Any]]:
    """The log's entries from byte ``start`` on, ``<private>`` spans dropped, but those whose :func:`entry_digest`
    is in ``skip`` (what was forgotten). A ``start`` inside a line skips that line."""
    return [entry for _pos, entry in iter_entries(path, start)
            if not skip or not is_narrative(entry) or entry_digest(entry) not in skip]


class _Collapser:
    """Pairs tool calls with their results; a call with no result (a crash) is closed at the end."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.pending: dict[str, tuple[str, dict[str, Any], datetime | None, int]] = {}

    def say(self, role: str, text: str, ts: datetime | None) -> None:
        text = (text or "").strip()
        if text:
            self.turns.append(Turn(role, text, ts))

    def call(self, call_id: str, name: str, args: Any, ts: datetime | None) -> None:
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = {"arguments": args}
        self.turns.append(Turn("Tool", "", ts))  # placeholder keeps the call's place in the story
        self.pending[call_id or f"#{len(self.turns)}"] = (name, args if isinstance(args, dict) else {},
                                                          ts, len(self.turns) - 1)

    def result(self, call_id: str, content: str, is_error: bool = False) -> None:
        found = self.pending.pop(call_id, None)
        if found is None:
            return
        name, args, ts, index = found
        line = collapse(name, args, content or "", is_error)
        self.turns[index] = Turn("Tool", line or "", ts, None if line is None else category(name))

    def finish(self) -> list[Turn]:
        for call_id in list(self.pending):
            self.result(call_id, "")
        return [t for t in self.turns if t.text]  # dropped (meta) calls leave no line


def _mindloop(c: _Collapser, entry: dict[str, Any], ts: datetime | None) -> None:
    role = entry.get("role")
    content = entry.get("content")
    content = content if isinstance(content, str) else text_of(content)
    if role == "system":
        if content.strip() and not content.startswith(_SKIP_SYSTEM):
            c.say("System", content, ts)
    elif role == "assistant":
        if entry.get("reasoning"):
            c.say("Thinking", str(entry["reasoning"]), ts)
        for tc in entry.get("tool_calls") or []:
            func = tc.get("function") or {}
            c.call(tc.get("id", ""), func.get("name", tc.get("name", "?")), func.get("arguments", "{}"), ts)
        c.say("Assistant", content, ts)
    elif role == "tool":
        c.result(entry.get("tool_call_id", ""), content)
    elif role == "user":
        c.say("User", content, ts)


def _claude_code(c: _Collapser, entry: dict[str, Any], ts: datetime | None) -> None:
    if entry.get("isSidechain") or entry.get("isMeta") or entry.get("isCompactSummary"):
        return
    content = entry["message"].get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    for b in blocks:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text":
            text = (b.get("text") or "").strip()
            if entry["type"] == "user" and is_wrapper(text):
                continue
            c.say("User" if entry["type"] == "user" else "Assistant", text, ts)
        elif kind == "thinking":
            c.say("Thinking", b.get("thinking", ""), ts)
        elif kind == "tool_use":
            c.call(b.get("id", ""), b.get("name", "?"), b.get("input") or {}, ts)
        elif kind == "tool_result":
            c.result(b.get("tool_use_id", ""), text_of(b.get("content")), bool(b.get("is_error")))


def collapse_entries(entries: list[dict[str, Any]]) -> list[Turn]:
    """The narrative of a session's log entries, in log order."""
    c = _Collapser()
    for entry in entries:
        ts = _entry_time(entry)
        if is_transcript_entry(entry):
            _claude_code(c, entry, ts)
        elif "role" in entry:
            _mindloop(c, entry, ts)
    return c.finish()


def read_log(path: Path, start: int = 0, skip: frozenset[str] | set[str] = frozenset()) -> list[Turn]:
    return collapse_entries(read_lines(path, start, skip))
