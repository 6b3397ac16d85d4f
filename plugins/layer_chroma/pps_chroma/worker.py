"""The process that owns an entity's Chroma index (``serve``, started by ``pps_chroma.index``).

Chroma's native calls can hang while holding the GIL (a compaction that failed on a full disk leaves
the next ``add`` blocked for ever). In the server's own process that froze the event loop, ``/health``
and every entity; here the server waits on a socket with a timeout, then kills this process and starts
another. Requests are ``(method, args)`` tuples over a ``multiprocessing.connection.Connection``;
answers are ``(True, value)`` or ``(False, exception)``. Vectors come from the server (the entity's
embedder lives there), so this process never loads a model.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from pps_core.errors import portable_exception

COLLECTION = "word_photos"
EF_NAME = "pps_embedder"


def _die_with_parent() -> None:
    """SIGKILL when the process that forked this one ends (the fork server, which ends with the PPS server):
    a hung index process never outlives its server to hold the index against the next one."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the EOF on the connection still ends the loop
        pass


def _embedding_function():
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    @register_embedding_function
    class PPSEmbeddingFunction(EmbeddingFunction[Documents]):
        """Names the entity's embedder in the collection's config; vectors are always given, never asked for."""

        def __init__(self, embedder_name: str | None = None, dimension: int | None = None) -> None:
            self.embedder_name, self.dimension = embedder_name, dimension

        def __call__(self, input: Documents) -> Embeddings:
            raise RuntimeError("the index process embeds nothing: vectors come from the server")

        @staticmethod
        def name() -> str:
            return EF_NAME

        def get_config(self) -> dict[str, Any]:
            return {"embedder": self.embedder_name, "dimension": self.dimension}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> PPSEmbeddingFunction:
            return PPSEmbeddingFunction(config.get("embedder"), config.get("dimension"))

        def default_space(self) -> str:
            return "cosine"

        def supported_spaces(self) -> list[str]:
            return ["cosine"]

    return PPSEmbeddingFunction


class Store:
    """One collection of word-photo chunks; every chunk carries its file's name and fingerprint."""

    def __init__(self, path: str, embedder_name: str, dimension: int, server: dict | None = None) -> None:
        """Embedded at ``path``; or, with ``server`` ({host, port, ssl, token, collection}), a ``chroma run``
        server reached over HTTP (the token goes as ``Authorization: Bearer``)."""
        import chromadb
        from chromadb.config import Settings

        name = COLLECTION
        Path(path).mkdir(parents=True, exist_ok=True, mode=0o700)  # the index (embedded) or its state file
        if server:
            headers = {"Authorization": f"Bearer {server['token']}"} if server.get("token") else None
            try:
                self.client = chromadb.HttpClient(host=server["host"], port=server["port"], ssl=server.get("ssl", False),
                                                  headers=headers, settings=Settings(anonymized_telemetry=False))
            except Exception as exc:  # name the server: the layer reports it unavailable with this
                raise ConnectionError(f"Chroma server at {server['host']}:{server['port']}: {exc}") from None
            name = server["collection"]
        else:
            self.client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False,
                                                                                 allow_reset=False))
        ef = _embedding_function()(embedder_name, dimension)
        want = {"pps_embedder": embedder_name, "pps_dimension": dimension}
        self.rebuilt = False
        if name in {c.name for c in self.client.list_collections()}:
            meta = self.client.get_collection(name, embedding_function=ef).metadata or {}
            if {k: meta.get(k) for k in want} != want:  # another embedder's vectors: rebuild from the files
                self.client.delete_collection(name)
                self.rebuilt = True
        self.collection = self.client.get_or_create_collection(
            name, embedding_function=ef, metadata=want, configuration={"hnsw": {"space": "cosine"}})

    def count(self) -> int:
        return self.collection.count()

    def files(self) -> set[str]:
        return {i.rsplit("#", 1)[0] for i in self.collection.get(include=[])["ids"]}

    def first_chunks(self) -> list[dict[str, Any]]:
        return list(self.collection.get(where={"chunk": 0}, include=["metadatas"])["metadatas"] or [])

    def add(self, ids, docs, metas, vectors) -> int:
        step = max(1, min(self.client.get_max_batch_size(), 512))
        for start in range(0, len(ids), step):
            end = start + step
            self.collection.add(ids=ids[start:end], documents=docs[start:end], metadatas=metas[start:end],
                                embeddings=vectors[start:end])
        return len(ids)

    def dump(self) -> tuple[list, list, list, list]:
        """Every chunk (ids, documents, metadatas, embeddings), to be written into a fresh index."""
        ids: list = []
        docs: list = []
        metas: list = []
        vectors: list = []
        step = 2000
        while True:
            got = self.collection.get(include=["documents", "metadatas", "embeddings"], limit=step, offset=len(ids))
            if not got["ids"]:
                return ids, docs, metas, vectors
            ids += got["ids"]
            docs += got["documents"]
            metas += got["metadatas"]
            vectors += list(got["embeddings"])

    def remove(self, names: list[str]) -> None:
        for start in range(0, len(names), 500):
            self.collection.delete(where={"file": {"$in": names[start:start + 500]}})

    def query(self, vector, n: int) -> list[tuple[str, float]]:
        got = self.collection.query(query_embeddings=[vector], n_results=n, include=["metadatas", "distances"])
        return [(m["file"], float(d)) for m, d in zip(got["metadatas"][0], got["distances"][0], strict=True)]

    def close(self) -> None:
        if hasattr(self.client, "close"):
            self.client.close()




def serve(conn) -> None:
    """Answer requests on ``conn`` until it closes."""
    os.umask(0o077)  # the entity's index is the owner's alone: files 0600, folders 0700
    os.dup2(2, 1)  # stdout may be a stdio MCP session: whatever Chroma prints goes to stderr
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the server, which closes the index
    _die_with_parent()
    store: Store | None = None
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            break
        try:
            if method == "open":
                store = Store(*args)
                value: Any = store.rebuilt
            else:
                value = getattr(store, method)(*args)
            reply: tuple[bool, Any] = (True, value)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
            reply = (False, portable_exception(exc))
        conn.send(reply)
        if method == "close":
            break

