"""Entry point of the embeddings plugin: the entity's shared text embedder."""

from __future__ import annotations

import os

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 40

# Before anything can import onnxruntime: the product never phones home.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


@hookimpl
def pps_embedder(memory):
    from pydantic import ValidationError

    from pps_core.errors import ConfigError

    from .settings import EmbeddingSettings

    try:
        settings = memory.settings.plugin_settings(EmbeddingSettings, "embeddings")
    except ValidationError as exc:
        raise ConfigError(f"plugin 'embeddings': invalid settings: {exc}") from None
    if settings.provider == "openai":
        from .openai import OpenAIEmbedder

        return OpenAIEmbedder.from_settings(settings)
    from .onnx import shared_embedder

    return shared_embedder(settings)
