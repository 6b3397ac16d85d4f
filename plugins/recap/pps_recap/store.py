"""Where recaps live and which log is the newest: ``<home>/_recap.md`` plus a ``_recap.json`` sidecar.

The sidecar names the log the recap was made from (path, size, modification time), so a recap can
be told stale: the newest log changed after it was written (the session crashed before its recap,
or no recap was ever made). The logs considered are the entity's ``[recap] logs`` globs plus every
transcript the Claude Code hooks have captured (``pps_claude_code.sessions``).
"""

from __future__ import annotations

import glob
import json
import os
import time
from pathlib import Path

from pps_claude_code.sessions import captured_sessions
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from pps_core.settings import PluginSettings

RECAP_FILE = "_recap.md"
META_FILE = "_recap.json"


class RecapSettings(PluginSettings):
    """``[recap]`` of pps.toml (env ``PPS_RECAP_*``)."""

    model_config = SettingsConfigDict(env_prefix="PPS_RECAP_", extra="ignore")

    budget: int = Field(1000, ge=50, le=100_000, description="token budget of a recap (~4 characters a token)")
    logs: list[str] = Field(default_factory=list,
                            description="globs of session logs (JSONL) to recap, e.g. '~/agent/logs/*.jsonl'")
    summarizer: str = Field("auto", pattern="^(auto|llm|extractive)$",
                            description="auto = the [llm] endpoint when configured, else extractive")
    model: str | None = Field(None, description="LLM model for recaps; default: [llm] model")
    novelty: bool = Field(False, description="weigh summaries by novelty against existing memories")
    chunk_tokens: int = Field(350, ge=50, le=10_000)
    merge_threshold: float | None = Field(None, ge=-1, le=1, description="None = 0.55 embeddings, 0.2 lexical")
    startup_regenerate: bool = Field(True, description="at startup, regenerate a missing recap from the newest log")


def recap_settings(settings) -> RecapSettings:
    return settings.plugin_settings(RecapSettings, "recap")


def load(home: Path) -> tuple[str, dict] | None:
    """The saved recap text and its sidecar, or None."""
    path = Path(home) / RECAP_FILE
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8").strip()
    meta: dict = {}
    try:
        meta = json.loads((Path(home) / META_FILE).read_text())
    except (OSError, ValueError):
        pass
    return (text, meta) if text else None


def save(home: Path, text: str, source: Path | None, stats: dict) -> Path:
    from pps_core.atomic import atomic_write

    meta = {"generated": time.time(), "stats": stats}
    if source is not None:
        st = Path(source).stat()
        meta.update(source=str(Path(source).resolve()), source_size=st.st_size, source_mtime=st.st_mtime)
    atomic_write(Path(home) / META_FILE, json.dumps(meta, indent=2, default=str))
    atomic_write(Path(home) / RECAP_FILE, text + "\n")
    return Path(home) / RECAP_FILE


def candidate_logs(settings, exclude_session: str | None = None) -> list[Path]:
    """Session logs of the entity, oldest first by modification time (the newest is last)."""
    found: dict[str, Path] = {}
    for pattern in recap_settings(settings).logs:
        for name in glob.glob(os.path.expanduser(pattern), recursive=True):
            if os.path.isfile(name):
                found[str(Path(name).resolve())] = Path(name).resolve()
    for session in captured_sessions(settings.home):  # what the Claude Code hooks captured (their public contract)
        if exclude_session and session.session_id == exclude_session:
            continue
        found[str(session.transcript.resolve())] = session.transcript.resolve()
    if exclude_session:
        found = {k: p for k, p in found.items() if p.stem != exclude_session}
    return sorted(found.values(), key=lambda p: (p.stat().st_mtime, str(p)))


def newest_log(settings, exclude_session: str | None = None) -> Path | None:
    logs = candidate_logs(settings, exclude_session)
    return logs[-1] if logs else None


def is_stale(home: Path, log: Path | None) -> bool:
    """True when there is no recap, its own log changed since, or ``log`` was written after it."""
    saved = load(home)
    if saved is None:
        return log is not None
    if log is None:
        return False
    meta = saved[1]
    try:
        st = log.stat()
    except OSError:
        return False
    if meta.get("source") == str(log.resolve()):  # the same log grew since (a resumed session)
        return meta.get("source_size") != st.st_size or (meta.get("source_mtime") or 0) < st.st_mtime
    return st.st_mtime > (meta.get("generated") or 0)  # a later session left no recap (it crashed)
