"""The embedder contract shared by every layer that wants vectors."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Protocol, runtime_checkable

#: One-text embeddings kept by :class:`SharedQueries`: how many, and for how long (seconds).
QUERY_CACHE = 64
QUERY_TTL_S = 2.0


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors. Provided by the ``pps_embedder`` hook."""

    name: str
    dimension: int

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed a batch of texts (blocking; call from a worker thread on hot async paths)."""
        ...


class SharedQueries:
    """The entity's embedder as layers get it (``memory.embedder``): a one-text call (a question, a recall's
    context) is embedded once while several layers ask for it at the same moment, and its vector kept for
    :data:`QUERY_TTL_S` seconds (the layers of one recall ask within milliseconds of each other) (at most :data:`QUERY_CACHE` of them), so an ``ambient_recall`` that searches
    four layers runs the model once, not four times. Batches pass through. Keys are SHA-256 digests: no text
    is kept. Every other attribute is the wrapped embedder's."""

    def __init__(self, inner: Embedder, size: int | None = None, ttl_s: float | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.size = QUERY_CACHE if size is None else size
        self.ttl_s = QUERY_TTL_S if ttl_s is None else ttl_s
        self._lock = threading.Lock()
        self._done: OrderedDict[bytes, tuple[float, list[float]]] = OrderedDict()
        self._flight: dict[bytes, Future[list[float]]] = {}

    def __getattr__(self, attr: str) -> Any:  # loaded, load(), load_ms, model_path, ...
        return getattr(self.inner, attr)

    def clear(self) -> None:
        """Forget every kept vector (a benchmark that times each call's own embedding)."""
        with self._lock:
            self._done.clear()

    def embed(self, texts: list[str]) -> list[list[float]]:
        texts = list(texts)
        if len(texts) != 1 or not isinstance(texts[0], str) or self.size <= 0:
            return self.inner.embed(texts)
        key = hashlib.sha256(texts[0].encode("utf-8", "surrogatepass")).digest()
        now = time.monotonic()
        with self._lock:
            hit = self._done.get(key)
            if hit is not None and now - hit[0] <= self.ttl_s:
                return [list(hit[1])]
            flight = self._flight.get(key)
            owner = flight is None
            if flight is None:
                flight = self._flight[key] = Future()
        if not owner:
            return [list(flight.result())]
        try:
            vector = list(self.inner.embed(texts)[0])
        except BaseException as exc:
            with self._lock:
                self._flight.pop(key, None)
            flight.set_exception(exc)
            raise
        with self._lock:
            self._flight.pop(key, None)
            self._done[key] = (time.monotonic(), vector)
            self._done.move_to_end(key)
            while len(self._done) > self.size:
                self._done.popitem(last=False)
        flight.set_result(vector)
        return [list(vector)]
