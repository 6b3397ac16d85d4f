"""``[claude_code]`` of pps.toml and the names every capture path writes.

One name per speaker: the human is ``[claude_code] user_name``, else the entity-wide ``user_name`` of
pps.toml, else ``$USER``; the entity is ``[claude_code] assistant_name``, else the entity-wide
``display_name``, else the entity's name with a capital first letter ("lyra" -> "Lyra"). Hooks,
``pps import claude-code`` and PreCompact all take their names from here.
"""

from __future__ import annotations

import os

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from pps_core.settings import PluginSettings


class ClaudeCodeSettings(PluginSettings):
    """``[claude_code]`` of pps.toml (env ``PPS_CLAUDE_CODE_*``): names, budgets and the hooks' server."""

    model_config = SettingsConfigDict(env_prefix="PPS_CLAUDE_CODE_", extra="ignore")

    user_name: str | None = Field(None, description="author of the human's prompts; default: user_name, $USER")
    assistant_name: str | None = Field(None, description="author of the replies; default: display_name, Entity")
    startup_budget: int = Field(9_000, ge=200, description="characters injected at SessionStart")
    prompt_recall: bool = Field(False, description="inject the memories relevant to each prompt")
    prompt_recall_budget: int = Field(2_000, ge=200)
    prompt_recall_limit: int = Field(3, ge=1, le=20, description="results per layer for the per-prompt recall")
    prompt_recall_min_score: dict[str, float] = Field(
        default_factory=dict, description="per-layer score floor for the per-prompt recall (on top of the layer's)")
    timeout_s: float = Field(8.0, gt=0, description="a hook gives up (and exits 0) after this long")
    recap_on_end: bool = Field(True, description="write _recap.md in the background at SessionEnd")
    autostart: bool = Field(True, description="the first hook starts a detached server for the entity")
    server_idle_s: float = Field(3600.0, ge=0, description="the started server stops after this long idle (0 = never)")
    server_start_s: float = Field(17.0, gt=0, description="how long SessionStart may wait for a server starting "
                                                          "cold (Claude Code waits 20 s)")
    glance: bool = Field(True, description="when no server answers yet, SessionStart and UserPromptSubmit answer at "
                                           "once from the layers that open at a glance (turns by their words, "
                                           "crystals, the recap), say which are still warming up, and start the "
                                           "server after answering; false: they wait for it (up to server_start_s)")
    server_url: str | None = Field(None, description="a PPS server (e.g. one of a fleet: `pps serve http` on "
                                                     "PostgreSQL) every hook forwards to, with the token of this "
                                                     "home, instead of opening the stores or starting a server here")

    @field_validator("server_url")
    @classmethod
    def _server_url(cls, value: str | None) -> str | None:
        value = (value or "").strip().rstrip("/") or None
        if value is not None and not fleet_url_ok(value):
            raise ValueError(f"[claude_code] server_url must be http(s)://host[:port][/path], not {value!r}")
        return value


def fleet_url_ok(url: str) -> bool:
    """Whether ``url`` is ``http(s)://host[:port][/path]`` (no credentials in it: the token travels as a header)."""
    scheme, sep, rest = url.partition("://")
    netloc = rest.partition("/")[0]
    host, _, port = netloc.rpartition(":") if not netloc.endswith("]") else (netloc, "", "")
    host = host or netloc if not port.isdigit() else host
    return bool(sep and scheme in ("http", "https") and host and "@" not in netloc and " " not in url
                and (not port or not port.isdigit() or 0 < int(port) < 65536))


def cc_settings(settings) -> ClaudeCodeSettings:
    return settings.plugin_settings(ClaudeCodeSettings, "claude_code")


def user_name(settings, cc: ClaudeCodeSettings | None = None) -> str:
    cc = cc or cc_settings(settings)
    extra = settings.model_extra or {}
    return (cc.user_name or _text(extra.get("user_name")) or os.environ.get("USER") or "user").strip()


def assistant_name(settings, cc: ClaudeCodeSettings | None = None) -> str:
    cc = cc or cc_settings(settings)
    extra = settings.model_extra or {}
    name = cc.assistant_name or _text(extra.get("display_name"))
    return (name or settings.entity[:1].upper() + settings.entity[1:]).strip()


def _text(value) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
