"""Claude Code as a host of the hook core (:class:`pps_hooks.host.Host`), the first one.

Its hooks keep their own command (``pps_claude_code.hook``: a standard-library fast path when a server owns the
entity, a glance when none is warm yet, the server started detached) on the core's runner, log and isolation;
this class states the rest of the contract the other hosts fill, so the core sees every host one way: the event
mapping, the output shape (``hookSpecificOutput.additionalContext`` within ``[claude_code] startup_budget``),
the settings file and its hooks, the transcripts and their turns (the same ids as the hooks give them).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pps_hooks.host import Host, Names


class ClaudeCodeHost(Host):
    name = "claude-code"
    title = "Claude Code"
    source = "claude-code"
    events = {"SessionStart": "start", "UserPromptSubmit": "prompt", "Stop": "reply", "PreCompact": "compact",
              "SessionEnd": "end"}
    #: Claude Code truncates a hook's additionalContext near 10,000 characters; startup_budget defaults to 9,000.
    context_limit = 9_000

    def __init__(self) -> None:
        from .install import HOST_TIMEOUTS

        self.host_timeouts = dict(HOST_TIMEOUTS)

    def new_turns(self, event: str, payload: dict[str, Any], state: dict[str, Any],
                  names: Names) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The transcript's entries from the session's byte offset (what the hooks' own sync does)."""
        from .transcripts import transcript_turns

        path = Path(str(payload.get("transcript_path") or "")).expanduser()
        if not payload.get("transcript_path") or not path.is_file():
            return [], state
        offset = int(state.get("offset") or 0) if state.get("transcript") == str(path) else 0
        turns, end = transcript_turns(path, entity=names.assistant, user_name=names.user, offset=offset,
                                      session_id=self.session_id(payload))
        return turns, {**state, "transcript": str(path), "offset": end}

    def config_file(self, given: str | None = None) -> Path:
        from .install import settings_file

        return settings_file(given)

    def install(self, path: Path, commands: dict[str, str]) -> Path:
        from . import install

        return install.install(path, {event: [{"hooks": [{"type": "command", "command": command,
                                                           "timeout": self.host_timeouts[event]}]}]
                                      for event, command in commands.items()})

    def uninstall(self, path: Path) -> int:
        from . import install

        return install.uninstall(path)

    def installed(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        from .install import installed_hooks

        return installed_hooks(data)

    def default_transcripts(self) -> Path | None:
        import os

        return Path(os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude").expanduser() / "projects"

    def find_transcripts(self, path: Path) -> list[Path]:
        from .transcripts import find_transcripts

        return find_transcripts(path)

    def transcript_turns(self, path: Path, names: Names) -> Iterable[dict[str, Any]]:
        from .transcripts import transcript_turns

        return transcript_turns(Path(path), entity=names.assistant, user_name=names.user)[0]
