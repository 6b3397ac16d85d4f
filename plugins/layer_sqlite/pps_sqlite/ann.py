"""Approximate nearest neighbours for turn vectors past a size threshold (usearch HNSW, float16, next to the
database).

Below ``[sqlite] ann_threshold`` turns, turn vectors are searched exactly (``turnindex.TurnVectors``, one numpy
matrix). Past it that matrix costs 1.5 GB of memory per million turns and a pass over all of it per query, so an
HNSW graph of float16 vectors (about 0.9 KB a turn with the graph) proposes candidates instead, and the candidates
are rescored with their context from the float16 vectors the index holds in memory (``TurnANN.rescore``; cosines
within ~1e-3 of float32) and each turn's channel, kept beside it in memory (a 4-byte code per turn id, read
from SQLite when the index is loaded). Only which turns are candidates is approximate (recall@10 against exact
search is measured by bench/lifetime.py and bench/ann.py). An int8 index (``dtype="i8"``, half the memory, what
issue 19 shipped) rescores from the float32 rows in SQLite instead (5 rows per candidate).

Two files beside the database: ``pps.db.turns.usearch`` (the graph) and ``pps.db.turns.json`` (the model key,
the dimension, the highest turn id the saved graph holds and a hash of that turn's vector, so a database
restored or replaced under the index is noticed and the index rebuilt). Written after a build and at close,
each atomically (a temporary file, then a rename); vectors added after the last save are added again from SQLite
at the next open (every id above the saved highest). ``pps reindex`` adds whatever is missing; ``--full``
deletes both files and builds them again. Every method runs on the database's worker thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("pps.sqlite")

DTYPE = "f16"
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 64  # a search of k explores max(k, this) candidates
#: From this many vectors a search asks the graph for ``WIDEN`` times the candidates (and so explores as many):
#: at a million turns even the exact top 400 by each turn's own vector give dense recall@10 0.978 once rescored
#: with context, the int8 graph's 400 gave 0.915, its 1,600 0.985 (bench/ann.py --index, bench/RESULTS.md "A
#: million turns"). Below it (200,000: 0.985 float16, 0.976 int8) a search is as it was.
WIDE_FROM = 500_000
WIDEN = 4
#: A channel of at most this many turns is scanned exactly for its own best turns (``TurnANN.channel_search``;
#: ~2 ms for a 700-turn conversation, float16 from memory); a larger one is answered from a search of the graph
#: widened by the history's size over the channel's, at most ``CHANNEL_WIDE_MAX`` candidates.
CHANNEL_SCAN = 20_000
CHANNEL_WIDE_MAX = 4_000
BUILD_CHUNK = 20_000
SUFFIX_INDEX = ".turns.usearch"
SUFFIX_META = ".turns.json"


def paths(db_path: Path) -> tuple[Path, Path]:
    return db_path.with_name(db_path.name + SUFFIX_INDEX), db_path.with_name(db_path.name + SUFFIX_META)


def remove_files(db_path: Path) -> None:
    for p in paths(db_path):
        p.unlink(missing_ok=True)


def breadth(size: int, k: int) -> int:
    """How many candidates a search for ``k`` asks an index of ``size`` vectors for."""
    return k * WIDEN if size >= WIDE_FROM else k


def _digest(blob: bytes | None) -> str | None:
    return hashlib.sha256(blob).hexdigest()[:32] if blob is not None else None


class TurnANN:
    """An HNSW index of one model's turn vectors, keyed by turn id."""

    def __init__(self, db_path: Path, model: str, dim: int, dtype: str = DTYPE, connectivity: int = CONNECTIVITY,
                 expansion_add: int = EXPANSION_ADD, expansion_search: int = EXPANSION_SEARCH) -> None:
        import numpy as np
        from usearch.index import Index

        self.db_path = db_path
        self.model = model
        self.dim = dim
        self.dtype = dtype
        self.shape = {"dtype": dtype, "connectivity": connectivity, "expansion_add": expansion_add}
        self.index = Index(ndim=dim, metric="cos", dtype=dtype, connectivity=connectivity,
                           expansion_add=expansion_add, expansion_search=expansion_search)
        #: Each turn id's channel as a small code (0: unknown), for the context of the rescoring.
        self.channel_codes = np.zeros(1024, dtype=np.int32)
        self.codes: dict[str, int] = {}
        self.max_id = 0
        self.dirty = False
        #: Turns were removed from it: their bytes stay in usearch's slots, so it is never saved (a clean one is
        #: built from the remaining vectors instead).
        self.tainted = False

    def __len__(self) -> int:
        return len(self.index)

    # -- building and keeping up ------------------------------------------------------------------

    def set_channels(self, ids, channels) -> None:
        """Remember the channel of each turn id (the rescoring's context counts neighbours in the same channel)."""
        import numpy as np

        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return
        top = int(ids.max())
        if top >= len(self.channel_codes):
            grown = np.zeros(max(top + 1, 2 * len(self.channel_codes)), dtype=np.int32)
            grown[:len(self.channel_codes)] = self.channel_codes
            self.channel_codes = grown
        codes = self.codes
        self.channel_codes[ids] = [codes.setdefault(c, len(codes) + 1) for c in channels]

    def load_channels(self, conn: sqlite3.Connection, upto: int) -> None:
        """The channel of every turn up to ``upto`` (a loaded index: its turns' channels are not in its file)."""
        after = 0
        while True:
            rows = conn.execute("SELECT id, channel FROM messages WHERE id > ? AND id <= ? ORDER BY id LIMIT 200000",
                                (after, upto)).fetchall()
            if not rows:
                return
            self.set_channels([r[0] for r in rows], [r[1] for r in rows])
            after = rows[-1][0]

    def forget_channels(self, ids) -> None:
        import numpy as np

        ids = np.asarray([i for i in ids if 0 <= i < len(self.channel_codes)], dtype=np.int64)
        self.channel_codes[ids] = 0

    def add(self, ids, vectors, channels: list[str] | None = None) -> int:
        """Add (ids, float32 matrix, their channels); ids already present are skipped. Returns how many were
        added."""
        import numpy as np

        ids = np.asarray(ids, dtype=np.uint64)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1)
        if not len(ids):
            return 0
        if vectors.shape[1] != self.dim:
            raise ValueError(f"vector dimension {vectors.shape[1]}, the index holds {self.dim}")
        if channels is not None:
            self.set_channels(ids.astype(np.int64), channels)
        if len(self.index):
            fresh = ~np.asarray(self.index.contains(ids), dtype=bool)
            ids, vectors = ids[fresh], vectors[fresh]
        if not len(ids):
            return 0
        self.index.add(ids, vectors, threads=2 if len(ids) > 1000 else 1)
        self.max_id = max(self.max_id, int(ids.max()))
        self.dirty = True
        return len(ids)

    def add_blobs(self, ids: list[int], blobs: list[bytes], channels: list[str] | None = None) -> int:
        import numpy as np

        if not ids:
            return 0
        return self.add(ids, np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs]), channels)

    def catch_up(self, conn: sqlite3.Connection, progress: Callable[[int], None] | None = None) -> int:
        """Add every vector of this model with an id above the highest held (a build from nothing, or what
        arrived since the last save)."""
        added = 0
        while True:
            rows = conn.execute("SELECT v.message_id, v.vector, m.channel FROM message_vectors v JOIN messages m "
                                "ON m.id = v.message_id WHERE v.model = ? AND v.message_id > ? "
                                "ORDER BY v.message_id LIMIT ?", (self.model, self.max_id, BUILD_CHUNK)).fetchall()
            if not rows:
                return added
            before = self.max_id
            added += self.add_blobs([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
            self.max_id = max(before, rows[-1][0])
            if progress is not None:
                progress(added)

    def repair(self, conn: sqlite3.Connection) -> int:
        """Add vectors of this model that the index lacks at any id (e.g. a turn embedded late, before a crash)."""
        import numpy as np

        added, after = 0, 0
        while True:
            ids = [r[0] for r in conn.execute("SELECT message_id FROM message_vectors WHERE model = ? AND "
                                              "message_id > ? ORDER BY message_id LIMIT 50000", (self.model, after))]
            if not ids:
                return added
            after = ids[-1]
            have = np.asarray(self.index.contains(np.asarray(ids, dtype=np.uint64)), dtype=bool)
            lacking = [i for i, h in zip(ids, have, strict=True) if not h]
            for k in range(0, len(lacking), 900):
                chunk = lacking[k:k + 900]
                rows = conn.execute(f"SELECT v.message_id, v.vector, m.channel FROM message_vectors v JOIN messages m "
                                    f"ON m.id = v.message_id WHERE v.model = ? AND v.message_id "
                                    f"IN ({','.join('?' * len(chunk))})", [self.model, *chunk]).fetchall()
                added += self.add_blobs([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])

    # -- searching ----------------------------------------------------------------------------------

    def search(self, qvec, k: int):
        """(ids, approximate cosines), best first: ``k`` of them, more in a large index (:func:`breadth`)."""
        import numpy as np

        if not len(self.index):
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        want = min(breadth(len(self.index), k), len(self.index))
        m = self.index.search(np.asarray(qvec, dtype=np.float32), want, threads=1)
        return np.asarray(m.keys, dtype=np.int64), 1.0 - np.asarray(m.distances, dtype=np.float32)

    def channel_search(self, conn: sqlite3.Connection, qvec, channels, n: int, context: float):
        """:meth:`pps_turns.TurnStore.channel_similarities`: the ``n`` best turns of each of ``channels`` by context
        vector. A channel of at most :data:`CHANNEL_SCAN` turns is scanned exactly (its turn ids are the ids whose
        channel code is its own; every neighbour of its turns is one of them, so the context is exact); a larger
        one is answered from a wider search of the graph, the candidates of that channel kept (approximate)."""
        import numpy as np
        from pps_turns.vectors import top_rows

        from .turnindex import context_scores

        q = np.asarray(qvec, dtype=np.float32)
        out_ids, out_cos = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.float32)]
        for ch in dict.fromkeys(channels):
            code = self.codes.get(ch)
            if not code or not len(self.index):
                continue
            members = np.flatnonzero(self.channel_codes == code)
            if len(members) <= CHANNEL_SCAN:
                keys = members.astype(np.uint64)
                keys = keys[np.asarray(self.index.contains(keys), dtype=bool)] if len(keys) else keys
                if not len(keys):
                    continue
                if self.dtype in ("f16", "f32"):
                    mat = np.asarray(self.index.get(keys)).astype(np.float32).reshape(len(keys), -1)
                    ids, cos = context_scores(keys.astype(np.int64), keys.astype(np.int64), mat,
                                              np.full(len(keys), code), q, context)
                else:  # int8 in memory: the exact float32 rows from SQLite
                    from .turnindex import rescore

                    ids, cos = rescore(conn, self.model, keys.astype(np.int64), q, context,
                                       [int(k) for k in keys])
            else:
                wide = min(len(self.index), CHANNEL_WIDE_MAX,
                           n * 2 * max(1, -(-len(self.index) // max(1, len(members)))))
                found, _approx = self.search(q, wide)
                found = found[(found < len(self.channel_codes))]
                found = found[self.channel_codes[found] == code][:2 * n]
                if not len(found):
                    continue
                ids, cos = self.rescore(conn, found, q, context)
                own = ids < len(self.channel_codes)
                own[own] = self.channel_codes[ids[own]] == code
                ids, cos = ids[own], cos[own]
            best = top_rows(cos, n)
            out_ids.append(np.asarray(ids, dtype=np.int64)[best])
            out_cos.append(np.asarray(cos, dtype=np.float32)[best])
        return np.concatenate(out_ids), np.concatenate(out_cos)

    def rescore(self, conn: sqlite3.Connection, ids, qvec, context: float, keep: int | None = None):
        """(ids, cosines) of the candidates' context vectors (and their neighbours'), as
        ``turnindex.context_scores`` computes them: from the vectors this index holds in memory (float16 or
        float32), or from SQLite's float32 rows when it holds int8. ``keep``: with int8, when there are more
        candidates than this (a wide search, :func:`breadth`), the candidates and their neighbours are first
        ranked by context from the index's own int8 vectors and only the best ``keep`` read from SQLite (the
        same rows as a search of ``keep``; the order int8 gives is close enough to choose them, not to rank)."""
        import numpy as np

        from .turnindex import neighbourhood, rescore

        if self.dtype not in ("f16", "f32"):
            if keep is not None and len(ids) > keep:
                near, cos = self._scores(neighbourhood(ids, context, self.channel_codes), ids, qvec, context)
                ids = near[np.argsort(-cos)[:keep]]
            return rescore(conn, self.model, ids, qvec, context, neighbourhood(ids, context, self.channel_codes))
        return self._scores(neighbourhood(ids, context, self.channel_codes), ids, qvec, context)

    def _scores(self, around, ids, qvec, context: float):
        """:func:`turnindex.context_scores` from the vectors this index holds (``around``: the ids to read)."""
        import numpy as np

        from .turnindex import context_scores

        want = np.asarray([i for i in around if i > 0], dtype=np.uint64)
        if not len(want):
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        held = want[np.asarray(self.index.contains(want), dtype=bool)]
        if not len(held):
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        mat = np.asarray(self.index.get(held)).astype(np.float32).reshape(len(held), -1)  # native, then float32
        keys = held.astype(np.int64)
        codes = self.channel_codes
        chan = np.where(keys < len(codes), codes[np.minimum(keys, len(codes) - 1)], 0)
        return context_scores(ids, keys, mat, chan, qvec, context)

    # -- files --------------------------------------------------------------------------------------

    def save(self, conn: sqlite3.Connection) -> None:
        if self.tainted:
            raise RuntimeError("an index turns were removed from still holds their vectors: build a new one")
        index_path, meta_path = paths(self.db_path)
        row = conn.execute("SELECT vector FROM message_vectors WHERE message_id = ? AND model = ?",
                           (self.max_id, self.model)).fetchone()
        tmp = index_path.with_name(index_path.name + ".tmp")
        self.index.save(str(tmp))
        os.chmod(tmp, 0o600)
        os.replace(tmp, index_path)
        meta = {"model": self.model, "dim": self.dim, "max_id": self.max_id, "count": len(self.index),
                "max_id_vector": _digest(row[0] if row else None), **self.shape}
        tmp = meta_path.with_name(meta_path.name + ".tmp")
        tmp.write_text(json.dumps(meta))
        os.chmod(tmp, 0o600)
        os.replace(tmp, meta_path)
        self.dirty = False

    @classmethod
    def load(cls, conn: sqlite3.Connection, db_path: Path, model: str, dtype: str | None = None) -> TurnANN | None:
        """The saved index of ``model`` if it belongs to this database, else None (then build one)."""
        index_path, meta_path = paths(db_path)
        if not index_path.exists() or not meta_path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("model") != model:
                return None
            wanted = {"dtype": dtype or DTYPE, "connectivity": CONNECTIVITY, "expansion_add": EXPANSION_ADD}
            if any(meta.get(k, "i8" if k == "dtype" else None) != v for k, v in wanted.items()):
                log.info("turn vector index %s was built as %s, not %s: rebuilding", index_path,
                         {k: meta.get(k) for k in wanted}, wanted)
                return None
            row = conn.execute("SELECT vector FROM message_vectors WHERE message_id = ? AND model = ?",
                               (int(meta["max_id"]), model)).fetchone()
            if _digest(row[0] if row else None) != meta.get("max_id_vector"):
                log.warning("turn vector index %s does not match the database (restored or replaced?): rebuilding",
                            index_path)
                return None
            ann = cls(db_path, model, int(meta["dim"]), dtype or DTYPE)
            ann.index.load(str(index_path))
            if len(ann.index) != int(meta["count"]) or ann.index.ndim != ann.dim:
                return None
            ann.max_id = int(meta["max_id"])
            ann.load_channels(conn, ann.max_id)
            return ann
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            log.warning("turn vector index %s unreadable (%s): rebuilding", index_path, exc)
            return None

    @classmethod
    def open_or_build(cls, conn: sqlite3.Connection, db_path: Path, model: str,
                      progress: Callable[[int], None] | None = None, dtype: str | None = None) -> TurnANN | None:
        """Load the saved index and add what arrived since, or build it from every stored vector (and save it).
        None when the model has no vectors yet."""
        ann = cls.load(conn, db_path, model, dtype)
        if ann is not None:
            added = ann.catch_up(conn)
            if added:
                log.info("turn vector index: %d vectors added since the last save", added)
            return ann
        row = conn.execute("SELECT vector FROM message_vectors WHERE model = ? LIMIT 1", (model,)).fetchone()
        if row is None:
            return None
        ann = cls(db_path, model, len(row[0]) // 4, dtype or DTYPE)
        log.info("building the turn vector index (HNSW) for %s", model)
        ann.catch_up(conn, progress)
        ann.save(conn)
        return ann
