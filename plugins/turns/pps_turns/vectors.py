"""Turn vectors held as one numpy matrix, with each turn's context vector (its neighbours in the same channel
blended in): the exact dense signal of the turn search, for any store that keeps its matrix in process.

A store fills it from its own vector table (``add``) and answers :meth:`pps_turns.TurnStore.turn_similarities`
with :meth:`TurnVectors.scores`. The model key of a vector is ``f"{embedder.name}|{RECIPE}"``.
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
