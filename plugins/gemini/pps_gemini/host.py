"""Gemini CLI as a host of the PPS hook core (:class:`pps_hooks.host.Host`).

From Gemini CLI's hook reference (docs/hooks/reference.md) and its source (packages/core/src/hooks/types.ts,
hookEventHandler.ts, services/chatRecordingService.ts):

- hooks live in ``settings.json`` (user: ``~/.gemini/settings.json``, or ``$GEMINI_CLI_HOME/.gemini/``) under
  ``hooks``: ``{"<Event>": [{"matcher": ..., "hooks": [{"type": "command", "command": ..., "name": ...,
  "timeout": <milliseconds>}]}]}``;
- every payload has ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``timestamp``;
  ``SessionStart`` adds ``source``, ``BeforeAgent`` ``prompt``, ``AfterAgent`` ``prompt``, ``prompt_response``
  and ``stop_hook_active``, ``PreCompress`` ``trigger``, ``SessionEnd`` ``reason``;
- ``SessionStart`` injects ``hookSpecificOutput.additionalContext`` (interactive: the first turn of the history)
  and shows ``systemMessage``; exit code 0 with JSON on stdout, nothing else on stdout;
- the transcript is JSON lines (``~/.gemini/tmp/<project>/chats/session-*.jsonl``): a metadata line
  (``sessionId``, ``projectHash``, ...), message records (``id``, ``timestamp``, ``type`` user/gemini/info/error/
  warning, ``content``, ``displayContent``), a record written again with the same ``id`` when it is updated,
  ``{"$rewindTo": id}`` and ``{"$set": {...}}``; the older ``.json`` form is one object with ``messages``.

Capture: at ``AfterAgent``, ``PreCompress`` and ``SessionEnd`` every user and gemini message of the transcript
with text that this session has not sent yet, keyed by the transcript's message id (so each is stored once,
whatever the order of hooks); with no transcript, ``AfterAgent``'s own prompt and reply.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pps_hooks.host import Host, Names, digest, parts_text, read_jsonl, turn

#: User text that is Gemini CLI's own (commands, the context hooks and the CLI put in), not what the user said
#: (``isIgnoredUserContent`` in packages/core/src/utils/sessionUtils.ts).
IGNORED = ("/", "?", "<session_context>", "<hook_context>")
#: Context Gemini CLI puts before the user's words in the same message: without a terminal, SessionStart's
#: additionalContext is prepended to the prompt (``<hook_context>...</hook_context>\n\n<prompt>``, as Gemini CLI
#: 0.61.0 records it): the startup package is never stored as if the user had said it.
CONTEXT_TAGS = ("hook_context", "session_context")


def without_context(text: str) -> str:
    """``text`` less the context blocks Gemini CLI put before the user's words (:data:`CONTEXT_TAGS`)."""
    rest = text.lstrip()
    while rest.startswith(tuple(f"<{tag}>" for tag in CONTEXT_TAGS)):
        tag = rest[1:rest.index(">")]
        end = rest.find(f"</{tag}>")
        if end < 0:
            return ""
        rest = rest[end + len(tag) + 3:].lstrip()
    return rest


def messages(path: Path) -> list[dict[str, Any]]:
    """The transcript's messages as Gemini CLI rebuilds them: the last record of each id, rewinds applied."""
    found: dict[str, dict[str, Any]] = {}
    records: list[dict[str, Any]] = [entry for _, entry in read_jsonl(path)]
    if not records:  # the older form: one JSON object (possibly over many lines)
        try:
            whole = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        records = [whole] if isinstance(whole, dict) else []
    for record in records:
        if isinstance(record.get("$rewindTo"), str):
            ids = list(found)
            if record["$rewindTo"] in found:
                for key in ids[ids.index(record["$rewindTo"]):]:
                    del found[key]
            else:
                found.clear()
        elif isinstance(record.get("id"), str):
            found[record["id"]] = record
        elif isinstance(record.get("$set"), dict) and isinstance(record["$set"].get("messages"), list):
            found = {m["id"]: m for m in record["$set"]["messages"] if isinstance(m, dict) and isinstance(m.get("id"), str)}
        elif isinstance(record.get("messages"), list):  # the metadata line / the older whole-file form
            for m in record["messages"]:
                if isinstance(m, dict) and isinstance(m.get("id"), str):
                    found[m["id"]] = m
    return list(found.values())


