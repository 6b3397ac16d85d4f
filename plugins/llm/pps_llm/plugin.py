"""Entry point of the llm plugin: the entity's chat model, from ``[llm]``."""

from __future__ import annotations

from typing import Any

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 45


@hookimpl
def pps_init_hints() -> list[str]:
    """The commented ``[llm]`` example ``pps init`` writes into a new entity's pps.toml."""
    return ["# [llm]  an OpenAI-compatible endpoint, optional:",
            '# base_url = "http://127.0.0.1:11434/v1"', '# model = "llama3.1"']


@hookimpl
def pps_chat_model(settings: Any, model: str | None) -> Any:
    """An OpenAI-compatible client when ``[llm]`` names an endpoint and a model (``model`` overrides the
    latter), else None: another provider, or none."""
    from .client import ChatClient
    from .settings import llm_settings

    cfg = llm_settings(settings)
    if not (cfg.base_url and (model or cfg.model)):
        return None
    return ChatClient(cfg, model)
