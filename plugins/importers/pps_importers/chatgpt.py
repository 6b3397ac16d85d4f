"""ChatGPT's export (Settings > Data controls > Export data): ``conversations.json``, a list of conversations.

Each conversation keeps its messages as a tree, ``mapping`` (node id -> ``{message, parent, children}``):
editing a message or regenerating a reply adds a sibling branch. ``current_node`` is the leaf of the branch
the user last saw; walking ``parent`` links up from it gives the conversation as the user saw it, and the
other branches (the text before an edit, discarded regenerations) are left out. Hidden messages (system
prompts, custom instructions, tool calls and their output, reasoning) are not turns of the conversation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .turns import Speakers, epoch_iso, short, stable_id

SOURCE = "chatgpt"
_VISIBLE_TYPES = ("text", "multimodal_text")


def visible_path(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes from the root to ``current_node`` (without it: to the newest leaf), in order."""
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        return []
    leaf = conversation.get("current_node")
    if not isinstance(leaf, str) or leaf not in mapping:
        leaf = _newest_leaf(mapping)
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node_id = leaf
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            break
        path.append(node)
        node_id = node.get("parent")
    path.reverse()
    return path


def _newest_leaf(mapping: dict[str, Any]) -> str | None:
    """Without ``current_node`` (older exports): from the root, always the child written last."""
    roots = [k for k, n in mapping.items() if isinstance(n, dict) and n.get("parent") not in mapping]
    node_id = roots[0] if roots else None
    seen: set[str] = set()
    while node_id is not None and node_id not in seen:
        seen.add(node_id)
        children = [c for c in (mapping[node_id].get("children") or []) if c in mapping]
        if not children:
            return node_id
        node_id = max(children, key=lambda c: _time_of(mapping[c]))
    return node_id


def _time_of(node: Any) -> float:
    message = node.get("message") if isinstance(node, dict) else None
    t = message.get("create_time") if isinstance(message, dict) else None
    return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else 0.0


def message_text(message: dict[str, Any]) -> str | None:
    """The text a person saw of one message, or None for a message the conversation does not show."""
    author = message.get("author") or {}
    role = author.get("role") if isinstance(author, dict) else None
    meta = message.get("metadata") or {}
    if role not in ("user", "assistant") or (isinstance(meta, dict) and meta.get("is_visually_hidden_from_conversation")):
        return None
    if role == "assistant" and message.get("recipient") not in (None, "all"):
        return None  # a call to a tool (browser, python, canvas), not a reply
    content = message.get("content") or {}
    if not isinstance(content, dict) or content.get("content_type") not in _VISIBLE_TYPES:
        return None
    pieces = []
    for part in content.get("parts") or []:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):  # audio_transcription
                pieces.append(part["text"])
            elif "asset_pointer" in part:
                pieces.append("[image]")
    text = "\n".join(p for p in pieces if p.strip()).strip()
    return text or None


def conversation_turns(conversation: dict[str, Any], speakers: Speakers) -> Iterator[dict[str, Any]]:
    """The turns of one conversation (the branch the user saw), as ``store_messages`` entries."""
    cid = str(conversation.get("conversation_id") or conversation.get("id") or "")
    if not cid:
        cid = stable_id("conv", conversation.get("title"), conversation.get("create_time"))
    title = conversation.get("title") if isinstance(conversation.get("title"), str) else None
    last = epoch_iso(conversation.get("create_time"))
    for n, node in enumerate(visible_path(conversation)):
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        text = message_text(message)
        if text is None:
            continue
        when = epoch_iso(message.get("create_time")) or last or epoch_iso(conversation.get("update_time"))
        last = when or last
        role = message["author"]["role"]
        mid = message.get("id") or node.get("id")
        meta: dict[str, Any] = {"source": SOURCE, "conversation_id": cid}
        if title:
            meta["conversation"] = short(title)
        model = (message.get("metadata") or {}).get("model_slug")
        if isinstance(model, str) and role == "assistant":
            meta["model"] = model
        turn = {"content": text, "author_name": speakers.user if role == "user" else speakers.assistant,
                "channel": f"{SOURCE}:{cid}", "session_id": cid, "metadata": meta,
                "message_id": f"{SOURCE}:{mid}" if isinstance(mid, str) and mid else stable_id(SOURCE, cid, n, text)}
        if when:
            turn["created_at"] = when
        yield turn


def turns(conversations: list[dict[str, Any]], speakers: Speakers) -> Iterator[dict[str, Any]]:
    for conversation in conversations:
        yield from conversation_turns(conversation, speakers)
