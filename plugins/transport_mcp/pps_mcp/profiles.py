"""Tool profiles: which operations an MCP client sees, so the tool list fits a context-window budget.

``[mcp] tools`` in pps.toml (env ``PPS_MCP_TOOLS``, or ``pps serve mcp --tools``):

- ``"essential"`` (default, issue 40): the operations their plugins mark ``essential`` (``pps_core.Operation``): what a model
  needs in a session whose memory is captured and injected by hooks (search, save a crystal or
  word-photo, read one, walk the turns and summaries the startup package points to), each with the first
  sentence of its description and its parameters without JSON Schema ``title`` annotations (pydantic's
  ``"title": "Query"`` beside every field repeats the name; types, limits, defaults and descriptions stay);
  under 8,100 characters of tool list with the default plugins, where ``all`` is over 40,000
  (``bench/mcp_tools.py`` measures each profile);
- ``"all"``: every operation of the catalog, with its full description (``tools = "all"``, ``--tools all``);
- a list of operation names: exactly those.

A profile decides what is *listed*; an operation outside it can still be called by name (the startup
package's "left out" pointers may name one). ``[mcp] startup = "hooks"`` (or ``--startup hooks``)
tells the model the startup package is already in its context instead of asking it to fetch it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from pps_core.catalog import ToolSpec
from pps_core.errors import ConfigError
from pps_core.settings import PluginSettings

INSTRUCTIONS = {
    "tool": "Memory of an AI entity (PPS). Start a session with ambient_recall(context='startup'); "
            "search it with ambient_recall(context=<what is being talked about>).",
    "hooks": "Memory of an AI entity (PPS). The startup package (recent memory, crystals, summaries) is already "
             "in your context, injected when the session started; do not fetch it again. Search memory with "
             "ambient_recall(context=<what is being talked about>); save what matters with crystallize or anchor_save.",
}


class McpSettings(PluginSettings):
    """``[mcp]`` of pps.toml (env ``PPS_MCP_*``)."""

    model_config = SettingsConfigDict(env_prefix="PPS_MCP_", extra="ignore")

    tools: str | list[str] = Field("essential", description="'essential' (default: what a model needs, a small "
                                                            "tool list), 'all', or a list of operation names")
    startup: Literal["tool", "hooks"] = Field("tool", description="who brings the startup package: the model "
                                                                   "calls ambient_recall('startup'), or hooks inject it")


def mcp_settings(settings, **overrides) -> McpSettings:
    given = {k: v for k, v in overrides.items() if v is not None}
    return settings.plugin_settings(McpSettings, "mcp", **given)


def parse_profile(value: str | list[str] | None) -> str | list[str]:
    """``"essential"``, ``"all"``, or a list of names (also written ``"a,b,c"`` on the command line)."""
    if value is None:
        return "essential"
    if isinstance(value, str):
        value = value.strip()
        if value in ("all", "essential"):
            return value
        names = [n.strip() for n in value.split(",") if n.strip()]
    else:
        names = [str(n).strip() for n in value if str(n).strip()]
    if not names:
        raise ConfigError("[mcp] tools: expected 'all', 'essential' or a list of operation names")
    return names


_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(\s|$)", re.S)


def concise(description: str) -> str:
    """The first sentence of a description (the whole of it when it has one sentence)."""
    found = _FIRST_SENTENCE.match(description.strip())
    return found.group(1) if found else description.strip()


def untitled(schema: object) -> object:
    """A JSON schema without its ``title`` annotations (validation unchanged; a property *named* title stays)."""
    if isinstance(schema, list):
        return [untitled(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: untitled(sub) for name, sub in value.items()}
        else:
            out[key] = untitled(value)
    return out


def select(specs: list[ToolSpec], profile: str | list[str]) -> list[ToolSpec]:
    """The tools a profile lists, in catalog order. Unknown names in a list are a ConfigError."""
    if profile == "all":
        return specs
    known = {s.name for s in specs}
    if profile == "essential":
        return [replace(s, description=concise(s.description), input_schema=untitled(s.input_schema))
                for s in specs if s.essential]
    unknown = [n for n in profile if n not in known]
    if unknown:
        raise ConfigError(f"[mcp] tools names operations this entity does not have: {', '.join(unknown)} "
                          f"(it has: {', '.join(sorted(known))})")
    return [s for s in specs if s.name in set(profile)]
