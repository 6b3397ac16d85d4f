"""Turn vectors on SQLite: the ``message_vectors`` table, searched exactly from one numpy matrix below
``[sqlite] ann_threshold`` turns and through an HNSW index on disk past it (``ann.py``), whose candidates are
rescored with their context (``context_scores``, from the index's own vectors or SQLite's). The turn domain
(``pps_turns.retriever``) computes the vectors and fuses the scores; this answers ``SQLiteStore.write_turn_vectors`` and ``turn_similarities``. Every method taking
``conn`` runs on the database's worker thread.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from pps_turns.vectors import TurnVectors

from . import turns
from .db import Database, Tx

log = logging.getLogger("pps.sqlite")

#: Past the threshold: approximate candidates per dense candidate wanted, rescored exactly.
ANN_OVERFETCH = 2


def load_matrix(vectors: TurnVectors, conn: sqlite3.Connection) -> None:
    """Add to ``vectors`` every stored vector of its model above the highest id it holds (ids arrive in order)."""
    last = int(vectors.ids[-1]) if len(vectors.ids) else 0
    rows = conn.execute("SELECT v.message_id, v.vector, m.channel FROM message_vectors v "
                        "JOIN messages m ON m.id = v.message_id WHERE v.model = ? AND v.message_id > ? "
                        "ORDER BY v.message_id", (vectors.model, last)).fetchall()
    if rows:
        vectors.add([r[0] for r in rows], [r[2] for r in rows], [r[1] for r in rows])


def missing(conn: sqlite3.Connection, model: str, limit: int, after: int = 0) -> list[dict[str, Any]]:
    rows = conn.execute(f"SELECT {turns.COLUMNS} FROM messages m WHERE id > ? AND NOT EXISTS "
                        "(SELECT 1 FROM message_vectors v WHERE v.message_id = m.id AND v.model = ?) "
                        "ORDER BY id LIMIT ?", (after, model, limit)).fetchall()
    return [turns.row_to_turn(r) for r in rows]


def missing_upto(conn: sqlite3.Connection, model: str, limit: int, after: int = 0) -> tuple[list[dict], int]:
    """:func:`missing`, and the highest turn id when it looked: if fewer than ``limit`` come back, every turn up
    to that id has its vector (so the next look starts there instead of rescanning all history)."""
    top = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0]
    return missing(conn, model, limit, after), top


def context_scores(ids, held, mat, chan, qvec, context: float):
    """Exact cosines of the context vectors (as :meth:`TurnVectors.context_matrix` makes them: the turn's vector
    plus ``context`` times its neighbours in its channel, ``pps_turns.vectors.channel_links``) of ``ids`` and of
    their neighbours.

    ``held``: the turn ids whose vectors are known (ascending: the candidates, the nearest turn of their channel
    on each side and those turns' own, :func:`neighbourhood`, as far as they have vectors), ``mat`` their vectors (one row
    each), ``chan`` their channels (any comparable codes, one each, 0 unknown). A held turn's neighbours are the
    nearest held turns of its channel within reach, which are its true neighbours for the candidates and the
    turns next to them. Vectorised: a few hundred candidates take well under a millisecond."""
    import numpy as np

    held = np.asarray(held, dtype=np.int64)
    cand = np.unique(np.asarray(ids, dtype=np.int64))
    at_c = np.searchsorted(held, cand)
    ok = at_c < len(held)
    ok[ok] = held[at_c[ok]] == cand[ok]
    at_c = at_c[ok]
    if not len(at_c):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    mat = np.asarray(mat, dtype=np.float32)
    chan = np.asarray(chan)
    if not context:
        return held[at_c], mat[at_c] @ np.asarray(qvec, dtype=np.float32)
    from pps_turns.vectors import channel_links

    before, after = channel_links(held, chan)
    # a turn can rank high by its context (a neighbour close to the question) while its own vector does not:
    # the candidates' neighbours are scored too (their vectors were read anyway)
    at = np.unique(np.concatenate([at_c, before[at_c][before[at_c] >= 0], after[at_c][after[at_c] >= 0]]))
    out = mat[at].copy()
    for rows in (before[at], after[at]):
        hit = rows >= 0
        out[hit] += context * mat[rows[hit]]
    out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-12
    return held[at], out @ np.asarray(qvec, dtype=np.float32)


def neighbourhood(ids, context: float, codes_by_id=None) -> list[int]:
    """The ids :func:`context_scores` needs: the candidates, the nearest turn of their channel on each side, and
    the nearest of those turns' on each side (``codes_by_id``: channel codes indexed by turn id, as the index
    keeps them; without them, the two turns next to each candidate by id on each side)."""
    if not context:
        return sorted({int(i) for i in ids})
    if codes_by_id is not None:  # the neighbours, and theirs (a neighbour's other one can be past the reach of ids)
        from pps_turns.vectors import near_in_channel

        return [int(i) for i in near_in_channel(codes_by_id, near_in_channel(codes_by_id, ids, 1), 1)]
    return sorted({int(i) + d for i in ids for d in (-2, -1, 0, 1, 2)})


def channel_pairs(conn: sqlite3.Connection, ids, reach: int) -> list[tuple[int, int]]:
    """(id, other) for each of ``ids`` and every turn of its channel at most ``reach`` ids away."""
    ids = [int(i) for i in ids]
    rows: list[tuple[int, int]] = []
    for k in range(0, len(ids), 900):
        chunk = ids[k:k + 900]
        rows += (tuple(r) for r in conn.execute(
            "SELECT m.id, p.id FROM messages m JOIN messages p INDEXED BY idx_messages_channel ON "
            "p.channel = m.channel AND p.id BETWEEN m.id - ? AND m.id + ? AND p.id != m.id "
            f"WHERE m.id IN ({','.join('?' * len(chunk))})", [reach, reach, *chunk]))
    return rows


def rescore(conn: sqlite3.Connection, model: str, ids, qvec, context: float, want: list[int] | None = None):
    """:func:`context_scores` with the vectors read from ``message_vectors`` (about 5 rows per candidate);
    ``want``: the ids to read (:func:`neighbourhood`; without it, the two nearest of each candidate's channel on
    each side are looked up here)."""
    import numpy as np

    if want is None:
        from pps_turns.retrieval import NEIGHBOUR_REACH, links_from_rows

        want = sorted({int(i) for i in ids})
        for _hop in range(2 if context else 0):  # the neighbours, then theirs
            links = links_from_rows(want, channel_pairs(conn, want, NEIGHBOUR_REACH), 1)
            want = sorted({*want, *(j for before, after in links.values() for j in (*before, *after))})
    rows: list[tuple[int, bytes, str]] = []
    for k in range(0, len(want), 900):
        chunk = want[k:k + 900]
        rows += conn.execute(
            "SELECT v.message_id, v.vector, m.channel FROM message_vectors v JOIN messages m ON m.id = v.message_id "
            f"WHERE v.model = ? AND v.message_id IN ({','.join('?' * len(chunk))})", [model, *chunk]).fetchall()
    if not rows:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    rows.sort(key=lambda r: r[0])
    codes: dict[str, int] = {}
    return context_scores(ids, [r[0] for r in rows], np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]),
                          [codes.setdefault(r[2], len(codes) + 1) for r in rows], qvec, context)


def write(conn: sqlite3.Connection, model: str, rows: list[tuple[int, bytes]]) -> None:
    with Tx(conn):
        conn.executemany("INSERT OR REPLACE INTO message_vectors (message_id, model, vector) VALUES (?, ?, ?)",
                         [(i, model, b) for i, b in rows])



class TurnIndex:
    """The dense side of the SQLite turn store: the exact matrix below the threshold, the HNSW index past it."""

    def __init__(self, db: Database, ann_threshold: int, ann_dtype: str | None = None) -> None:
        self.db = db
        self.ann_threshold = ann_threshold
        self.ann_dtype = ann_dtype  # None: ann.DTYPE
        self.vectors: TurnVectors | None = None
        self.ann = None  # ann.TurnANN past the threshold
        self._ann_checked: str | None = None  # the model whose saved index was looked for
        self._big = False  # history past the threshold (without a loaded index)
        self._built = None  # an index a background build finished, picked up by the next search
        self._building = None  # that build's thread
        self._closing = False

    def write(self, conn, model: str, batch: list[dict[str, Any]], blobs: list[bytes]) -> None:
        write(conn, model, [(t["id"], b) for t, b in zip(batch, blobs, strict=True)])
        if self.vectors is not None and self.vectors.model == model:
            self.vectors.add([t["id"] for t in batch], [t["channel"] for t in batch], blobs)
        if self.ann is not None and self.ann.model == model:
            self.ann.add_blobs([t["id"] for t in batch], blobs, [t["channel"] for t in batch])

    def similarities(self, conn, model: str, qvec, n: int, context: float):
        """(ids, cosines) of the context vectors: all of them from the matrix, or the index's candidates
        rescored exactly; empty while a large history waits for its index."""
        import numpy as np

        index = self._prepare(conn, model)
        if isinstance(index, TurnVectors):
            return index.scores(qvec, context)
        if index is not None:  # past the threshold: approximate candidates, exact scores
            ids, _approx = index.search(qvec, n * ANN_OVERFETCH)  # more in a large index (ann.breadth)
            return index.rescore(conn, ids, qvec, context, n * ANN_OVERFETCH)
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)

    def channel_similarities(self, conn, model: str, qvec, channels, n: int, context: float):
        """The ``n`` best turns of each of ``channels`` by context vector, scored as :meth:`similarities` scores
        them: from the matrix masked by channel, or the index's channel codes (``ann.TurnANN.channel_search``)."""
        import numpy as np

        index = self._prepare(conn, model)
        if isinstance(index, TurnVectors):
            return index.channel_scores(qvec, channels, n, context)
        if index is not None:
            return index.channel_search(conn, qvec, channels, n, context)
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)

    def forget(self, conn, ids: list[int]) -> None:
        """Forgotten turns leave the matrix (reloaded from the smaller table at the next search) and the HNSW
        index. usearch keeps a removed vector's bytes in its slot, in memory and in a saved file, so the index
        file goes at once, the loaded index (the ids removed: it never answers them) serves until a clean one,
        built on a thread from the vectors that remain, replaces it, and a tainted index is never saved. A build
        already running is waited for first (it read vectors that are gone now)."""
        from . import ann

        self.vectors = None
        if self.ann is None and self._building is None and not any(p.exists() for p in ann.paths(self.db.path)):
            return
        import numpy as np

        self.wait_ann()
        keys = np.asarray(ids, dtype=np.uint64)
        model = None
        for index in (self.ann, self._built):
            if index is not None:
                index.index.remove(keys)
                index.forget_channels(ids)
                index.tainted = True
                model = index.model
        ann.remove_files(self.db.path)
        if self._built is not None and self.ann is None:
            self.ann = self._built
        self._built = None
        self._building = None
        if model is not None:
            self._start_build(model)

    def drop(self, conn) -> None:
        """Every vector was deleted: the matrix and the index files go too (rebuilt by the next reindex)."""
        self.vectors = None
        self.reset_ann(conn, True)

    async def close(self) -> None:
        self._closing = True  # a background index build stops at its next chunk
        if self._building is not None:
            import asyncio

            await asyncio.to_thread(self._building.join, 60)
            self._building = None
        self._closing = False
        if (self.ann is not None and self.ann.dirty and not self.ann.tainted
                and getattr(self.db, "conn", None) is not None):
            try:
                await self.db.run(self.ann.save, self.db.conn)
            except Exception as exc:  # derived data: the next open adds what the file lacks
                log.warning("turn vector index not saved: %s: %s", type(exc).__name__, exc)

    def _prepare(self, conn, model: str, wait: bool = False) -> TurnVectors | Any | None:
        """The exact matrix below the threshold, the HNSW index (``ann.TurnANN``) past it; either up to date.

        Building the index (minutes at a million turns) runs on a thread of its own with its own connection, so
        capture and search go on meanwhile: exactly from the matrix when the threshold was crossed while
        serving, lexically (None) when a large database opened without its index file. ``wait`` builds it here
        (``pps reindex``)."""
        from . import ann

        if self._built is not None and self._built.model == model:  # a background build finished
            self.ann, self._built, self.vectors = self._built, None, None
        if self.ann is not None and self.ann.model == model:
            self.ann.catch_up(conn)
            return self.ann
        if self._ann_checked != model:
            self._ann_checked = model
            self.ann = None
            loaded = ann.TurnANN.load(conn, self.db.path, model, self.ann_dtype)
            if loaded is not None:
                loaded.catch_up(conn)
                self.ann, self.vectors = loaded, None
                return self.ann
            self._big = turns.counts(conn)["total"] >= self.ann_threshold
        if self._big or (self.vectors is not None and self.vectors.model == model
                         and len(self.vectors) >= self.ann_threshold):
            if wait:
                self._building = None
                self._build(model)
                return self._prepare(conn, model)
            self._start_build(model)
            if self.vectors is None or self.vectors.model != model:
                return None  # a large history without its index: lexical until it is built
            load_matrix(self.vectors, conn)
            return self.vectors
        if self.vectors is None or self.vectors.model != model:
            self.vectors = TurnVectors(model)
        load_matrix(self.vectors, conn)
        if len(self.vectors) >= self.ann_threshold:  # crossed it while serving: build beside, stay exact meanwhile
            self._start_build(model)
        return self.vectors

    def _build(self, model: str) -> None:
        """Build (or load) the index from every stored vector on a connection of its own; saves it."""
        from . import ann

        conn = sqlite3.connect(self.db.path, check_same_thread=False)

        def stop_when_closing(_done: int) -> None:
            if self._closing:
                raise RuntimeError("the layer is closing")

        try:
            self._built = ann.TurnANN.open_or_build(conn, self.db.path, model, stop_when_closing, self.ann_dtype)
        except Exception as exc:  # derived data: searched exactly or lexically meanwhile; retried next open
            log.warning("turn vector index not built: %s: %s", type(exc).__name__, exc)
        finally:
            conn.close()

    def _start_build(self, model: str) -> None:
        import threading

        if self._building is not None and self._building.is_alive():
            return
        if self._building is not None:  # finished (or failed): a failed build is not retried in this process
            return
        self._building = threading.Thread(target=self._build, args=(model,), name="pps-turn-ann", daemon=True)
        self._building.start()

    def wait_ann(self, timeout: float | None = None) -> bool:
        """Wait for a background build of the index (tests, benchmarks); True when none is running."""
        if self._building is not None:
            self._building.join(timeout)
            return not self._building.is_alive()
        return True

    def reset_ann(self, conn, remove: bool = False) -> None:
        """Forget the loaded index (``remove``: delete its files too); the next search loads or builds it."""
        from . import ann

        self.wait_ann()
        self.ann = self._built = self._building = None
        self._ann_checked = None
        if remove:
            ann.remove_files(self.db.path)

    def repair_ann(self, conn, model: str) -> dict[str, Any] | None:
        """``pps reindex``: bring the index up to date with every stored vector (loading or building it)."""
        self.wait_ann()
        self._building = None
        if self.ann is not None and self.ann.tainted:  # turns were forgotten: a clean index, built here
            self.reset_ann(conn, True)
        index = self._prepare(conn, model, wait=True)
        if index is not self.ann or self.ann is None:
            return None
        added = self.ann.repair(conn)
        if self.ann.dirty:
            self.ann.save(conn)
        return {"ann_vectors": len(self.ann), "ann_added": added}
