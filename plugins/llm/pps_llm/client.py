"""A minimal OpenAI-compatible chat client (standard library only): Ollama, vLLM, a cloud API."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from pps_core.errors import Unavailable

from .settings import LLMSettings


class ChatClient:
    """A :class:`pps_core.chat.ChatModel`: ``complete(system, user)`` -> the assistant's text. Errors become
    :class:`Unavailable`."""

    def __init__(self, settings: LLMSettings, model: str | None = None) -> None:
        if not settings.configured and not (settings.base_url and model):
            raise Unavailable("no LLM is configured: set [llm] base_url and model in the entity's pps.toml "
                              "(any OpenAI-compatible endpoint)")
        self.url = (settings.base_url or "").rstrip("/") + "/chat/completions"
        self.model = model or settings.model
        self.api_key = settings.api_key
        self.timeout_s = settings.timeout_s
        self.name = f"{self.model} at {settings.base_url}"

    @classmethod
    def for_endpoint(cls, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0,
                     ) -> ChatClient:
        return cls(LLMSettings(base_url=base_url, model=model, api_key=api_key, timeout_s=timeout_s))

    def complete(self, system: str, user: str, temperature: float = 0.2) -> str:
        body = {"model": self.model, "temperature": temperature,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                answer = json.loads(resp.read())
            text = answer["choices"][0]["message"]["content"]
        except urllib.error.HTTPError as exc:
            raise Unavailable(f"LLM at {self.url} answered HTTP {exc.code}") from None
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise Unavailable(f"LLM at {self.url} failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(text, str) or not text.strip():
            raise Unavailable(f"LLM at {self.url} gave an empty answer")
        return text.strip()
