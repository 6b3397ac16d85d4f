"""The chat model contract: what a plugin that talks to an LLM provides (``pps_chat_model``), and how the
plugins that need one ask for it. The kernel holds no client: a plugin provides it (the bundled one speaks to
the OpenAI-compatible endpoint of its ``[llm]`` section; a third party's may speak to anything)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .errors import Unavailable

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

    from .settings import EntitySettings


@runtime_checkable
class ChatModel(Protocol):
    """Answers one system + user exchange with the assistant's text. Provided by the ``pps_chat_model`` hook."""

    #: Which model answers (shown in reports and logs), e.g. ``"qwen2.5:7b at http://127.0.0.1:11434/v1"``.
    name: str

    def complete(self, system: str, user: str, temperature: float = 0.2) -> str:
        """The assistant's text, stripped and non-empty (blocking: call it from a worker thread on async paths).
        Raise :class:`~pps_core.errors.Unavailable` when the model cannot answer (unreachable, an error, an
        empty answer): callers fall back or report it, never crash."""
        ...


def chat_model(pm: pluggy.PluginManager | None, settings: EntitySettings, model: str | None = None,
               ) -> ChatModel | None:
    """The chat model the entity's plugins provide (first non-None answer of ``pps_chat_model``), or None."""
    if pm is None:
        return None
    found: ChatModel | None = pm.hook.pps_chat_model(settings=settings, model=model)
    return found


def require_chat_model(pm: pluggy.PluginManager | None, settings: EntitySettings, model: str | None = None,
                       ) -> ChatModel:
    """:func:`chat_model`, or :class:`Unavailable` saying how to get one."""
    found = chat_model(pm, settings, model)
    if found is None:
        raise Unavailable("no LLM is configured: no plugin of this entity provides a chat model (the bundled "
                          "one does with [llm] base_url and model in the entity's pps.toml)")
    return found
