"""Turn vectors held as one numpy matrix, with each turn's context vector (its neighbours in the same channel
blended in): the exact dense signal of the turn search, for any store that keeps its matrix in process.

A turn's neighbours are the nearest turns of its own channel within ``retrieval.NEIGHBOUR_REACH`` ids on each
side (``channel_links``), not the turns next to it by id: a conversation interleaved with others keeps them.

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


def channel_links(ids, codes, reach: int | None = None):
    """For rows of (turn id, channel code), ids ascending: the row of the previous and of the next turn of the
    same channel at most ``reach`` ids away (-1: none). Code 0 is "unknown" and has no neighbours."""
    import numpy as np

    from .retrieval import NEIGHBOUR_REACH

    reach = NEIGHBOUR_REACH if reach is None else reach
    ids = np.asarray(ids, dtype=np.int64)
    codes = np.asarray(codes)
    n = len(ids)
    prev = np.full(n, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return prev, nxt
    order = np.lexsort((ids, codes))  # by channel, then id: a channel's turns are consecutive
    sid, sc = ids[order], codes[order]
    same = (sc[1:] == sc[:-1]) & (sid[1:] - sid[:-1] <= reach) & (sc[1:] != 0)
    prev[order[1:][same]] = order[:-1][same]
    nxt[order[:-1][same]] = order[1:][same]
    return prev, nxt


def near_in_channel(codes_by_id, ids, k: int = 2, reach: int | None = None):
    """The ``k`` nearest turn ids of the same channel before and after each of ``ids``, within ``reach`` ids,
    from an array of channel codes indexed by turn id (0: unknown or forgotten). Returns a sorted id array of
    ``ids`` and those neighbours."""
    import numpy as np

    from .retrieval import NEIGHBOUR_REACH

    reach = NEIGHBOUR_REACH if reach is None else reach
    codes_by_id = np.asarray(codes_by_id)
    ids = np.asarray(ids, dtype=np.int64)
    ids = ids[(ids > 0) & (ids < len(codes_by_id))]
    if not len(ids):
        return ids
    own = codes_by_id[ids]
    out = [ids]
    for sign in (-1, 1):
        offs = sign * np.arange(1, reach + 1, dtype=np.int64)
        around = ids[:, None] + offs[None, :]
        inside = (around > 0) & (around < len(codes_by_id))
        match = inside & (codes_by_id[np.clip(around, 0, len(codes_by_id) - 1)] == own[:, None]) & (own[:, None] != 0)
        rank = np.cumsum(match, axis=1)
        out.append(around[match & (rank <= k)])
    return np.unique(np.concatenate(out))


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
            _names, codes = np.unique(np.asarray(self.channels, dtype=object).astype(str), return_inverse=True)
            before, after = channel_links(self.ids, codes + 1)
            ctx = self.matrix.copy()
            for rows in (before, after):
                hit = rows >= 0
                ctx[hit] += weight * self.matrix[rows[hit]]
            ctx /= np.linalg.norm(ctx, axis=1, keepdims=True) + 1e-12
            self._context = {weight: ctx.astype(np.float32)}
        return self._context[weight]

    def scores(self, qvec, context: float = 0.0):
        import numpy as np

        if not len(self.ids):
            return self.ids, np.empty(0, dtype=np.float32)
        return self.ids, self.context_matrix(context) @ np.asarray(qvec, dtype=np.float32)

    def channel_scores(self, qvec, channels, n: int, context: float = 0.0):
        """:meth:`pps_turns.TurnStore.channel_similarities` from the matrix: the ``n`` best of each channel by
        context vector (the same cosines as :meth:`scores`)."""
        import numpy as np

        ids, cos = self.scores(qvec, context)
        names = np.asarray(self.channels, dtype=object)
        keep = [np.empty(0, dtype=np.int64)]
        for ch in dict.fromkeys(channels):
            rows = np.flatnonzero(names == ch)
            keep.append(rows[top_rows(cos[rows], n)])
        rows = np.concatenate(keep)
        return ids[rows], cos[rows]


def top_rows(cos, n: int):
    """The positions of the ``n`` highest of ``cos``, best first."""
    import numpy as np

    cos = np.asarray(cos)
    if n <= 0 or not len(cos):
        return np.empty(0, dtype=np.int64)
    if len(cos) > n:
        part = np.argpartition(-cos, n - 1)[:n]
        return part[np.argsort(-cos[part], kind="stable")]
    return np.argsort(-cos, kind="stable")
