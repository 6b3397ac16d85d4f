"""The ChromaDB index of the word-photos: derived data, rebuilt from the files whenever in doubt.

Chroma runs embedded (PersistentClient) with telemetry off; vectors come from the entity's embedder
through a registered embedding function, so reopening a collection finds it again by name.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import chromadb  # noqa: E402
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings  # noqa: E402
from chromadb.config import Settings  # noqa: E402
from chromadb.utils.embedding_functions import register_embedding_function  # noqa: E402

COLLECTION = "word_photos"
STATE_FILE = "pps_word_photos.json"
EF_NAME = "pps_embedder"

#: Embedders loaded in this process, by name, so a collection's persisted config can find its embedder.
_LIVE: dict[str, Any] = {}
_LIVE_LOCK = threading.Lock()


@register_embedding_function
class PPSEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma's view of the entity's embedder (``memory.embedder``)."""

    def __init__(self, embedder: Any = None, embedder_name: str | None = None, dimension: int | None = None) -> None:
        self.embedder = embedder
        self.embedder_name = embedder.name if embedder is not None else embedder_name
        self.dimension = embedder.dimension if embedder is not None else dimension

    def __call__(self, input: Documents) -> Embeddings:
        embedder = self.embedder or _LIVE.get(self.embedder_name or "")
        if embedder is None:
            raise RuntimeError(f"embedder {self.embedder_name!r} is not loaded in this process "
                               f"(add the 'embeddings' plugin to the entity)")
        import numpy as np

        return [np.asarray(v, dtype=np.float32) for v in embedder.embed(list(input))]

    @staticmethod
    def name() -> str:
        return EF_NAME

    def get_config(self) -> dict[str, Any]:
        return {"embedder": self.embedder_name, "dimension": self.dimension}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> PPSEmbeddingFunction:
        return PPSEmbeddingFunction(_LIVE.get(config.get("embedder") or ""), config.get("embedder"),
                                    config.get("dimension"))

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]


class ChromaIndex:
    """Chunks of word-photos in one collection; every chunk carries its file's name and fingerprint."""

    def __init__(self, path: Path, embedder: Any) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self.client = None
        self.collection = None
        self.rebuilt = False
        self._count: int | None = None

    def open(self) -> None:
        with _LIVE_LOCK:
            _LIVE[self.embedder.name] = self.embedder
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.client = chromadb.PersistentClient(
            path=str(self.path), settings=Settings(anonymized_telemetry=False, allow_reset=False))
        ef = PPSEmbeddingFunction(self.embedder)
        want = {"pps_embedder": self.embedder.name, "pps_dimension": self.embedder.dimension}
        existing = {c.name for c in self.client.list_collections()}
        if COLLECTION in existing:
            meta = self.client.get_collection(COLLECTION, embedding_function=ef).metadata or {}
            if {k: meta.get(k) for k in want} != want:  # another embedder's vectors: rebuild from the files
                self.client.delete_collection(COLLECTION)
                self.rebuilt = True
        self.collection = self.client.get_or_create_collection(
            COLLECTION, embedding_function=ef, metadata=want, configuration={"hnsw": {"space": "cosine"}})
        _owner_only(self.path)

    def close(self) -> None:
        client, self.client, self.collection = self.client, None, None
        if client is not None and hasattr(client, "close"):
            client.close()

    def count(self) -> int:
        if self._count is None:
            self._count = self.collection.count()
        return self._count

    def fingerprints(self) -> dict[str, dict[str, Any]]:
        """Per file: sha256, stat fingerprint, title, date... From the state file when it names exactly the
        files the collection holds (reading Chroma's metadata is ~10x slower on a cold open), else from
        the metadata of each file's first chunk."""
        state = self._read_state()
        if state is not None:
            got = self.collection.get(include=[])
            if set(state) == {i.rsplit("#", 1)[0] for i in got["ids"]}:
                return state
        out: dict[str, dict[str, Any]] = {}
        got = self.collection.get(where={"chunk": 0}, include=["metadatas"])
        for meta in got["metadatas"] or []:
            out[meta["file"]] = dict(meta)
        return out

    def save_state(self, files: dict[str, dict[str, Any]]) -> None:
        """Write the per-file state beside the index, after the index itself changed."""
        from pps_core.atomic import atomic_write

        atomic_write(self.path / STATE_FILE, json.dumps(
            {"version": 1, "embedder": self.embedder.name, "files": files}, ensure_ascii=False))

    def _read_state(self) -> dict[str, dict[str, Any]] | None:
        try:
            data = json.loads((self.path / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("version") != 1 or data.get("embedder") != self.embedder.name:
            return None
        files = data.get("files")
        return files if isinstance(files, dict) else None

    def put(self, items: list[tuple[str, list[str], dict[str, Any]]]) -> int:
        """Replace the chunks of each (filename, texts, file metadata); returns chunks written."""
        if not items:
            return 0
        self.remove([name for name, _t, _m in items])
        self._count = None
        ids, docs, metas = [], [], []
        for name, texts, meta in items:
            for i, text in enumerate(texts):
                ids.append(f"{name}#{i}")
                docs.append(text)
                metas.append({**meta, "file": name, "chunk": i})
        step = max(1, min(self.client.get_max_batch_size(), 512))
        for start in range(0, len(ids), step):
            self.collection.add(ids=ids[start:start + step], documents=docs[start:start + step],
                                metadatas=metas[start:start + step])
        self._count = None
        return len(ids)

    def remove(self, names: list[str]) -> None:
        self._count = None
        for start in range(0, len(names), 500):
            part = names[start:start + 500]
            self.collection.delete(where={"file": {"$in": part}})

    def query(self, vector: list[float], n: int) -> list[tuple[str, float]]:
        """(filename, cosine distance) of the ``n`` nearest chunks to an embedded query."""
        total = self.count()
        if total == 0 or n <= 0:
            return []
        got = self.collection.query(query_embeddings=[vector], n_results=min(n, total),
                                    include=["metadatas", "distances"])
        return [(m["file"], float(d)) for m, d in zip(got["metadatas"][0], got["distances"][0], strict=True)]


def _owner_only(folder: Path) -> None:
    """Chroma creates its files with the process umask; the entity's index is the owner's alone."""
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
        for name in files:
            os.chmod(os.path.join(root, name), 0o600)
