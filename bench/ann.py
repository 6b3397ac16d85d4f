"""How good are the turn vector index's candidates? recall@10 of the dense signal against exact search (issue 26).

    .venv/bin/python bench/ann.py [--turns 200000] [--first N] [--runs 100] [--variants f16:16:128,i8:16:128]
                                  [--search 64:400,400:800]
    .venv/bin/python bench/ann.py --turns 1000000 --index HOME/pps.db.turns.usearch --search 64:400,800:400,800:800


Reads the turn vectors bench/lifetime.py cached for ``--turns`` (``vectors.npy``, ``channels.npy``: build it
first; ``--first N`` uses only the oldest N turns) and builds one HNSW index (usearch, as ``pps_sqlite.ann``
does) per variant ``dtype:connectivity:expansion_add[:own]`` in memory, then, for each search setting
``expansion_search:candidates`` (default: the layer's), asks it for each question (LoCoMo questions, embedded
with the local embedder) the candidates, rescores them and their neighbours with their context exactly as the layer does
(``turnindex.context_scores``; from the index's own vectors for f16/f32 or ``:own``, else float32) and compares the top 10
with exact search over every context vector (numpy brute force, same run). Also the ceiling: the exact top
candidates by the turns' own vectors, rescored the same way (what a perfect index would give). Prints, per
variant, recall@10 (tie-aware), build time and rate, search + rescoring p50/p95 and the index's memory.

``--index PATH`` builds nothing: it loads a saved index (``pps.db.turns.usearch``, its shape read from the
``pps.db.turns.json`` beside it, as the layer loads it; the files are only read) and, per search setting, times
the search alone, the search + rescoring from the float32 vectors in memory, and the search + rescoring the
layer's way for an int8 index: five float32 rows per candidate from the database beside it (opened read-only,
``immutable``). Both rescorings use float32 vectors, so they give the same recall; ids past ``--turns`` (turns
a benchmark captured after the build) are not scored.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from lifetime import CACHE, exact_dense, pct, questions  # noqa: E402


def rescored_top(ids, mat, chans, qvec, context, index=None, k=10, codes=None):
    """The layer's rescoring of candidates ``ids``: vectors from ``index`` (its own, f16/f32) or float32 ``mat``."""
    from pps_sqlite.turnindex import context_scores, neighbourhood

    n = len(mat)
    if codes is None:  # by turn id, as the index keeps them
        codes = np.concatenate([[0], np.asarray(chans, dtype=np.int64) + 1])
    want = np.asarray([i for i in neighbourhood(ids, context, codes) if 1 <= i <= n], dtype=np.int64)
    rows = (np.asarray(index.get(want.astype(np.uint64), dtype=np.float32)) if index is not None
            else np.asarray(mat[want - 1], dtype=np.float32))
    got, cos = context_scores(ids, want, rows, codes[want], qvec, context)  # code 0 would mean unknown
    order = np.argsort(-cos)[:k]
    return [int(got[j]) for j in order]


def exact_ctx(mat, chans, q, i, context):
    from lifetime import channel_rows, context_vector

    global _LINKS
    if _LINKS is None or len(_LINKS[0]) != len(chans):
        _LINKS = channel_rows(chans)
    return float(context_vector(mat, _LINKS, np.asarray([i - 1]), context)[0] @ q)


_LINKS = None


