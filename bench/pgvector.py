"""Turn vectors searched inside PostgreSQL (pgvector HNSW) against exact search and against a server that holds
every vector in a matrix (pps_postgres before issue 25), same run.

    .venv/bin/python bench/pgvector.py [--turns 20000,200000] [--queries 100]

For each size, an entity schema on a PostgreSQL server pgserver starts in a temp dir gets that many turns (six
channels, runs of 1-6 turns per channel) and one 384-dimension unit vector each (synthetic: 2,000 topic centres
plus noise, written with COPY), then its HNSW index (``repair_turn_index``, what ``pps reindex`` does; a serving
entity grows it row by row). Queries are stored vectors plus noise. Prints:

- dense recall@10: the store's ``turn_similarities`` (HNSW candidates, rescored with their context, as the fused
  search asks: 200 candidates, context 0.3) against exact search over every context vector (numpy, same run);
- per-query latency p50/p95 of the HNSW path and of the exact matrix product an in-process matrix answers with;
- per-server RSS: a fresh ``python -I`` process opens the store and runs 20 searches, either through PostgreSQL
  (now) or loading every vector into ``pps_turns.vectors.TurnVectors`` first (before); VmRSS and VmHWM in MB,
  and a process that only opened the store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from lifetime import exact_dense, pct  # noqa: E402

DIM = 384
MODEL = "bench:synthetic|author+content"
CHANNELS = ["terminal:a", "terminal:b", "discord:home", "email:inbox", "telegram:jeff", "daemon:reflection"]
CONTEXT = 0.3
CANDIDATES = 200

SERVER = r"""
import asyncio, json, sys
import numpy as np

def status():
    out = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0]) / 1024
    return out

async def main(dsn, schema, mode, model):
    from pps_postgres.settings import PostgresSettings
    from pps_postgres.store import PostgresStore
    store = PostgresStore(PostgresSettings(dsn=dsn, schema=schema), "bench")
    await store.open()
    rng = np.random.default_rng(11)
    try:
        if mode == "open":
            return status()
        if mode == "matrix":  # what pps_postgres did before: every vector of the model in one matrix per server
            from psycopg.adapt import Loader
            from psycopg.pq import Format
            from psycopg.types import TypeInfo
            from pps_turns.vectors import TurnVectors

            class VectorBinaryLoader(Loader):  # pgvector's binary form: int16 dim, int16 unused, float4 BE
                format = Format.BINARY

                def load(self, data):
                    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)

            vectors = TurnVectors(model)
            async with store.connection() as conn:
                conn.adapters.register_loader((await TypeInfo.fetch(conn, "vector")).oid, VectorBinaryLoader)
                cur = conn.cursor(binary=True)
                await cur.execute("SELECT v.message_id, v.embedding, m.channel FROM message_vectors v JOIN messages m "
                                  "ON m.id = v.message_id WHERE v.model = %s ORDER BY v.message_id", (model,))
                while rows := await cur.fetchmany(20000):
                    vectors.add([r["message_id"] for r in rows], [r["channel"] for r in rows],
                                [r["embedding"].tobytes() for r in rows])
        for _ in range(20):
            q = rng.normal(size=384).astype(np.float32)
            q /= np.linalg.norm(q)
            if mode == "matrix":
                vectors.scores(q, 0.3)
            else:
                await store.turn_similarities(model, q, 200, 0.3)
        return status()
    finally:
        await store.close()

print(json.dumps(asyncio.run(main(*sys.argv[1:]))))
"""


def corpus(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(2000, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    mat = np.empty((n, DIM), dtype=np.float32)
    for a in range(0, n, 50_000):
        z = min(n, a + 50_000)
        noise = rng.normal(size=(z - a, DIM)).astype(np.float32)
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        block = centres[rng.integers(0, len(centres), z - a)] + 0.8 * noise
        mat[a:z] = block / np.linalg.norm(block, axis=1, keepdims=True)
    chans = np.empty(n, dtype=np.int64)
    k = 0
    while k < n:  # runs of 1-6 turns in one channel, as a conversation goes
        run = int(rng.integers(1, 7))
        chans[k:k + run] = rng.integers(0, len(CHANNELS))
        k += run
    return mat, chans


def binary_copy(ids: np.ndarray, mat: np.ndarray, model: str) -> bytes:
    """A COPY ... (FORMAT BINARY) stream of (message_id, model, embedding) rows (pgvector's binary form)."""
    m = model.encode()
    row = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"), ("model", f"S{len(m)}"),
                    ("l3", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (DIM,))])
    rows = np.zeros(len(ids), dtype=row)
    rows["nf"], rows["l1"], rows["id"], rows["l2"], rows["model"] = 3, 8, ids, len(m), m
    rows["l3"], rows["dim"], rows["v"] = 4 + 4 * DIM, DIM, mat
    return rows.tobytes()


