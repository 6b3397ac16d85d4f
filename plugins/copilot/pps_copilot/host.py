"""GitHub Copilot CLI as a host of the PPS hook core (:class:`pps_hooks.host.Host`).

From GitHub's hooks reference (github/docs ``content/copilot/reference/hooks-reference.md``, formerly
``copilot-cli-reference/cli-hooks-reference.md``):

- hook files are JSON with ``"version": 1`` and a ``hooks`` table of flat entries ``{"type": "command",
  "bash": ..., "timeoutSec": ...}``; Copilot CLI loads ``.github/hooks/*.json`` of the repository and every
  ``*.json`` of the user-level hooks folder, ``~/.copilot/hooks/`` (``$COPILOT_HOME/hooks/``), and runs them all.
  ``pps setup copilot`` writes its own file there, ``pps.json``: every repository gets the entity's memory;
- configured with camelCase event names the payloads are camelCase: ``sessionStart`` (``sessionId``,
  ``timestamp`` in ms, ``cwd``, ``source``, ``initialPrompt``), ``userPromptSubmitted`` (``prompt``),
  ``agentStop`` (``transcriptPath``, ``stopReason``, ``stop_hook_active``), ``preCompact`` (``transcriptPath``,
  ``trigger``), ``sessionEnd`` (``reason``). No ``hook_event_name``: the event is the command line's;
- ``sessionStart`` can inject ``additionalContext`` (top-level, as ``notification`` and ``postToolUse`` return it;
  ``postToolUse`` contexts are capped at 10 KB, so the startup package is kept under 8,000 characters): Copilot
  CLI 1.0.102 records it as the hook's output and sends it to the model as a user message before the prompt
  (``tests/test_copilot_cli.py``); the other events' output is not read. Copilot CLI has no field for a line shown to the user: a failure is in the
  hooks log and ``pps hooks status``;
- the transcript is the session's event log (``~/.copilot/session-state/<sessionId>/events.jsonl``): lines
  ``{"type", "data", "id", "timestamp", "parentId", "ephemeral"}``; ``user.message`` (``data.content``),
  ``assistant.message`` (``data.content``, ``data.messageId``, ``data.toolRequests``, ``data.parentToolCallId``
  inside a subagent), streaming deltas marked ``ephemeral``.

Capture: from the transcript, from where the session's last hook stopped (byte offset, under the session's lock),
every user message and every top-level assistant message with text, keyed by the event's ``id``; at every event
(the reply may land after ``agentStop`` fired: the next hook takes it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pps_hooks.host import Host, Names, read_jsonl, turn


def copilot_home() -> Path:
    return Path(os.environ.get("COPILOT_HOME") or Path.home() / ".copilot").expanduser()


def event_turn(host: Host, entry: dict[str, Any], session: str, names: Names) -> dict[str, Any] | None:
    kind = entry.get("type")
    data = entry.get("data") if isinstance(entry.get("data"), dict) else {}
    if kind not in ("user.message", "assistant.message") or entry.get("ephemeral") or data.get("parentToolCallId"):
        return None
    text = data.get("content")
    if not isinstance(text, str) or not text.strip() or not entry.get("id"):
        return None
    role = "user" if kind == "user.message" else "assistant"
    meta = {"model": data["model"]} if role == "assistant" and data.get("model") else {}
    return turn(host, session=session, role=role, text=text.strip(), names=names, key=str(entry["id"]),
                created_at=entry.get("timestamp"), metadata=meta)


class CopilotHost(Host):
    name = "copilot"
    title = "Copilot CLI"
    source = "copilot-cli"
    events = {"sessionStart": "start", "userPromptSubmitted": "prompt", "agentStop": "reply",
              "preCompact": "compact", "sessionEnd": "end"}
    #: seconds (``timeoutSec``; Copilot's default is 30)
    host_timeouts = {"sessionStart": 20, "userPromptSubmitted": 10, "agentStop": 15, "preCompact": 20,
                     "sessionEnd": 15}
    context_limit = 8_000

    def session_id(self, payload: dict[str, Any]) -> str:
        return str(payload.get("sessionId") or payload.get("session_id") or "unknown")

    def context_output(self, event: str, text: str) -> dict[str, Any] | None:
        return {"additionalContext": text}

    def notice_output(self, text: str) -> dict[str, Any] | None:
        return None  # no user-visible field: the hooks log and `pps hooks status` say it

    def config_file(self, given: str | None = None) -> Path:
        return Path(given).expanduser() if given else copilot_home() / "hooks" / "pps.json"

    def base_config(self) -> dict[str, Any]:
        return {"version": 1}

    def hook_entry(self, event: str, command: str) -> dict[str, Any]:
        return {"type": "command", "bash": command, "timeoutSec": self.host_timeouts[event]}

    def transcript(self, payload: dict[str, Any], state: dict[str, Any]) -> Path | None:
        given = payload.get("transcriptPath") or payload.get("transcript_path") or state.get("transcript")
        candidates = [Path(str(given)).expanduser()] if given else []
        session = self.session_id(payload)
        base = copilot_home() / "session-state"
        candidates += [base / session / "events.jsonl", base / f"{session}.jsonl"]
        return next((p for p in candidates if p.is_file()), None)

    def new_turns(self, event: str, payload: dict[str, Any], state: dict[str, Any],
                  names: Names) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        path = self.transcript(payload, state)
        if path is None:
            return [], state
        session = self.session_id(payload)
        offset = int(state.get("offset") or 0) if state.get("transcript") == str(path) else 0
        if offset > path.stat().st_size:  # rewritten: start over (ids dedupe)
            offset = 0
        out, end = [], offset
        for pos, entry in read_jsonl(path, offset):
            end = pos
            t = event_turn(self, entry, session, names)
            if t is not None:
                out.append(t)
        return out, {**state, "transcript": str(path), "offset": end}

    def default_transcripts(self) -> Path | None:
        return copilot_home() / "session-state"

    def find_transcripts(self, path: Path) -> list[Path]:
        path = Path(path).expanduser()
        if path.is_dir():
            return sorted((p for p in path.rglob("*.jsonl") if p.is_file()), key=lambda p: (p.stat().st_mtime, str(p)))
        return [path]

    def transcript_turns(self, path: Path, names: Names) -> Iterable[dict[str, Any]]:
        session = Path(path).parent.name if Path(path).name == "events.jsonl" else Path(path).stem
        for _, entry in read_jsonl(path):
            if entry.get("type") == "session.start" and isinstance((entry.get("data") or {}).get("sessionId"), str):
                session = entry["data"]["sessionId"]
            t = event_turn(self, entry, session, names)
            if t is not None:
                yield t
