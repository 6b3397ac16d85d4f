"""``pps doctor``'s line for the embedding model (entry point group ``pps.checks``): is the model file there?

Read from the entity's settings only: nothing is loaded, no store is opened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def model_check(settings: Any) -> tuple[str, str, str] | None:
    """("ok" | "warn" | "fail", "model", detail) for an entity that loads this plugin, else None."""
    if "embeddings" not in settings.plugins:
        return None
    from .settings import EmbeddingSettings

    es = settings.plugin_settings(EmbeddingSettings, "embeddings")
    if es.provider != "onnx":
        return "ok", "model", f"embeddings from an endpoint ({es.provider})"
    try:
        from .onnx import installed_model_path

        path = Path(es.model_path) if es.model_path else installed_model_path()
    except Exception as exc:  # noqa: BLE001 - reported as the check's failure
        return "fail", "model", f"cannot locate the embedding model: {type(exc).__name__}: {exc}"
    if not path.is_file():
        return "fail", "model", f"{path} is missing (reinstall pps-embeddings)"
    return "ok", "model", f"{path} ({path.stat().st_size / 1e6:.1f} MB)"
