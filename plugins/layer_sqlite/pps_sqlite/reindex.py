"""``reindex`` for the sqlite layers: turn vectors and summary vectors, rebuilt from the rows they derive from."""

from __future__ import annotations

import asyncio
from typing import Any

from .db import Tx


def _count_missing_turns(conn, model: str) -> int:
    return conn.execute("SELECT COUNT(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM message_vectors v "
                        "WHERE v.message_id = m.id AND v.model = ?)", (model,)).fetchone()[0]


def _count_missing_summaries(conn, model: str) -> int:
    return conn.execute("SELECT COUNT(*) FROM message_summaries s WHERE NOT EXISTS (SELECT 1 FROM summary_vectors v "
                        "WHERE v.summary_id = s.id AND v.model = ?)", (model,)).fetchone()[0]


def _drop(conn, table: str) -> int:
    with Tx(conn):
        return conn.execute(f"DELETE FROM {table}").rowcount  # every model's: old embedders' vectors go too


async def turn_vectors(layer, progress, full: bool) -> dict[str, Any] | None:
    """Embed every turn without a vector (all of them with ``full``), through the retriever's own drain."""
    retriever, db = layer.retriever, layer.db
    emb = retriever._embedder()
    if emb is None:
        return {"skipped": "no embedder loaded: turns are searched lexically"}
    model = retriever._model(emb)
    await retriever.close()  # a background drain stops; this one takes over
    dropped = 0
    if full:
        dropped = await db.run(_drop, db.conn, "message_vectors")
        retriever.vectors = None
        await db.run(retriever.reset_ann, db.conn, True)  # the HNSW files go too; rebuilt below
    retriever._floor = 0
    retriever._pending = True
    total = await db.run(_count_missing_turns, db.conn, model)
    progress(0, total)
    done = await retriever.drain(progress=lambda n: progress(min(n, total), total))
    left = await db.run(_count_missing_turns, db.conn, model)
    out = {"embedded": done, "missing_after": left, "model": model}
    ann = await db.run(retriever.repair_ann, db.conn, model)  # past the threshold: the HNSW index, complete
    if ann:
        out.update(ann)
    if full:
        out["dropped"] = dropped
    return out


async def summary_vectors(layer, progress, full: bool) -> dict[str, Any] | None:
    import numpy as np

    from .summaryindex import EMBED_BATCH, _missing, _write

    index, db = layer.index, layer.db
    emb = index._embedder()
    if emb is None:
        return {"skipped": "no embedder loaded: summaries are searched lexically"}
    model = f"{emb.name}|summary"
    dropped = await db.run(_drop, db.conn, "summary_vectors") if full else 0
    index._ids = None
    index._floor = ("", 0)
    total = await db.run(_count_missing_summaries, db.conn, model)
    done = 0
    progress(0, total)
    while True:
        todo = await db.run(_missing, db.conn, model, EMBED_BATCH)
        if not todo:
            break
        vecs = await asyncio.to_thread(emb.embed, [text for _i, text in todo])
        blobs = [np.asarray(v, dtype=np.float32).tobytes() for v in vecs]
        await db.run(_write, db.conn, model, [(i, b) for (i, _t), b in zip(todo, blobs, strict=True)])
        index._ids = None
        done += len(todo)
        progress(min(done, total), total)
    out = {"embedded": done, "model": model}
    if full:
        out["dropped"] = dropped
    return out