def recall(tops, mat, chans, qvecs, exact_ids, exact_s, context) -> float:
    hits = 0
    for q, ids in enumerate(tops):
        truth = set(exact_ids[q].tolist())
        hits += sum(1 for i in ids[:10] if i in truth or exact_ctx(mat, chans, qvecs[q], i, context)
                    >= exact_s[q, -1] - 1e-5)
    return hits / (10 * len(tops))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=200_000)
    ap.add_argument("--home", type=Path, help="the cached entity directory (default: lifetime-<turns>-buried-...)")
    ap.add_argument("--first", type=int, default=0, help="only the oldest N turns")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--variants", default="i8:16:128,f16:16:128,f16:32:200")
    ap.add_argument("--index", type=Path, help="a saved index (pps.db.turns.usearch) to load instead of building")
    ap.add_argument("--prefilter", type=int, default=0, help="with --index: also rank the candidates by their "
                    "context from the index's own vectors and rescore only this many from SQLite")
    ap.add_argument("--search", default="", help="expansion_search:candidates settings, comma-separated "
                                                 "(default: the layer's)")
    args = ap.parse_args()
    from pps_embeddings.onnx import OnnxEmbedder
    from pps_turns import retrieval

    # onnxruntime before usearch (usearch 2.26.2+ crashed the interpreter in the other order: pps-sqlite now
    # requires an earlier release, tests/test_native_libraries.py)
    qvecs = np.asarray(OnnxEmbedder().embed(questions(args.runs)), dtype=np.float32)
    from pps_sqlite import ann, turnindex
    from usearch.index import Index

    home = args.home or next(iter(sorted(CACHE.glob(f"lifetime-{args.turns}*"))), None)
    if home is None or not (home / "vectors.npy").exists():
        ap.error(f"no cached vectors for --turns {args.turns} under {CACHE}: run bench/lifetime.py --build-only first")
    mat = np.load(home / "vectors.npy", mmap_mode="r")
    chans = np.load(home / "channels.npy")
    if args.first:
        mat, chans = mat[:args.first], chans[:args.first]
    mat = np.ascontiguousarray(mat, dtype=np.float32)
    n = len(mat)
    context = retrieval.DEFAULT.context
    k = retrieval.DEFAULT.candidates * turnindex.ANN_OVERFETCH
    t0 = time.perf_counter()
    exact_ids, exact_s = exact_dense(mat, chans, qvecs, context)
    exact_ms = (time.perf_counter() - t0) * 1000 / len(qvecs)
    print(f"{n:,} turn vectors from {home}; {len(qvecs)} questions; {k} candidates; context {context}; "
          f"exact search {exact_ms:.1f} ms a question (numpy, all context vectors)\n")
    searches = [tuple(int(x) for x in v.split(":")) for v in args.search.split(",") if v] or [
        (ann.EXPANSION_SEARCH, k)]
    print(f"{'variant (dtype:conn:exp_add / exp_search:cands)':<48}{'recall@10':>10}{'build s':>9}{'vec/s':>8}"
          f"{'p50 ms':>8}{'p95 ms':>8}{'memory':>10}")
    # the ceiling: a perfect index (the exact top k by the turns' own vectors), rescored as the layer does
    own = mat @ qvecs.T
    for c in sorted({k, *(cands for _e, cands in searches)}):
        tops = [rescored_top((np.argpartition(-own[:, q], c)[:c] + 1).tolist(), mat, chans, qvecs[q], context)
                for q in range(len(qvecs))]
        print(f"{f'exact candidates (ceiling, {c})':<48}"
              f"{recall(tops, mat, chans, qvecs, exact_ids, exact_s, context):>10.3f}", flush=True)
    del own
    if args.index:
        return saved_index(args.index, searches, mat, chans, qvecs, exact_ids, exact_s, context, args.prefilter)
    ids_all = np.arange(1, n + 1, dtype=np.uint64)
    for spec in args.variants.split(","):
        dtype, conn, exp, *how = spec.split(":")  # how: "own" rescoring from the index's vectors even for i8
        own_vectors = dtype in ("f16", "f32") or how == ["own"]
        index = Index(ndim=mat.shape[1], metric="cos", dtype=dtype, connectivity=int(conn),
                      expansion_add=int(exp), expansion_search=ann.EXPANSION_SEARCH)
        t0 = time.perf_counter()
        for a in range(0, n, 20_000):
            index.add(ids_all[a:a + 20_000], mat[a:a + 20_000], threads=2)
        build_s = time.perf_counter() - t0
        for exp_search, cands in searches:
            index.expansion_search = exp_search
            tops, lat = [], []
            for q in range(len(qvecs)):
                t = time.perf_counter()
                m = index.search(qvecs[q], cands, threads=1)
                cand = np.asarray(m.keys, dtype=np.int64).tolist()
                tops.append(rescored_top(cand, mat, chans, qvecs[q], context,
                                         index if own_vectors else None))  # as the layer rescores
                lat.append((time.perf_counter() - t) * 1000)
            r = recall(tops, mat, chans, qvecs, exact_ids, exact_s, context)
            print(f"{f'{spec} / {exp_search}:{cands}':<48}{r:>10.3f}{build_s:>9.0f}{n / build_s:>8.0f}"
                  f"{pct(lat, 50):>8.2f}{pct(lat, 95):>8.2f}{index.memory_usage / 2**20:>8.0f} MiB", flush=True)
        del index