def message_turn(host: Host, message: dict[str, Any], session: str, names: Names) -> dict[str, Any] | None:
    kind = message.get("type")
    if kind not in ("user", "gemini"):
        return None
    if kind == "user":
        shown = message.get("displayContent")
        text = without_context(parts_text(shown if shown not in (None, "", []) else message.get("content"))).strip()
        if text.startswith(IGNORED):
            return None
    else:
        text = parts_text(message.get("content")).strip()
    if not text:
        return None
    meta = {"model": message["model"]} if kind == "gemini" and message.get("model") else {}
    return turn(host, session=session, role="user" if kind == "user" else "assistant", text=text, names=names,
                key=str(message["id"]), created_at=message.get("timestamp"), metadata=meta)


class GeminiHost(Host):
    name = "gemini"
    title = "Gemini CLI"
    source = "gemini-cli"
    events = {"SessionStart": "start", "BeforeAgent": "prompt", "AfterAgent": "reply", "PreCompress": "compact",
              "SessionEnd": "end"}
    #: milliseconds (Gemini CLI's ``timeout`` unit; its default is 60000)
    host_timeouts = {"SessionStart": 20_000, "BeforeAgent": 10_000, "AfterAgent": 15_000, "PreCompress": 20_000,
                     "SessionEnd": 15_000}
    #: Gemini CLI puts the whole additionalContext into the history: kept to the entity's usual startup size.
    context_limit = 9_000

    def config_file(self, given: str | None = None) -> Path:
        if given:
            return Path(given).expanduser()
        base = os.environ.get("GEMINI_CLI_HOME") or str(Path.home())
        return Path(base).expanduser() / ".gemini" / "settings.json"

    def hook_entry(self, event: str, command: str) -> dict[str, Any]:
        return {"hooks": [{"type": "command", "name": f"pps-{event}", "command": command,
                           "timeout": self.host_timeouts[event],
                           "description": "PPS: capture the turns, inject the entity's memory"}]}

    def new_turns(self, event: str, payload: dict[str, Any], state: dict[str, Any],
                  names: Names) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        moment = self.events[event]
        if moment not in ("reply", "compact", "end"):
            return [], state
        session = self.session_id(payload)
        sent = list(state.get("sent") or [])
        seen = set(sent)
        transcript = str(payload.get("transcript_path") or state.get("transcript") or "")
        out: list[dict[str, Any]] = []
        if transcript and Path(transcript).expanduser().is_file():
            for message in messages(Path(transcript).expanduser()):
                t = message_turn(self, message, session, names)
                if t is not None and t["message_id"] not in seen:
                    out.append(t)
                    seen.add(t["message_id"])
                    sent.append(t["message_id"])
            return out, {**state, "transcript": transcript, "sent": sent}
        if moment == "reply":  # no transcript (recording off): the turn as the hook got it
            prompt = str(payload.get("prompt") or "").strip()
            reply = str(payload.get("prompt_response") or "").strip()
            n = int(state.get("turns") or 0)
            key = digest(session, n, prompt, reply)
            for role, text in (("user", prompt), ("assistant", reply)):
                if text and not (role == "user" and text.startswith(IGNORED)):
                    out.append(turn(self, session=session, role=role, text=text, names=names, key=f"{key}:{role}",
                                    created_at=payload.get("timestamp")))
            return out, {**state, "turns": n + 1}
        return [], state

    def default_transcripts(self) -> Path | None:
        base = os.environ.get("GEMINI_CLI_HOME") or str(Path.home())
        return Path(base).expanduser() / ".gemini" / "tmp"

    def find_transcripts(self, path: Path) -> list[Path]:
        path = Path(path).expanduser()
        if path.is_dir():
            found = [p for p in path.rglob("*.json*") if p.is_file() and p.suffix in (".json", ".jsonl")
                     and ("chats" in p.relative_to(path).parts or path.name == "chats")]
            return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)))
        return [path]

    def transcript_turns(self, path: Path, names: Names) -> Iterable[dict[str, Any]]:
        session = None
        for _, entry in read_jsonl(path):
            if isinstance(entry.get("sessionId"), str):
                session = entry["sessionId"]
                break
        if session is None:
            try:
                whole = json.loads(Path(path).read_text(encoding="utf-8"))
                session = whole.get("sessionId") if isinstance(whole, dict) else None
            except (OSError, ValueError):
                session = None
        session = str(session or Path(path).stem)
        for message in messages(path):
            t = message_turn(self, message, session, names)
            if t is not None:
                yield t
