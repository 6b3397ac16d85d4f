"""Codex CLI as a host of the PPS hook core (:class:`pps_hooks.host.Host`).

From Codex's hooks documentation (developers.openai.com/codex/hooks) and its source (openai/codex
``codex-rs/hooks/schema/generated/*.command.input.schema.json``, ``codex-rs/hooks/src/events/session_start.rs``,
``codex-rs/hooks/src/engine/discovery.rs``):

- hooks live in ``hooks.json`` beside each config layer; the user's is ``~/.codex/hooks.json`` (``$CODEX_HOME``):
  ``{"hooks": {"<Event>": [{"matcher": ..., "hooks": [{"type": "command", "command": ..., "timeout": <seconds>,
  "statusMessage": ...}]}]}}``;
- every payload has ``session_id``, ``transcript_path`` (string or null), ``cwd``, ``hook_event_name`` and
  ``model``; ``SessionStart`` adds ``source`` (startup, resume, clear, compact) and ``permission_mode``;
  ``UserPromptSubmit`` ``turn_id`` and ``prompt``; ``Stop`` ``turn_id``, ``stop_hook_active`` and
  ``last_assistant_message``; ``PreCompact`` ``turn_id`` and ``trigger``. Codex has no session-end event;
- ``SessionStart`` (and ``UserPromptSubmit``) inject ``hookSpecificOutput.additionalContext`` (with
  ``hookEventName``); JSON-looking stdout that does not parse fails the hook, and plain stdout would become
  context, so a hook prints JSON or nothing;
- the session is a rollout (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``): ``{"timestamp", "type",
  "payload"}`` lines, ``session_meta`` (``payload.id``), ``event_msg`` of type ``task_started`` (``turn_id``),
  ``user_message`` (``message``), ``agent_message`` (``message``) and ``task_complete`` (``turn_id``,
  ``last_agent_message``), beside ``response_item`` and ``turn_context`` lines; Codex 0.17x writes the turn's
  messages as ``item_completed`` events (``item.type`` UserMessage / AgentMessage, with ``turn_id``) and the
  ``task_started`` turn id under ``turn_attribution`` (``tests/payloads/rollout-0.171.0.jsonl``, written by
  Codex itself).

Capture: the prompt at ``UserPromptSubmit`` and the turn's final reply at ``Stop``, keyed by session and
``turn_id`` (so a hook run twice, or ``pps import codex`` of the same rollout, stores nothing new); at
``PreCompact`` every turn of the rollout, so a turn whose hook failed is stored before the context shrinks.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pps_hooks.host import Host, Names, read_jsonl, turn

#: User text Codex itself puts in a prompt's place (instructions, environment), never the user's words.
WRAPPERS = ("<user_instructions>", "<environment_context>", "<user_shell_command>", "# AGENTS.md instructions")


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser()


class CodexHost(Host):
    name = "codex"
    title = "Codex CLI"
    source = "codex"
    events = {"SessionStart": "start", "UserPromptSubmit": "prompt", "Stop": "reply", "PreCompact": "compact"}
    #: seconds (Codex's ``timeout`` unit)
    host_timeouts = {"SessionStart": 20, "UserPromptSubmit": 10, "Stop": 15, "PreCompact": 20}
    context_limit = 9_000

    def config_file(self, given: str | None = None) -> Path:
        return Path(given).expanduser() if given else codex_home() / "hooks.json"

    def hook_entry(self, event: str, command: str) -> dict[str, Any]:
        return {"hooks": [{"type": "command", "command": command, "timeout": self.host_timeouts[event],
                           "statusMessage": "PPS memory"}]}

    def setup_notes(self, path: Path) -> list[str]:
        return ["Codex runs hooks when its hooks feature is on: on by default in recent releases; older ones need "
                "`[features] codex_hooks = true` in ~/.codex/config.toml",
                "Codex may list new hooks for review before it runs them: trust the PPS hooks there (/hooks)"]

    def new_turns(self, event: str, payload: dict[str, Any], state: dict[str, Any],
                  names: Names) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        session = self.session_id(payload)
        turn_id = str(payload.get("turn_id") or "")
        moment = self.events[event]
        if moment == "prompt":
            role, text = "user", str(payload.get("prompt") or "").strip()
        elif moment == "reply":
            role, text = "assistant", str(payload.get("last_assistant_message") or "").strip()
        elif moment == "compact":  # before the context shrinks: every turn of the rollout, so one a failed hook
            rollout = Path(str(payload.get("transcript_path") or "")).expanduser()  # missed is stored now (the
            if payload.get("transcript_path") and rollout.is_file():  # same ids: the rest are stored already)
                return [t for t in self.transcript_turns(rollout, names) if t["session_id"] == session], state
            return [], state
        else:
            return [], state
        if not text or not turn_id or (role == "user" and text.startswith(WRAPPERS)):
            return [], state
        meta = {"turn_id": turn_id, **({"model": payload["model"]} if payload.get("model") else {})}
        return [turn(self, session=session, role=role, text=text, names=names, key=f"{session}:{turn_id}:{role}",
                     metadata=meta)], state

    def default_transcripts(self) -> Path | None:
        return codex_home() / "sessions"

    def find_transcripts(self, path: Path) -> list[Path]:
        path = Path(path).expanduser()
        if path.is_dir():
            return sorted((p for p in path.rglob("rollout-*.jsonl") if p.is_file()),
                          key=lambda p: (p.stat().st_mtime, str(p)))
        return [path]

    def transcript_turns(self, path: Path, names: Names) -> Iterable[dict[str, Any]]:
        """Each turn's prompt (its first ``user_message``) and final reply (``task_complete``'s
        ``last_agent_message``, else its last ``agent_message``), with the ids the hooks give them."""
        session = Path(path).stem
        turn_id: str | None = None
        n = 0
        prompt: tuple[str, str | None] | None = None
        reply: tuple[str, str | None] | None = None

        def flush() -> Iterable[dict[str, Any]]:
            key = turn_id or f"n{n}"
            for role, item in (("user", prompt), ("assistant", reply)):
                if item and item[0].strip() and not (role == "user" and item[0].lstrip().startswith(WRAPPERS)):
                    yield turn(self, session=session, role=role, text=item[0].strip(), names=names,
                               key=f"{session}:{key}:{role}", created_at=item[1],
                               metadata={"turn_id": turn_id} if turn_id else None)

        for _, line in read_jsonl(path):
            body = line.get("payload") if isinstance(line.get("payload"), dict) else {}
            kind = line.get("type")
            if kind == "session_meta" and isinstance(body.get("id"), str):
                session = body["id"]
            if kind != "event_msg":
                continue
            what = body.get("type")
            if what == "task_started":
                yield from flush()
                n += 1
                started = body.get("turn_id") or (body.get("turn_attribution") or {}).get("turn_id")
                turn_id, prompt, reply = (str(started) if started else None), None, None
            elif what == "item_completed" and isinstance(body.get("item"), dict):  # 0.17x: typed items
                item = body["item"]
                text = "\n".join(str(c.get("text") or "") for c in item.get("content") or [] if isinstance(c, dict))
                turn_id = turn_id or (str(body["turn_id"]) if body.get("turn_id") else None)
                if item.get("type") == "UserMessage" and text.strip():
                    prompt = prompt or (text, line.get("timestamp"))
                elif item.get("type") == "AgentMessage" and text.strip():
                    reply = (text, line.get("timestamp"))
            elif what == "user_message" and isinstance(body.get("message"), str):
                if prompt is not None and reply is not None:  # an older rollout: no task_started between turns
                    yield from flush()
                    n += 1
                    turn_id, reply = None, None
                prompt = prompt or (body["message"], line.get("timestamp"))
            elif what == "agent_message" and isinstance(body.get("message"), str):
                reply = (body["message"], line.get("timestamp"))
            elif what == "task_complete" and isinstance(body.get("last_agent_message"), str):
                reply = (body["last_agent_message"], line.get("timestamp"))
        yield from flush()
