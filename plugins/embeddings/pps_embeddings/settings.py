"""Settings of the embeddings plugin: ``[embeddings]`` in pps.toml or ``PPS_EMBEDDINGS_*``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from pps_core import PluginSettings


class EmbeddingSettings(PluginSettings, env_prefix="PPS_EMBEDDINGS_"):
    provider: Literal["onnx", "openai"] = Field(
        "onnx", description="'onnx': the local all-MiniLM-L6-v2; 'openai': an OpenAI-compatible /embeddings endpoint")
    batch_size: int = Field(32, ge=1, le=2048, description="texts per model run (onnx) or per request (openai)")

    # -- onnx ---------------------------------------------------------------------------------
    model_path: Path | None = Field(
        None, description="a pre-placed model.onnx to use instead of the installed package's; it must be the "
                          "same file (its sha256 is checked)")
    threads: int = Field(0, ge=0, le=256, description="onnxruntime intra-op threads; 0 = one per core")
    max_tokens: int = Field(256, ge=8, le=512, description="longer texts are truncated (the model's limit is 256)")

    # -- openai -------------------------------------------------------------------------------
    base_url: str | None = Field(None, description="e.g. http://127.0.0.1:11434/v1 (the part before /embeddings)")
    model: str | None = Field(None, description="embedding model name at that endpoint")
    api_key: SecretStr | None = Field(None, description="sent as a Bearer token; never logged")
    dimension: int | None = Field(None, ge=1, le=65_536, description="length of the endpoint's vectors")
    timeout_s: float = Field(30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _openai_complete(self) -> EmbeddingSettings:
        if self.provider == "openai":
            missing = [n for n in ("base_url", "model", "dimension") if not getattr(self, n)]
            if missing:
                raise ValueError("provider 'openai' needs " + ", ".join(f"embeddings.{n}" for n in missing)
                                 + " (or PPS_EMBEDDINGS_" + "/".join(n.upper() for n in missing) + ")")
            if not self.base_url.startswith(("http://", "https://")):
                raise ValueError(f"embeddings.base_url must start with http:// or https://, got {self.base_url!r}")
        return self