def saved_index(path: Path, searches, mat, chans, qvecs, exact_ids, exact_s, context, prefilter: int = 0) -> None:
    """Search a saved index as the layer does, rescoring from memory and from the database's rows (read-only)."""
    import json
    import os
    import sqlite3

    from pps_sqlite.turnindex import context_scores, neighbourhood, rescore
    from usearch.index import Index

    meta = json.loads(path.with_suffix(".json").read_text())
    index = Index(ndim=int(meta["dim"]), metric="cos", dtype=meta["dtype"], connectivity=int(meta["connectivity"]),
                  expansion_add=int(meta["expansion_add"]))
    t0 = time.perf_counter()
    index.load(str(path))
    load_s = time.perf_counter() - t0
    db = path.with_name(path.name.removesuffix(".turns.usearch"))
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)  # never writes, not even a -shm file
    n = len(mat)
    codes = np.concatenate([[0], np.asarray(chans, dtype=np.int32) + 1])  # by turn id, as the index keeps them
    print(f"saved index {path}: {len(index):,} vectors, {meta['dtype']}, connectivity {meta['connectivity']}, "
          f"expansion_add {meta['expansion_add']}; loaded in {load_s:.1f} s, {index.memory_usage / 2**20:.0f} MiB; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print(f"{'exp_search:cands':<18}{'recall@10':>10}{'search p50':>12}{'p95':>8}{'+mem p50':>10}{'p95':>8}"
          f"{'+SQLite p50':>13}{'p95':>8}{'rows':>7}{'load':>6}")
    for exp_search, cands in searches:
        index.expansion_search = exp_search
        tops, t_search, t_mem, t_sql, nrows = [], [], [], [], []
        for q in range(len(qvecs)):
            t = time.perf_counter()
            m = index.search(qvecs[q], cands, threads=1)
            cand = [int(i) for i in np.asarray(m.keys, dtype=np.int64) if 1 <= i <= n]
            t_search.append((time.perf_counter() - t) * 1000)
            tops.append(rescored_top(cand, mat, chans, qvecs[q], context, codes=codes))  # float32, from memory
            t_mem.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            m = index.search(qvecs[q], cands, threads=1)
            cand = [int(i) for i in np.asarray(m.keys, dtype=np.int64) if 1 <= i <= n]
            around = neighbourhood(cand, context, codes)
            got, cos = rescore(conn, meta["model"], cand, qvecs[q], context, around)  # the layer's int8 path
            sql_top = [int(got[j]) for j in np.argsort(-cos)[:10]]
            t_sql.append((time.perf_counter() - t) * 1000)
            nrows.append(len(around))
            if sql_top != tops[-1][:10]:
                print(f"  question {q}: SQLite rescoring's top 10 differs from memory's", flush=True)
        r = recall(tops, mat, chans, qvecs, exact_ids, exact_s, context)
        pre = ""
        if prefilter and prefilter < cands:  # the index's own (int8) vectors choose which candidates to read
            ptops, t_pre = [], []
            for q in range(len(qvecs)):
                t = time.perf_counter()
                m = index.search(qvecs[q], cands, threads=1)
                cand = [int(i) for i in np.asarray(m.keys, dtype=np.int64) if 1 <= i <= n]
                want = np.asarray(neighbourhood(cand, context, codes), dtype=np.int64)
                want = want[(want >= 1) & (want <= n)]
                rows8 = np.asarray(index.get(want.astype(np.uint64), dtype=np.float32), dtype=np.float32)
                got, cos = context_scores(cand, want, rows8, codes[want], qvecs[q], context)
                best = [int(got[j]) for j in np.argsort(-cos)[:prefilter]]
                got, cos = rescore(conn, meta["model"], best, qvecs[q], context, neighbourhood(best, context, codes))
                ptops.append([int(got[j]) for j in np.argsort(-cos)[:10]])
                t_pre.append((time.perf_counter() - t) * 1000)
            pr = recall(ptops, mat, chans, qvecs, exact_ids, exact_s, context)
            pre = f"   int8 prefilter to {prefilter}: recall {pr:.3f}, p50 {pct(t_pre, 50):.2f}, p95 {pct(t_pre, 95):.2f}"
        print(f"{f'{exp_search}:{cands}':<18}{r:>10.3f}{pct(t_search, 50):>12.2f}{pct(t_search, 95):>8.2f}"
              f"{pct(t_mem, 50):>10.2f}{pct(t_mem, 95):>8.2f}{pct(t_sql, 50):>13.2f}{pct(t_sql, 95):>8.2f}"
              f"{int(np.mean(nrows)):>7}{os.getloadavg()[0]:>6.1f}{pre}", flush=True)
    # the layer's own path (pps_sqlite.ann.TurnANN, loaded as the layer loads it), as before and widened, same run
    from pps_sqlite import ann
    from pps_sqlite.turnindex import ANN_OVERFETCH
    from pps_turns import retrieval

    layer = ann.TurnANN(db, meta["model"], int(meta["dim"]), meta["dtype"])  # as TurnANN.load does, minus its
    layer.index.load(str(path))                                                # checks (a benchmark's copy can
    layer.max_id = int(meta["max_id"])                                         # hold turns deleted since)
    layer.load_channels(conn, layer.max_id)
    k = retrieval.DEFAULT.candidates * ANN_OVERFETCH
    wide = ann.WIDE_FROM
    for name, wide_from in (("layer, as before", 2**62), ("layer, widened (default)", wide),
                            ("layer, as before", 2**62), ("layer, widened (default)", wide)):
        ann.WIDE_FROM = wide_from
        tops, lat = [], []
        for q in range(len(qvecs)):
            t = time.perf_counter()
            ids, _approx = layer.search(qvecs[q], k)
            got, cos = layer.rescore(conn, ids, qvecs[q], context, k)
            tops.append([int(got[j]) for j in np.argsort(-cos)[:10]])
            lat.append((time.perf_counter() - t) * 1000)
        r = recall(tops, mat, chans, qvecs, exact_ids, exact_s, context)
        print(f"{f'{name}: {ann.breadth(len(layer), k)} candidates':<42}recall@10 {r:.3f}  p50 {pct(lat, 50):.2f} ms"
              f"  p95 {pct(lat, 95):.2f} ms  load {os.getloadavg()[0]:.1f}", flush=True)
    ann.WIDE_FROM = wide
    conn.close()


if __name__ == "__main__":
    main()
