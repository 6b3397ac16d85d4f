"""Tool call + result -> one line of narrative, by the table of reference/004.

Consequential tools (they changed state) keep detail; observational tools become action + brief
outcome; meta tools are dropped or minimal. Results are mostly discarded: that a file was read
matters, its contents do not. Claude Code's tool names (Read, Edit, Bash, ...) and MCP tool names
(``mcp__<server>__<tool>``) map onto the same rows.
"""

from __future__ import annotations

import json
from typing import Any

CONSEQUENTIAL, OBSERVATIONAL, META, OTHER = "consequential", "observational", "meta", "other"

#: tool name (lower case, MCP prefix removed) -> row of the table
ALIASES = {
    "read": "read", "notebookread": "read", "read_file": "read", "view": "read",
    "ls": "ls", "list_dir": "ls", "glob": "glob", "grep": "grep",
    "recall": "recall", "ambient_recall": "recall", "raw_search": "recall", "anchor_search": "recall",
    "texture_search": "recall", "search_summaries": "recall", "get_crystals": "recall",
    "recall_detail": "recall_detail", "get_turns_around": "recall_detail", "texture_explore": "recall_detail",
    "edit": "edit", "multiedit": "edit", "notebookedit": "edit", "str_replace": "edit",
    "write": "write", "create": "write",
    "remember": "remember", "anchor_save": "remember", "crystallize": "remember", "texture_add": "remember",
    "ask": "ask", "askuserquestion": "ask",
    "status": "status", "todoread": "status",
    "done": "done", "exitplanmode": "done",
    "bash": "bash", "todowrite": "plan", "webfetch": "fetch", "websearch": "websearch",
    "task": "task", "agent": "task",
}
CATEGORY = {
    "read": OBSERVATIONAL, "ls": OBSERVATIONAL, "glob": OBSERVATIONAL, "grep": OBSERVATIONAL,
    "recall": OBSERVATIONAL, "recall_detail": OBSERVATIONAL, "fetch": OBSERVATIONAL, "websearch": OBSERVATIONAL,
    "edit": CONSEQUENTIAL, "write": CONSEQUENTIAL, "remember": CONSEQUENTIAL, "ask": CONSEQUENTIAL,
    "bash": CONSEQUENTIAL, "plan": CONSEQUENTIAL, "task": CONSEQUENTIAL,
    "status": META, "done": META,
}


def canonical(name: str) -> str:
    name = name or "?"
    if name.startswith("mcp__"):
        name = name.split("__")[-1]
    return ALIASES.get(name.lower(), name)


def category(name: str) -> str:
    return CATEGORY.get(canonical(name), OTHER)


def _short(text: Any, n: int = 120) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 3].rstrip() + "..."


def _lines(text: str) -> int:
    text = text.rstrip("\n")
    return text.count("\n") + 1 if text else 0


def _arg(args: dict[str, Any], *keys: str, default: str = "?") -> str:
    for key in keys:
        if args.get(key):
            return str(args[key])
    return default


def collapse(name: str, args: dict[str, Any] | None, result: str, is_error: bool = False) -> str | None:
    """The one-line narrative of a tool call, or None for a dropped (meta) call."""
    args = args if isinstance(args, dict) else {}
    row = canonical(name)
    path = _arg(args, "path", "file_path", "notebook_path", "filename")
    failed = " (failed)" if is_error else ""
    if row == "status":
        return None
    if row == "read":
        return f"Read {path} ({_lines(result)} lines){failed}."
    if row in ("ls", "glob"):
        entries = [e.strip() for e in result.splitlines() if e.strip()]
        preview = ", ".join(e.rsplit("/", 1)[-1] or e for e in entries[:5]) + (", ..." if len(entries) > 5 else "")
        what = _arg(args, "pattern", "path", default=".") if row == "glob" else _arg(args, "path", default=".")
        return f"Listed {what}: {preview or '(empty)'}"
    if row == "grep":
        hits = len([e for e in result.splitlines() if e.strip()])
        return f"Searched for '{_short(args.get('pattern'), 60)}' ({hits} matches)."
    if row == "recall":
        n = result.count("\n---\n") + 1 if result.strip() else 0
        return f"Recalled {n} memories about '{_short(_arg(args, 'query', 'context'), 80)}'."
    if row == "recall_detail":
        return f"Retrieved full text of memory #{_arg(args, 'chunk_id', 'id', 'uuid', 'timestamp', 'entity_name')}."
    if row == "edit":
        return f"Edited {path}{failed}."
    if row == "write":
        return f"Wrote {path} ({_lines(str(args.get('content') or ''))} lines){failed}."
    if row == "remember":
        return f"Remembered: '{_arg(args, 'abstract', 'text', 'content', 'title')}'."
    if row == "ask":
        question = _arg(args, "message", "question", "questions")
        return f"Asked user: '{_short(question, 200)}'. Response: '{_short(result, 120)}'."
    if row == "done":
        return f"Finished: '{_short(_arg(args, 'summary', 'plan', default=result), 300)}'."
    if row == "bash":
        return f"Ran `{_short(_arg(args, 'command'), 120)}`{failed}."
    if row == "plan":
        todos = args.get("todos") if isinstance(args.get("todos"), list) else []
        items = [f"[{t.get('status', 'pending')}] {_short(t.get('content'), 80)}" for t in todos if isinstance(t, dict)]
        return "Updated the plan: " + ("; ".join(items) if items else "(empty)") + "."
    if row == "fetch":
        return f"Fetched {_arg(args, 'url')}{failed}."
    if row == "websearch":
        return f"Searched the web for '{_short(_arg(args, 'query'), 80)}'."
    if row == "task":
        return f"Delegated to a subagent: '{_short(_arg(args, 'description', 'prompt'), 120)}'."
    return f"Called {name}({_short(json.dumps(args, ensure_ascii=False, default=str), 160)}){failed}."
