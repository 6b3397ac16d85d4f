"""Turn vectors held as one numpy matrix, with each turn's context vector (its neighbours in the same channel
blended in): the exact dense signal of the turn search, for any store that keeps its matrix in process.

A store fills it from its own vector table (``add``) and answers :meth:`pps_turns.TurnStore.turn_similarities`
with :meth:`TurnVectors.scores`. A store that ranks in an index instead (SQLite's HNSW file past its threshold,
PostgreSQL's pgvector HNSW) rescores the index's candidates with :func:`context_scores`, reading the vectors of
:func:`neighbourhood` only: no matrix of every vector in memory. The model key of a vector is ``f"{embedder.name}|{RECIPE}"``.
"""

from __future__ import annotations

from typing import Any

#: How a turn becomes text for its vector; part of the stored model key, so a change re-embeds.
RECIPE = "author+content"
EMBED_BATCH = 64


def vector_text(t: dict[str, Any]) -> str:
    return f"{t['author_name']}: {t['content']}"


class TurnVectors:
    """ids (ascending), their channels and unit vectors; context vectors derived on demand."""

    def __init__(self, model: str) -> None:
        import numpy as np

        self.model = model
        self.ids = np.empty(0, dtype=np.int64)
        self.channels: list[str] = []
        self.matrix = np.empty((0, 0), dtype=np.float32)
        self._context: dict[float, Any] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: list[int], channels: list[str], blobs: list[bytes]) -> None:
        import numpy as np

        keep = [k for k, i in enumerate(ids) if not self.has(i)]
        if not keep:
            return
        ids, channels, blobs = [ids[k] for k in keep], [channels[k] for k in keep], [blobs[k] for k in keep]
        vecs = np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs])
        new_ids = np.asarray(ids, dtype=np.int64)
        if len(self.ids) and self.matrix.shape[1] != vecs.shape[1]:
            raise ValueError(f"vector dimension changed from {self.matrix.shape[1]} to {vecs.shape[1]}")
        ids_all = np.concatenate([self.ids, new_ids])
        mat = vecs if not len(self.ids) else np.concatenate([self.matrix, vecs])
        chans = self.channels + list(channels)
        if len(self.ids) and new_ids.min() <= self.ids[-1]:  # a backfilled older turn: keep id order
            order = np.argsort(ids_all, kind="stable")
            ids_all, mat, chans = ids_all[order], mat[order], [chans[i] for i in order]
        self.ids, self.matrix, self.channels = ids_all, mat, chans
        self._context.clear()

    def has(self, i: int) -> bool:
        import numpy as np

        r = int(np.searchsorted(self.ids, i))
        return r < len(self.ids) and int(self.ids[r]) == i

    def context_matrix(self, weight: float):
        """Each turn's vector plus ``weight`` times its neighbours' in the same channel, re-normalised."""
        import numpy as np

        if not weight:
            return self.matrix
        if weight not in self._context:
            n = len(self.ids)
            same_prev = np.array([i > 0 and self.channels[i - 1] == self.channels[i] for i in range(n)])
            prev = np.zeros_like(self.matrix)
            prev[1:] = self.matrix[:-1]
            prev[~same_prev] = 0
            nxt = np.zeros_like(self.matrix)
            nxt[:-1] = self.matrix[1:]
            same_next = np.zeros(n, dtype=bool)
            same_next[:-1] = same_prev[1:]
            nxt[~same_next] = 0
            ctx = self.matrix + weight * (prev + nxt)
            ctx /= np.linalg.norm(ctx, axis=1, keepdims=True) + 1e-12
            self._context = {weight: ctx.astype(np.float32)}
        return self._context[weight]

    def scores(self, qvec, context: float = 0.0):
        import numpy as np

        if not len(self.ids):
            return self.ids, np.empty(0, dtype=np.float32)
        return self.ids, self.context_matrix(context) @ np.asarray(qvec, dtype=np.float32)


def context_scores(ids, held, mat, chan, qvec, context: float):
    """Exact cosines of the context vectors (as :meth:`TurnVectors.context_matrix` makes them: the turn's vector
    plus ``context`` times the turns next to it in the same channel) of ``ids`` and of the turns next to them.

    ``held``: the turn ids whose vectors are known (ascending: the candidates, their neighbours and the turns
    two away, as far as they have vectors), ``mat`` their vectors (one row each), ``chan`` their channels (any
    comparable codes, one each). Vectorised: a few hundred candidates take well under a millisecond."""
    import numpy as np

    held = np.asarray(held, dtype=np.int64)
    cand = np.unique(np.asarray(ids, dtype=np.int64))
    # a turn can rank high by its context (a neighbour close to the question) while its own vector does not:
    # the candidates' neighbours are scored too (their vectors were read anyway)
    want = np.unique(np.concatenate([cand - 1, cand, cand + 1])) if context else cand
    at = np.searchsorted(held, want)
    ok = at < len(held)
    ok[ok] = held[at[ok]] == want[ok]
    keep, at = want[ok], at[ok]
    if not len(keep):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    mat = np.asarray(mat, dtype=np.float32)
    chan = np.asarray(chan)
    out = mat[at]
    if context:
        out = out.copy()
        for j in (-1, 1):
            nb = np.searchsorted(held, keep + j)
            hit = nb < len(held)
            hit[hit] = held[nb[hit]] == keep[hit] + j
            hit[hit] = chan[nb[hit]] == chan[at[hit]]
            out[hit] += context * mat[nb[hit]]
        out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-12
    return keep, out @ np.asarray(qvec, dtype=np.float32)


def neighbourhood(ids, context: float) -> list[int]:
    """The ids :func:`context_scores` needs: the candidates, the turns next to them, and the turns next to those."""
    return sorted({int(i) + d for i in ids for d in ((-2, -1, 0, 1, 2) if context else (0,))})