async def fill(dsn: str, schema: str, mat: np.ndarray, chans: np.ndarray) -> float:
    from pps_postgres.settings import PostgresSettings
    from pps_postgres.store import PostgresStore

    store = PostgresStore(PostgresSettings(dsn=dsn, schema=schema), "bench")
    await store.open()  # the schema
    await store.close()
    import psycopg

    n = len(mat)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        with conn.cursor().copy("COPY messages (id, content, author_name, channel, created_at) FROM STDIN") as cp:
            for i in range(n):
                cp.write_row((i + 1, f"turn {i + 1}", "Jeff", CHANNELS[chans[i]],
                              "2025-01-01T00:00:00Z"))
        with conn.cursor().copy("COPY message_vectors (message_id, model, embedding) FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8)
            for a in range(0, n, 20_000):
                z = min(n, a + 20_000)
                cp.write(binary_copy(np.arange(a + 1, z + 1), mat[a:z], MODEL))
            cp.write(b"\xff\xff")
        conn.execute("ANALYZE messages")
        conn.execute("ANALYZE message_vectors")
    store = PostgresStore(PostgresSettings(dsn=dsn, schema=schema), "bench")
    await store.open()
    try:
        started = time.perf_counter()
        await store.repair_turn_index(MODEL)
        return time.perf_counter() - started
    finally:
        await store.close()


async def measure(dsn: str, n: int, queries: int) -> dict:
    from pps_postgres.settings import PostgresSettings
    from pps_postgres.store import PostgresStore
    from pps_turns.vectors import TurnVectors

    schema = f"vec{n}"
    mat, chans = corpus(n)
    out: dict = {"turns": n, "index build s": await fill(dsn, schema, mat, chans)}
    rng = np.random.default_rng(9)
    picks = rng.integers(0, n, queries)
    qs = mat[picks] + 0.9 * rng.normal(size=(queries, DIM)).astype(np.float32) / np.sqrt(DIM)
    qs = (qs / np.linalg.norm(qs, axis=1, keepdims=True)).astype(np.float32)
    want, _ = exact_dense(mat, chans, qs, CONTEXT)
    store = PostgresStore(PostgresSettings(dsn=dsn, schema=schema), "bench")
    await store.open()
    hits, lat = 0, []
    try:
        await store.turn_similarities(MODEL, qs[0], CANDIDATES, CONTEXT)  # warm
        for k, q in enumerate(qs):
            t0 = time.perf_counter()
            ids, cos = await store.turn_similarities(MODEL, q, CANDIDATES, CONTEXT)
            lat.append((time.perf_counter() - t0) * 1000)
            top = {int(ids[j]) for j in np.argsort(-cos)[:10]}
            hits += len(top & {int(i) for i in want[k]})
    finally:
        await store.close()
    out["recall@10"] = hits / (10 * queries)
    out["hnsw ms"] = (pct(lat, 50), pct(lat, 95))
    exact = TurnVectors(MODEL)
    exact.add(list(range(1, n + 1)), [CHANNELS[c] for c in chans], [v.tobytes() for v in mat])
    exact.scores(qs[0], CONTEXT)  # the context matrix, made once as a server would
    lat = []
    for q in qs:
        t0 = time.perf_counter()
        _ids, cos = exact.scores(q, CONTEXT)
        np.argpartition(-cos, CANDIDATES)[:CANDIDATES]
        lat.append((time.perf_counter() - t0) * 1000)
    out["matrix ms"] = (pct(lat, 50), pct(lat, 95))
    del exact
    for mode in ("open", "hnsw", "matrix"):
        proc = subprocess.run([sys.executable, "-I", "-c", SERVER, dsn, schema, mode, MODEL], capture_output=True,
                              text=True, cwd="/", check=True)
        out[f"rss {mode}"] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", default="20000,200000", help="sizes, comma-separated")
    ap.add_argument("--queries", type=int, default=100)
    args = ap.parse_args()
    from pps_postgres.testing import start_postgres

    dsn, stop = start_postgres()
    results = []
    try:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:  # the index builds in memory (bench server only)
            conn.execute("ALTER SYSTEM SET maintenance_work_mem = '1GB'")
            conn.execute("SELECT pg_reload_conf()")
        for n in (int(x) for x in args.turns.split(",")):
            results.append(await measure(dsn, n, args.queries))
            print(json.dumps(results[-1]), file=sys.stderr)
    finally:
        stop()
    print(f"load average {os.getloadavg()[0]:.1f}; {args.queries} queries; {DIM} dimensions; "
          f"{CANDIDATES} candidates, context {CONTEXT}\n")
    print(f"{'turns':>8} {'recall@10':>9} {'build s':>8} {'hnsw p50':>9} {'p95':>6} {'matrix p50':>10} {'p95':>6} "
          f"{'RSS open':>9} {'RSS hnsw':>9} {'HWM hnsw':>9} {'RSS matrix':>10} {'HWM matrix':>10}")
    for r in results:
        print(f"{r['turns']:>8} {r['recall@10']:>9.3f} {r['index build s']:>8.1f} {r['hnsw ms'][0]:>9.1f} "
              f"{r['hnsw ms'][1]:>6.1f} {r['matrix ms'][0]:>10.1f} {r['matrix ms'][1]:>6.1f} "
              f"{r['rss open']['VmRSS']:>9.0f} {r['rss hnsw']['VmRSS']:>9.0f} {r['rss hnsw']['VmHWM']:>9.0f} "
              f"{r['rss matrix']['VmRSS']:>10.0f} {r['rss matrix']['VmHWM']:>10.0f}")
    print("\nRSS/HWM in MB of a fresh process that opened the store and ran 20 searches (open: no search)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
