"""Turn and summary vectors on PostgreSQL: pgvector columns, and each server's in-process matrix of turn vectors.

The turn domain (``pps_turns.retriever``) embeds and fuses; this keeps the vectors and answers the store's dense
calls. Turn similarities come from a ``pps_turns.vectors.TurnVectors`` matrix (it blends each turn's neighbours
into a context vector: a per-query scan in SQL cannot do that cheaply), which each server keeps and brings up to
date with the rows other servers wrote when the row count moves. Summary similarities are a pgvector cosine
search (``<=>``) in SQL.
"""

from __future__ import annotations

from typing import Any

from pps_turns.vectors import TurnVectors

#: Rows loaded again behind the newest id a server has: ids commit out of order across servers.
RELOAD_SLACK = 5000


def vec(v: Any) -> str:
    """A pgvector literal ('[0.1,0.2,...]') from float32 bytes or any float sequence."""
    import numpy as np

    if isinstance(v, bytes | bytearray | memoryview):
        v = np.frombuffer(v, dtype=np.float32)
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


class TurnMatrix:
    """This server's matrix of one model's turn vectors, brought up to date with every server's rows."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.vectors: TurnVectors | None = None

    def forget(self) -> None:
        self.vectors = None  # reloaded from the (smaller) table at the next search

    async def load(self, model: str) -> TurnVectors:
        import numpy as np

        if self.vectors is None or self.vectors.model != model:
            self.vectors = TurnVectors(model)
        vectors = self.vectors
        n = (await self.store.fetch("SELECT count(*) AS n FROM message_vectors WHERE model = %s", (model,)))[0]["n"]
        if n == len(vectors):
            return vectors
        if n < len(vectors):  # vectors were dropped (reindex --full) or turns forgotten elsewhere: start again
            vectors = self.vectors = TurnVectors(model)
        for attempt in range(2):
            after = int(vectors.ids[-1]) - RELOAD_SLACK if len(vectors) and attempt == 0 else 0
            rows = await self.store.fetch(
                "SELECT v.message_id, v.embedding::real[] AS e, m.channel FROM message_vectors v "
                "JOIN messages m ON m.id = v.message_id WHERE v.model = %s AND v.message_id > %s "
                "ORDER BY v.message_id", (model, after))
            fresh = [r for r in rows if not vectors.has(r["message_id"])]
            if fresh:
                vectors.add([r["message_id"] for r in fresh], [r["channel"] for r in fresh],
                            [np.asarray(r["e"], dtype=np.float32).tobytes() for r in fresh])
            if len(vectors) >= n:
                break
        return vectors
