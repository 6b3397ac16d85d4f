"""claude.ai's export (Settings > Privacy > Export data): ``conversations.json`` in a zip, a list of conversations.

Each conversation (``uuid``, ``name``, ``created_at``) lists its ``chat_messages`` in order: ``sender``
("human" or "assistant"), ``created_at`` (ISO 8601), the message as ``content`` blocks (``text``, and
``thinking``, ``tool_use``, ``tool_result``, which the person did not see as the reply) and, in older exports,
the whole ``text``. Attached files are named (``attachments``/``files``), their contents left out. When the
messages carry ``parent_message_uuid`` links (a conversation with edited or regenerated messages), the
branch ending at ``current_leaf_message_uuid`` (else at the newest message) is the one the person saw.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .turns import Speakers, iso, short, stable_id

SOURCE = "claude-ai"


def message_text(message: dict[str, Any]) -> str | None:
    blocks = message.get("content")
    pieces: list[str] = []
    if isinstance(blocks, list) and blocks:
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                pieces.append(block["text"])
    elif isinstance(message.get("text"), str):
        pieces.append(message["text"])
    names = [f.get("file_name") for key in ("attachments", "files") for f in (message.get(key) or [])
             if isinstance(f, dict) and isinstance(f.get("file_name"), str) and f.get("file_name")]
    for name in dict.fromkeys(names):
        pieces.append(f"[attached: {name}]")
    text = "\n\n".join(p for p in pieces if p.strip()).strip()
    return text or None


def seen_messages(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages in the order the person saw them (one branch when the export keeps several)."""
    messages = [m for m in conversation.get("chat_messages") or [] if isinstance(m, dict)]
    by_id = {m.get("uuid"): m for m in messages if isinstance(m.get("uuid"), str)}
    if not any(isinstance(m.get("parent_message_uuid"), str) and m["parent_message_uuid"] in by_id
               for m in messages):
        return messages
    leaf = conversation.get("current_leaf_message_uuid")
    if leaf not in by_id:
        leaf = max(by_id, key=lambda k: (str(by_id[k].get("created_at") or ""), messages.index(by_id[k])))
    path, seen = [], set()
    while leaf in by_id and leaf not in seen:
        seen.add(leaf)
        path.append(by_id[leaf])
        leaf = by_id[leaf].get("parent_message_uuid")
    path.reverse()
    return path


def conversation_turns(conversation: dict[str, Any], speakers: Speakers) -> Iterator[dict[str, Any]]:
    cid = str(conversation.get("uuid") or "") or stable_id("conv", conversation.get("name"),
                                                            conversation.get("created_at"))
    title = conversation.get("name") if isinstance(conversation.get("name"), str) else None
    last = iso(conversation.get("created_at"))
    for n, message in enumerate(seen_messages(conversation)):
        sender = message.get("sender")
        if sender not in ("human", "user", "assistant"):
            continue
        text = message_text(message)
        if text is None:
            continue
        when = iso(message.get("created_at")) or last
        last = when or last
        meta: dict[str, Any] = {"source": SOURCE, "conversation_id": cid}
        if title and title.strip():
            meta["conversation"] = short(title)
        mid = message.get("uuid")
        turn = {"content": text, "author_name": speakers.assistant if sender == "assistant" else speakers.user,
                "channel": f"{SOURCE}:{cid}", "session_id": cid, "metadata": meta,
                "message_id": f"{SOURCE}:{mid}" if isinstance(mid, str) and mid else stable_id(SOURCE, cid, n, text)}
        if when:
            turn["created_at"] = when
        yield turn


def turns(conversations: list[dict[str, Any]], speakers: Speakers) -> Iterator[dict[str, Any]]:
    for conversation in conversations:
        yield from conversation_turns(conversation, speakers)
