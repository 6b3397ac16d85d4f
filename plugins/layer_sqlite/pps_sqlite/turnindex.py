"""Turn vectors (message_vectors, float32 blobs) cached as one numpy matrix, and the fused search over them.

Vectors are computed in the background after turns are stored (capture never waits for the
model), and for turns stored before an embedder was loaded once a search finds them missing; until
then those turns are found lexically. Below ``[sqlite] ann_threshold`` turns the matrix is searched by
brute force (a few milliseconds for 50k turns); past it an HNSW index on disk (``ann.py``) proposes
candidates that are rescored exactly here (``rescore``), and no matrix is held in memory. All cache work
runs on the database's worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any

from . import retrieval, turns
from .db import Database, Tx

log = logging.getLogger("pps.sqlite")

#: How a turn becomes text for its vector; part of the stored model key, so a change re-embeds.
RECIPE = "author+content"
EMBED_BATCH = 64
#: Past the threshold: approximate candidates per dense candidate wanted, rescored exactly.
ANN_OVERFETCH = 2


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

    def load(self, conn: sqlite3.Connection) -> None:
        last = int(self.ids[-1]) if len(self.ids) else 0
        rows = conn.execute("SELECT v.message_id, v.vector, m.channel FROM message_vectors v "
                            "JOIN messages m ON m.id = v.message_id WHERE v.model = ? AND v.message_id > ? "
                            "ORDER BY v.message_id", (self.model, last)).fetchall()
        if rows:
            self.add([r[0] for r in rows], [r[2] for r in rows], [r[1] for r in rows])

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


def rescore(conn: sqlite3.Connection, model: str, ids, qvec, context: float):
    """Exact cosines of the context vectors (as :meth:`TurnVectors.context_matrix` makes them: the turn's vector
    plus ``context`` times the turns next to it in the same channel) of ``ids`` and the turns next to them,
    read from ``message_vectors``."""
    import numpy as np

    ids = [int(i) for i in ids]
    ids_set = set(ids)
    # the candidates, the turns next to them, and the turns next to those (for their context)
    want = sorted({i + d for i in ids for d in ((-2, -1, 0, 1, 2) if context else (0,))})
    vec: dict[int, Any] = {}
    chan: dict[int, str] = {}
    for k in range(0, len(want), 900):
        chunk = want[k:k + 900]
        for i, blob, ch in conn.execute(
                "SELECT v.message_id, v.vector, m.channel FROM message_vectors v JOIN messages m ON m.id = v.message_id "
                f"WHERE v.model = ? AND v.message_id IN ({','.join('?' * len(chunk))})", [model, *chunk]):
            vec[i] = np.frombuffer(blob, dtype=np.float32)
            chan[i] = ch
    # a turn can rank high by its context (a neighbour close to the question) while its own vector does not:
    # the candidates' neighbours are scored too (their vectors were read anyway)
    keep = sorted({i for i in want if i in vec and (i in ids_set or not context or i - 1 in ids_set
                                                     or i + 1 in ids_set)})
    if not keep:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    mat = np.stack([vec[i] for i in keep])
    if context:
        for j in (-1, 1):
            mat = mat + context * np.stack([vec[i + j] if i + j in vec and chan[i + j] == chan[i]
                                            else np.zeros_like(vec[i]) for i in keep])
        mat /= np.linalg.norm(mat, axis=1, keepdims=True) + 1e-12
    return np.asarray(keep, dtype=np.int64), mat @ np.asarray(qvec, dtype=np.float32)


def write(conn: sqlite3.Connection, model: str, rows: list[tuple[int, bytes]]) -> None:
    with Tx(conn):
        conn.executemany("INSERT OR REPLACE INTO message_vectors (message_id, model, vector) VALUES (?, ?, ?)",
                         [(i, model, b) for i, b in rows])


def _threshold(memory) -> int:
    from .db import SQLiteSettings

    try:
        return memory.settings.plugin_settings(SQLiteSettings, "sqlite").ann_threshold
    except Exception:  # a store without the sqlite settings (another backend): the default
        return SQLiteSettings.model_fields["ann_threshold"].default


class Retriever:
    """The raw_capture layer's search: fused when an embedder is loaded, lexical otherwise."""

    def __init__(self, memory, db: Database) -> None:
        self.memory = memory
        self.db = db
        self.vectors: TurnVectors | None = None
        self._pending = True  # turns may lack vectors (stored before an embedder, or a failed embed)
        self._authors: dict[str, str] | None = None
        self._warned = False
        self._task: asyncio.Task | None = None
        self._floor = 0  # every turn with id <= this has a vector
        self.ann = None  # ann.TurnANN past the threshold
        self._ann_checked: str | None = None  # the model whose saved index was looked for
        self._big = False  # history past the threshold (without a loaded index)
        self._built = None  # an index a background build finished, picked up by the next search
        self._building = None  # that build's thread
        self._closing = False
        self.ann_threshold = _threshold(memory)
        self._df = retrieval.DocFreq()

    @property
    def derived_paths(self) -> tuple[str, ...]:
        """The vector index files, home-relative (backups skip them; they are rebuilt from SQLite)."""
        from pathlib import Path

        from .ann import paths

        path = getattr(self.db, "path", None)
        if path is None:
            return ()
        try:
            return tuple(str(p.relative_to(Path(self.memory.home))) for p in paths(path))
        except ValueError:  # the database outside the home: nothing of the home to skip
            return ()

    def _embedder(self):
        try:
            return self.memory.embedder
        except Exception as exc:  # a broken embedder plugin must not break search
            self._warn(exc)
            return None

    def _warn(self, exc: BaseException) -> None:
        if not self._warned:
            log.warning("turn vectors unavailable, searching lexically: %s: %s", type(exc).__name__, exc)
            self._warned = True

    def _model(self, emb) -> str:
        return f"{emb.name}|{RECIPE}"

    async def _embed(self, emb, texts: list[str]):
        import numpy as np

        vecs = await asyncio.to_thread(emb.embed, texts)
        return [np.asarray(v, dtype=np.float32).tobytes() for v in vecs]

    async def index(self, new_turns: list[dict[str, Any]]) -> None:
        """Called after turns are stored: vectors are computed in the background, so capture never waits."""
        self._authors = None
        if new_turns:
            self._pending = True
            self._kick()

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.drain())

    async def drain(self, progress=None) -> int:
        """Embed every turn still without a vector, in batches; returns how many were embedded.

        ``progress(done)`` is called after each batch (``pps reindex`` draws its bar with it)."""
        running = self._task
        if running is not None and not running.done() and asyncio.current_task() is not running:
            await asyncio.shield(running)  # one drainer at a time
        emb = self._embedder()
        done = 0
        while emb is not None and self._pending:
            try:
                done += await self._batch(emb)
                if progress is not None:
                    progress(done)
            except Exception as exc:  # left pending: the next search or store tries again
                self._warn(exc)
                break
        return done

    async def _batch(self, emb) -> int:
        model = self._model(emb)
        todo, top = await self.db.run(missing_upto, self.db.conn, model, EMBED_BATCH, self._floor)
        if len(todo) < EMBED_BATCH:
            self._pending = False
        if todo:
            try:
                blobs = await self._embed(emb, [vector_text(t) for t in todo])
            except BaseException:
                self._pending = True
                raise
            await self.db.run(self._store, self.db.conn, model, todo, blobs)
            self._floor = todo[-1]["id"]  # every turn up to here has its vector
        if len(todo) < EMBED_BATCH:  # nothing else was missing up to ``top``: the next look starts there
            self._floor = max(self._floor, top)
        return len(todo)

    def _store(self, conn, model: str, batch: list[dict[str, Any]], blobs: list[bytes]) -> None:
        write(conn, model, [(t["id"], b) for t, b in zip(batch, blobs, strict=True)])
        if self.vectors is not None and self.vectors.model == model:
            self.vectors.add([t["id"] for t in batch], [t["channel"] for t in batch], blobs)
        if self.ann is not None and self.ann.model == model:
            self.ann.add_blobs([t["id"] for t in batch], blobs)

    async def close(self) -> None:
        self._closing = True  # a background index build stops at its next chunk
        if self._building is not None:
            await asyncio.to_thread(self._building.join, 60)
            self._building = None
        self._closing = False
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except BaseException:  # cancelled, or a failure already logged
                pass
        self._task = None
        if self.ann is not None and self.ann.dirty and getattr(self.db, "conn", None) is not None:
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
            loaded = ann.TurnANN.load(conn, self.db.path, model)
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
            self.vectors.load(conn)
            return self.vectors
        if self.vectors is None or self.vectors.model != model:
            self.vectors = TurnVectors(model)
        self.vectors.load(conn)
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
            self._built = ann.TurnANN.open_or_build(conn, self.db.path, model, stop_when_closing)
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
        index = self._prepare(conn, model, wait=True)
        if index is not self.ann or self.ann is None:
            return None
        added = self.ann.repair(conn)
        if self.ann.dirty:
            self.ann.save(conn)
        return {"ann_vectors": len(self.ann), "ann_added": added}

    async def search(self, query: str, limit: int, offset: int = 0, channel: str | None = None,
                     cfg: retrieval.FusionConfig = retrieval.DEFAULT) -> list[dict[str, Any]]:
        emb = self._embedder() if cfg.use_dense else None
        qvec = None
        if emb is not None:
            try:
                if self._pending:  # turns stored before the embedder, or a failed batch: in the background
                    self._kick()
                qvec = (await asyncio.to_thread(emb.embed, [query]))[0]
            except Exception as exc:
                self._warn(exc)
                qvec = None
        model = self._model(emb) if emb is not None else None
        return await self.db.run(self._search, self.db.conn, query, limit, offset, channel, cfg, qvec, model)

    def _search(self, conn, query, limit, offset, channel, cfg, qvec, model) -> list[dict[str, Any]]:
        if self._authors is None:
            self._authors = retrieval.author_tokens(conn)
        q = retrieval.parse_query(query, self._authors, cfg)
        lexical = (retrieval.bm25_bounded(conn, q.terms, cfg.candidates, channel, cfg.lexical_budget, self._df)
                   if cfg.use_bm25 else {})
        dense, floor = {}, 0.0
        if qvec is not None:
            index = self._prepare(conn, model)
            if isinstance(index, TurnVectors):
                dense, floor = retrieval.dense_top(index.scores(qvec, cfg.context), cfg.candidates,
                                                   cfg.dense_floor_rank)
            elif index is not None:  # past the threshold: approximate candidates, exact scores
                ids, _approx = index.search(qvec, cfg.candidates * ANN_OVERFETCH)
                dense, floor = retrieval.dense_top(rescore(conn, model, ids, qvec, cfg.context), cfg.candidates,
                                                   cfg.dense_floor_rank)
        ranked = retrieval.fuse(conn, q, lexical, dense, floor, cfg, channel)[offset:offset + limit]
        found = {t["id"]: t for t in turns.by_ids(conn, [i for i, _s, _m in ranked])}
        out = []
        for i, score, signals in ranked:
            if i in found:
                out.append({**found[i], "score": round(score, 6), "signals": signals})
        return out
