"""``[llm]``: the OpenAI-compatible endpoint this plugin talks to (env ``PPS_LLM__BASE_URL``, ...)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from pps_core import EntitySettings, PluginSettings


class LLMSettings(PluginSettings):
    """An OpenAI-compatible chat endpoint (Ollama, vLLM, a cloud API). Optional."""

    model_config = SettingsConfigDict(env_prefix="PPS_LLM__", extra="ignore")

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    timeout_s: float = 60.0

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)


def llm_settings(settings: EntitySettings) -> LLMSettings:
    """The entity's ``[llm]`` (a plugin that talks to the same endpoint another way, the graph's extraction
    client, reads it here)."""
    return settings.plugin_settings(LLMSettings, "llm")
