"""A lifetime of turns: recall at 200,000 and 1,000,000 turns (issues 19, 26).

    .venv/bin/python bench/lifetime.py [--turns 200000] [--runs 100] [--no-graph] [--rebuild] [--ann-dtype f16|i8]
                                       [--locomo FILE|none] [--pool synthetic|with-locomo] [--locomo-only]

Builds an entity once and caches it under ~/.cache/pps-bench/lifetime-<turns>/ (PPS_BENCH_CACHE moves
it; --rebuild starts over; an interrupted build resumes at the stage it reached):
- turns across 12 channels (terminal sessions, discord, email, a reflection daemon), two authors per
  channel, sessions of 40-120 turns, ~5 years of timestamps, stored through the real ``store_messages``;
- each turn is 1-3 sentences drawn from a pool of 16,000 distinct templated sentences (``--pool with-locomo``:
  the 6,094 sentences of the LoCoMo file first, as issue 19 built it; the default keeps them out, so a buried
  conversation's sentences appear nowhere else). Sentences are embedded once with the local embedder
  (all-MiniLM-L6-v2 ONNX) and cached by sentence; a turn's vector is the normalised sum of its sentences' vectors
  (an approximation of embedding the turn: it keeps turns distinct and topical without embedding 10^6
  texts). Turn vectors are written to ``message_vectors`` under the model key the layer uses;
- buried LoCoMo (``--locomo FILE``, default the public file; ``none`` to leave it out): each conversation
  of the file takes slots inside the N turns, on a channel of its own (``locomo:<sample id>``), each session
  where its own date falls among the synthetic turns, its turns in order with 0-2 turns of other channels
  between them; its turns are embedded for real by the layer's own background job;
- the turn vector index (HNSW) is built on the layer's background thread and timed (stage ``ann``); meanwhile a
  ``raw_search`` and a captured turn every 5 s, timed (recorded in stages.json; the turns go again after);
- summaries of 50 turns covering all but the newest 300 (``store_summary``), text from the turns they
  cover, vectors the same way; word-photos (1 per 1,000 turns, ``anchor_save``, embedded for real),
  crystals (1 per 5,000), graph facts (1 per 100 turns, entities = facts / 4, embedded for real, written a
  batch per Kuzu statement by bench/graph.py's ``populate_graph``; a stopped graph stage resumes where it stopped;
  ``--no-graph`` skips them).

Then buried LoCoMo: every question (categories 1-4) through ``raw_search`` over the whole history, scored as
bench/locomo.py scores it (turn-level recall@10), p50/p95, and the same conversations alone, each in an
entity of its own, same run (``buried LoCoMo recall@10: X (alone: Y, same run)``). Then, in one serving process (sqlite, embeddings, chroma, crystals, graphiti), p50/p95 of: the startup
package, fused ``raw_search``, all-layer ``ambient_recall``, budgeted recall with unread (a turn arrives from
another channel before each call); capture throughput on the big database (one writer); database and index
sizes; RSS. Baselines from the same run: plain SQL of the startup rows (read-only connection, between the
package's calls, before anything is captured), a bare FTS5 MATCH, brute-force cosine
over every turn vector (numpy, memory-mapped), the query embedding alone. The recall@10 of the dense signal
(ANN + exact rescoring) against exact search over every vector is measured on the same queries.
Turns and cursors the measurement adds are deleted afterwards, so the cache stays as built.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pps_core import Memory  # noqa: E402,I001  (first: it sets numpy's BLAS to one thread, as in a server)

import numpy as np  # noqa: E402

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo" / "locomo5_public.json"
CACHE = Path(os.environ.get("PPS_BENCH_CACHE") or Path.home() / ".cache" / "pps-bench")
POOL_SIZE = 16_000
UNSUMMARIZED = 300
PER_SUMMARY = 50
DIM = 384

PEOPLE = ["Jeff", "Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate", "Tim", "Brandi", "Theo"]
CHANNELS = [f"terminal:{k}" for k in "abcdef"] + ["discord:home", "discord:work", "email:inbox", "email:lists",
                                                  "daemon:reflection", "telegram:jeff"]
WEIGHTS = [6, 5, 4, 3, 2, 2, 10, 6, 3, 1, 4, 4]
ACTS = ["fixed", "talked about", "planned", "painted", "wrote about", "worried about", "cleaned", "tested",
        "debugged", "photographed", "cooked for", "read about", "argued over", "sketched", "measured", "rebuilt"]
THINGS = ["garden beds", "kitchen light", "lighthouse", "violin", "journal", "balcony", "river trail", "bakery",
          "library card", "studio", "greenhouse", "observatory", "ferry schedule", "cabin roof", "market stall",
          "server migration", "startup manifest", "backup script", "graph index", "memory layer", "summary job",
          "embedding model", "database schema", "hook timeout", "token budget", "kitten", "coffee grinder",
          "bicycle", "piano lessons", "rent contract", "tax forms", "camping trip", "pottery class", "sourdough"]
WHEN = ["this morning", "last night", "on Sunday", "after the storm", "before the move", "during the festival",
        "with coffee", "late at night", "at dawn", "for the project", "while it snowed", "in the afternoon"]
FEEL = ["and it felt good", "which took longer than expected", "and we laughed about it", "and nothing broke",
        "but the logs were noisy", "so we paused", "and I wrote it down", "and it worked the second time", ""]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def bar(total: int, desc: str, unit: str = "turn"):
    from pps_core.progress import progress

    return progress(total, desc, unit)



async def sample_load(into: list[float], every: float = 10.0) -> None:
    """The 1-minute load average every ``every`` seconds into ``into``, until cancelled."""
    while True:
        into.append(os.getloadavg()[0])
        await asyncio.sleep(every)


# -- the pool of sentences and their vectors ---------------------------------------------------------


def locomo_data(path: Path = LOCOMO) -> list[dict]:
    return json.loads(path.read_text()) if path.exists() else []


def locomo_sentences(path: Path = LOCOMO) -> list[str]:
    out: dict[str, None] = {}
    for sample in locomo_data(path):
        for key, turns in sample["conversation"].items():
            if re.fullmatch(r"session_\d+", key):
                for t in turns:
                    for s in re.split(r"(?<=[.!?])\s+", t["text"]):
                        if len(s.split()) >= 4:
                            out[s.strip()] = None
    return list(out)


def pool_texts(pool: str = "synthetic", path: Path = LOCOMO) -> list[str]:
    """The sentences turns are made of: templated ones only (``synthetic``, the default: no sentence of the
    LoCoMo file, so a buried conversation's own sentences are nowhere else in the history), or the LoCoMo
    file's sentences first and templated ones after (``with-locomo``, as issue 19 measured)."""
    theirs = locomo_sentences(path)
    out: dict[str, None] = dict.fromkeys(theirs) if pool == "with-locomo" else {}
    exclude = set(theirs)
    rng = random.Random(190)
    while len(out) < POOL_SIZE:
        s = (f"{rng.choice(PEOPLE)} {rng.choice(ACTS)} the {rng.choice(THINGS)} {rng.choice(WHEN)} "
             f"{rng.choice(FEEL)}").strip() + "."
        if s not in exclude:
            out[s] = None
    return list(out)[:POOL_SIZE]


def pool_vectors(texts: list[str]) -> np.ndarray:
    """Each sentence's vector, embedded once and cached by sentence (both pools share their templated ones)."""
    from pps_embeddings.onnx import OnnxEmbedder

    path = CACHE / f"sentences-{OnnxEmbedder.name.replace(':', '_').replace('/', '_')}.npz"
    known: dict[str, int] = {}
    mat = np.empty((0, DIM), dtype=np.float32)
    if path.exists():
        with np.load(path) as z:
            known = {t: k for k, t in enumerate(z["texts"].tolist())}
            mat = z["vectors"]
    todo = [t for t in dict.fromkeys(texts) if t not in known]
    if todo:
        emb = OnnxEmbedder()
        out = np.empty((len(todo), DIM), dtype=np.float32)
        started = time.perf_counter()
        with bar(len(todo), "embedding the sentence pool", "text") as b:
            for k in range(0, len(todo), 256):
                out[k:k + 256] = np.asarray(emb.embed(todo[k:k + 256]), dtype=np.float32)
                b.update(len(todo[k:k + 256]))
        print(f"embedded {len(todo)} sentences once in {time.perf_counter() - started:.0f}s -> {path}",
              file=sys.stderr)
        base = len(known)
        known.update({t: base + k for k, t in enumerate(todo)})
        mat = np.concatenate([mat, out])
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, texts=np.array(list(known), dtype=object).astype(str), vectors=mat)
        os.replace(tmp, path)
    return mat[[known[t] for t in texts]]


# -- the entity ----------------------------------------------------------------------------------------


class Plan:
    """The turns, deterministic and compact (numpy): channel, session, author, time, and their sentences.

    ``buried``: LoCoMo conversations (``locomo.load``) placed inside the history: each its own channel
    (``locomo:<sample id>``), each session at the place its own date falls among the synthetic turns (or right
    after the conversation's previous session, when that one still runs there: a channel's turns arrive in
    order, as in a real history), its turns in order with 0-2 turns of other channels between them; they take
    those slots (the history keeps n turns). ``dia[slot]`` is (sample id, dia id). Until issue 26's second
    measurement a session started where its date fell even when the previous one was still being placed there,
    so two sessions a few days apart were shuffled into each other in the channel (1,028 of the 2,760 buried
    turns at 12,000 followed a turn of another session, against 95 alone); caches built so are not reused
    (their names now end in ``-v2``)."""

    def __init__(self, n: int, pool: list[str], buried: list[dict] | None = None) -> None:
        rng = random.Random(19)
        self.n = n
        self.pool = pool
        self.channels = list(CHANNELS)
        start, span = 1_609_459_200, 5 * 365 * 86400  # 2021-01-01, five years
        step = span / n
        session = {c: 0 for c in CHANNELS}
        left = {c: 0 for c in CHANNELS}
        self.channel_code = np.empty(n, dtype=np.int16)
        self.session = np.empty(n, dtype=np.int32)
        self.ts = np.empty(n, dtype=np.int64)
        self.sentences = np.full((n, 3), -1, dtype=np.int32)
        t = float(start)
        codes = list(range(len(CHANNELS)))
        for i in range(n):
            code = rng.choices(codes, WEIGHTS)[0]
            c = CHANNELS[code]
            if left[c] <= 0:
                session[c] += 1
                left[c] = rng.randint(40, 120)
            left[c] -= 1
            k = rng.choices((1, 2, 3), (0.5, 0.35, 0.15))[0]
            for j in range(k):
                self.sentences[i, j] = rng.randrange(len(pool))
            t += step * rng.uniform(0.2, 1.8)
            self.channel_code[i], self.session[i], self.ts[i] = code, session[c], int(t)
        self.buried: dict[int, dict] = {}
        self.dia: dict[int, tuple[str, str]] = {}
        if buried:
            self._bury(buried)

    def _bury(self, convs: list[dict]) -> None:
        from datetime import UTC, datetime

        if sum(len(c["turns"]) for c in convs) * 4 > self.n:
            raise SystemExit(f"--turns {self.n} is too few to bury {sum(len(c['turns']) for c in convs)} LoCoMo "
                             "turns (at least 4x as many)")
        rng = random.Random(43)
        ordered = self.ts.copy()  # the synthetic times, ascending: where each session's date falls
        for conv in convs:
            code = len(self.channels)
            self.channels.append(f"locomo:{conv['id']}")
            p = -1
            for t in conv["turns"]:
                when = int(datetime.fromisoformat(t["created_at"]).replace(tzinfo=UTC).timestamp())
                if t["metadata"]["dia_id"].endswith(":1") or p < 0:  # a session starts where its date falls,
                    p = max(int(np.searchsorted(ordered, when)), p + 1)  # after the channel's previous turn
                else:
                    p += rng.choice((1, 1, 2, 3))
                p = min(p, self.n - 1)
                while p in self.buried:
                    p = p + 1 if p + 1 < self.n else max(q for q in range(self.n) if q not in self.buried)
                self.buried[p] = t
                self.dia[p] = (conv["id"], t["metadata"]["dia_id"])
                self.channel_code[p] = code
                self.session[p] = int(t["metadata"]["session"])
                self.ts[p] = when
                self.sentences[p] = -1

    def author(self, i: int) -> str:
        if i in self.buried:
            return self.buried[i]["author_name"]
        return "Lyra" if i % 2 else PEOPLE[int(self.channel_code[i]) % len(PEOPLE)]

    def channel(self, i: int) -> str:
        return self.channels[int(self.channel_code[i])]

    def turn(self, i: int) -> dict:
        c = self.channel(i)
        if i in self.buried:
            return {**self.buried[i], "channel": c, "session_id": f"{c}#{self.session[i]}"}
        return {"content": " ".join(self.pool[j] for j in self.sentences[i] if j >= 0), "author_name": self.author(i),
                "channel": c, "session_id": f"{c}#{self.session[i]}", "message_id": f"lt:{i}",
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(self.ts[i])))}

    def vectors(self, vecs: np.ndarray, a: int, z: int) -> np.ndarray:
        """Turns a..z-1: the normalised sum of their sentences' vectors."""
        idx = self.sentences[a:z]
        v = np.zeros((z - a, vecs.shape[1]), dtype=np.float32)
        for j in range(idx.shape[1]):
            ok = idx[:, j] >= 0
            v[ok] += vecs[idx[ok, j]]
        return v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-12)


def stages(home: Path) -> dict:
    p = home / "stages.json"
    return json.loads(p.read_text()) if p.exists() else {}


def stage_done(home: Path, name: str, info) -> None:
    s = stages(home)
    s[name] = info
    (home / "stages.json").write_text(json.dumps(s, indent=1))


#: ``[sqlite] ann_dtype`` for every entity this run opens (``--ann-dtype``; None: the setting's default, or the dtype
#: the cached entity's index was built with, so measuring never rebuilds it beside)
ANN_DTYPE: str | None = None


def entity(home: Path, plugins: list[str]) -> Memory:
    sqlite = {"ann_dtype": ANN_DTYPE} if ANN_DTYPE else {}
    return Memory.for_entity("lifetime", home=home / "home", plugins=plugins, graphiti={"focal_entity": "Lyra"},
                             sqlite=sqlite, timezone="UTC")


def db_path(home: Path) -> Path:
    return home / "home" / "pps.db"


async def build(home: Path, n: int, graph: bool, embedder: bool = True, pool: str = "synthetic",
                locomo_file: Path | None = LOCOMO) -> tuple[Plan, np.ndarray]:
    from locomo import load as load_locomo
    from pps_embeddings.onnx import OnnxEmbedder
    from pps_turns.vectors import RECIPE

    home.mkdir(parents=True, exist_ok=True)
    texts = pool_texts(pool, locomo_file or LOCOMO)
    vecs = pool_vectors(texts)
    plan = Plan(n, texts, load_locomo(locomo_file) if locomo_file else None)
    done = stages(home)
    model = f"{OnnxEmbedder.name}|{RECIPE}"
    if "turns" not in done:
        started = time.perf_counter()
        async with entity(home, ["sqlite"]) as memory:
            have = (await memory.call("summary_stats", {}))["total_messages"]
            with bar(n, "storing turns") as b:
                b.update(have)
                for k in range(have, n, 500):
                    batch = [plan.turn(i) for i in range(k, min(n, k + 500))]
                    await memory.call("store_messages", {"messages": batch})
                    b.update(len(batch))
        stage_done(home, "turns", {"seconds": round(time.perf_counter() - started, 1)})
    if "vectors" not in done:
        started = time.perf_counter()
        out = np.lib.format.open_memmap(home / "vectors.tmp.npy", mode="w+", dtype=np.float32, shape=(n, DIM))
        conn = sqlite3.connect(db_path(home), isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        with bar(n, "writing turn vectors") as b:
            for k in range(0, n, 20_000):
                z = min(n, k + 20_000)
                block = plan.vectors(vecs, k, z)  # a buried LoCoMo turn's row stays zero until it is embedded
                out[k:z] = block
                rows = [(k + j + 1, model, block[j].tobytes()) for j in range(z - k) if k + j not in plan.buried]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT OR REPLACE INTO message_vectors (message_id, model, vector) VALUES (?, ?, ?)",
                                 rows)
                conn.execute("COMMIT")
                b.update(len(rows))
        conn.close()
        out.flush()
        del out
        os.replace(home / "vectors.tmp.npy", home / "vectors.npy")
        np.save(home / "channels.npy", plan.channel_code)
        stage_done(home, "vectors", {"seconds": round(time.perf_counter() - started, 1), "model": model})
    if plan.buried and embedder and "locomo" not in done:
        # the buried conversations' turns are embedded for real, by the layer's own background job (as alone)
        started = time.perf_counter()
        async with entity(home, ["sqlite", "embeddings"]) as memory:
            raw = memory.require_layer("raw_capture")
            seen = [0]

            def tick(d: int, b) -> None:
                b.update(d - seen[0])
                seen[0] = d

            with bar(len(plan.buried), "embedding the buried LoCoMo turns") as b:
                await raw.retriever.drain(lambda d: tick(d, b))
        conn = sqlite3.connect(db_path(home))
        ids = sorted(plan.buried)
        got = dict(conn.execute(f"SELECT message_id, vector FROM message_vectors WHERE model = ? AND message_id IN "
                                f"({','.join(str(i + 1) for i in ids)})", (model,)).fetchall())
        conn.close()
        if len(got) != len(ids):
            raise SystemExit(f"{len(ids) - len(got)} buried LoCoMo turns have no vector after the drain")
        out = np.load(home / "vectors.npy", mmap_mode="r+")
        for i in ids:
            out[i] = np.frombuffer(got[i + 1], dtype=np.float32)
        out.flush()
        del out
        stage_done(home, "locomo", {"seconds": round(time.perf_counter() - started, 1), "turns": len(ids)})
    if "summaries" not in done:
        started = time.perf_counter()
        rng = random.Random(23)
        smodel = f"{OnnxEmbedder.name}|summary"
        async with entity(home, ["sqlite"]) as memory:
            have = (await memory.call("summary_stats", {}))["summary_count"]
            last = n - UNSUMMARIZED
            svecs = []
            with bar(last // PER_SUMMARY + 1, "storing summaries", "summary") as b:
                b.update(have)
                for start in range(1 + have * PER_SUMMARY, last + 1, PER_SUMMARY):
                    end = min(start + PER_SUMMARY - 1, last)
                    own = [i for i in range(start - 1, end) if i not in plan.buried] or [start - 1]
                    picks = sorted(rng.sample(own, min(4, len(own))))
                    sent = [plan.sentences[i][0] for i in picks]
                    people = sorted({plan.author(i) for i in picks})
                    text = f"{' and '.join(people)} talked in {plan.channel(picks[0])}. " + \
                           " ".join(texts[j] for j in sent)
                    s = await memory.call("store_summary", {"summary_text": text, "start_id": start, "end_id": end})
                    v = vecs[sent].sum(axis=0)
                    svecs.append((s["id"], smodel, (v / np.linalg.norm(v)).astype(np.float32).tobytes()))
                    b.update(1)
        conn = sqlite3.connect(db_path(home), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT OR REPLACE INTO summary_vectors (summary_id, model, vector) VALUES (?, ?, ?)", svecs)
        conn.execute("COMMIT")
        conn.close()
        stage_done(home, "summaries", {"seconds": round(time.perf_counter() - started, 1)})
    if "documents" not in done:
        started = time.perf_counter()
        rng = random.Random(29)
        plugins = ["sqlite", "embeddings", "chroma", "crystals"] if embedder else ["sqlite", "crystals"]
        async with entity(home, plugins) as memory:
            photos, crystals = max(1, n // 1000) if embedder else 0, max(1, n // 5000)
            with bar(photos, "word-photos", "photo") as b:
                for k in range(photos):
                    body = " ".join(texts[rng.randrange(len(texts))] for _ in range(rng.randint(4, 10)))
                    await memory.call("anchor_save", {"title": f"photo {k}: {texts[rng.randrange(len(texts))][:40]}",
                                                      "content": body})
                    b.update(1)
            for k in range(crystals):
                body = " ".join(texts[rng.randrange(len(texts))] for _ in range(8))
                await memory.call("crystallize", {"content": f"Crystal {k}: {body}"})
        stage_done(home, "documents", {"seconds": round(time.perf_counter() - started, 1), "word_photos": photos,
                                       "crystals": crystals})
    if embedder and "ann" not in done:
        # the turn vector index (HNSW past [sqlite] ann_threshold): built on the layer's own background thread
        # while a search is served, as in use; timed here, saved at close
        # While it builds, a search and a captured turn every few seconds, timed: the build must block neither.
        started = time.perf_counter()
        search_ms: list[float] = []
        capture_ms: list[float] = []
        loads: list[float] = []
        async with entity(home, ["sqlite", "embeddings"]) as memory:
            dense = memory.require_layer("raw_capture").backend.dense
            await memory.call("raw_search", {"query": "warm up", "limit": 10})
            waiter = asyncio.ensure_future(asyncio.to_thread(dense.wait_ann))
            asked = questions(1000)
            while not waiter.done():
                q = asked[len(search_ms) % len(asked)]
                t = time.perf_counter()
                await memory.call("raw_search", {"query": q, "limit": 10})
                search_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                await memory.call("store_message", {"content": f"while the index builds: {q}", "author_name": "Jeff",
                                                    "channel": "terminal:a"})
                capture_ms.append((time.perf_counter() - t) * 1000)
                loads.append(os.getloadavg()[0])
                await asyncio.wait([waiter], timeout=5)
            await waiter
            await memory.call("raw_search", {"query": "warm up", "limit": 10})
            held = len(dense.ann) if dense.ann is not None else 0
        seconds = time.perf_counter() - started
        # the turns captured meanwhile go again (as measure() does; their vector rows stay, so the saved index,
        # which may end on one of them, still matches the database when it is loaded)
        conn = sqlite3.connect(db_path(home), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM messages WHERE id > ?", (n,))
        conn.execute("COMMIT")
        conn.close()
        stage_done(home, "ann", {"seconds": round(seconds, 1), "vectors": held,
                                 "per_second": round(held / seconds) if held else None,
                                 "dtype": dense.ann_dtype or "default",
                                 "load_average": round(sum(loads) / len(loads), 2) if loads else os.getloadavg()[0],
                                 "meanwhile": {"searches": len(search_ms), "search_p50_ms": round(pct(search_ms, 50), 1),
                                               "search_p95_ms": round(pct(search_ms, 95), 1),
                                               "search_max_ms": round(max(search_ms, default=0), 1),
                                               "capture_p50_ms": round(pct(capture_ms, 50), 1),
                                               "capture_p95_ms": round(pct(capture_ms, 95), 1),
                                               "capture_max_ms": round(max(capture_ms, default=0), 1)}})
        print(f"ann: {held:,} vectors in {seconds:.0f}s; meanwhile {json.dumps(stages(home)['ann']['meanwhile'])}",
              file=sys.stderr)
    if graph and embedder and "graph" not in done:
        from graph import populate_graph

        started = time.perf_counter()
        facts = max(10, n // 100)
        loads: list[float] = []
        sampler = asyncio.get_running_loop().create_task(sample_load(loads))
        try:
            # Resumes: a stopped build left whole batches, which the same seed finds and skips.
            async with entity(home, ["sqlite", "embeddings", "graphiti"]) as memory:
                await populate_graph(memory, max(20, facts // 4), facts, random.Random(31))
        finally:
            sampler.cancel()
        stage_done(home, "graph", {"seconds": round(time.perf_counter() - started, 1), "facts": facts,
                                   "entities": max(20, facts // 4), "writer": "batched",
                                   "load_average": round(sum(loads) / len(loads), 2) if loads else os.getloadavg()[0]})
    return plan, vecs


# -- measuring ---------------------------------------------------------------------------------------


async def timed(fn, items) -> list[float]:
    out = []
    for x in items:
        t0 = time.perf_counter()
        await fn(x)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def timed_sync(fn, items) -> list[float]:
    out = []
    for x in items:
        t0 = time.perf_counter()
        fn(x)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def questions(n: int) -> list[str]:
    qs = [q["question"] for s in locomo_data() for q in s["qa"] if q.get("category") in (1, 2, 3, 4)]
    if not qs:
        qs = [f"what did {p} say about the {t}?" for p in PEOPLE for t in THINGS]
    random.Random(37).shuffle(qs)
    return [qs[i % len(qs)] for i in range(n)]


def baseline_startup(conn: sqlite3.Connection) -> int:
    """The same rows by the least work: the partial index of unsummarized turns (without INDEXED BY, SQLite
    walks the whole table in id order at a million turns), the two newest summaries. Returns the turns read."""
    rows = conn.execute("SELECT * FROM messages INDEXED BY idx_messages_unsummarized WHERE summary_id IS NULL "
                        "ORDER BY id").fetchall()
    conn.execute("SELECT * FROM message_summaries ORDER BY id DESC LIMIT 2").fetchall()
    return len(rows)


def baseline_fts(conn: sqlite3.Connection, q: str) -> None:
    from pps_core.textsearch import STOP_WORDS, tokens

    terms = " OR ".join(f'"{w}"' for w in dict.fromkeys(tokens(q)) if w not in STOP_WORDS)
    if terms:
        conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT 10",
                     (terms,)).fetchall()


def channel_rows(chans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row (turn id - 1) of each turn's previous and next turn of its channel within reach (-1: none), as the
    layer's context vectors count them (``pps_turns.vectors.channel_links``)."""
    from pps_turns.vectors import channel_links

    return channel_links(np.arange(1, len(chans) + 1, dtype=np.int64), np.asarray(chans, dtype=np.int64) + 1)


def context_vector(mat: np.ndarray, links: tuple[np.ndarray, np.ndarray], rows: np.ndarray,
                   context: float) -> np.ndarray:
    """The context vectors of ``rows`` (0-based), normalised."""
    ctx = np.asarray(mat[rows], dtype=np.float32).copy()
    if context:
        for side in links:
            nb = side[rows]
            hit = nb >= 0
            if hit.any():
                ctx[hit] += context * np.asarray(mat[np.sort(nb[hit])], dtype=np.float32)[
                    np.argsort(np.argsort(nb[hit]))]
    return ctx / (np.linalg.norm(ctx, axis=1, keepdims=True) + 1e-12)


def exact_dense(mat: np.ndarray, chans: np.ndarray, qs: np.ndarray, context: float, k: int = 10,
                chunk: int = 100_000) -> tuple[np.ndarray, np.ndarray]:
    """Top-k ids (1-based) and cosines of each query over every turn's context vector, by brute force."""
    n = len(mat)
    links = channel_rows(chans)
    best_s = np.full((len(qs), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(qs), 0), dtype=np.int64)
    for a in range(0, n, chunk):
        z = min(n, a + chunk)
        ctx = context_vector(mat, links, np.arange(a, z), context)
        s = qs @ ctx.T
        ids = np.arange(a, z, dtype=np.int64) + 1
        all_s = np.concatenate([best_s, s], axis=1)
        all_i = np.concatenate([best_i, np.broadcast_to(ids, s.shape)], axis=1)
        top = np.argsort(-all_s, axis=1)[:, :k]
        best_s = np.take_along_axis(all_s, top, axis=1)
        best_i = np.take_along_axis(all_i, top, axis=1)
    return best_i, best_s


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def mib(b: int) -> str:
    return f"{b / 2**20:,.0f} MiB"


async def measure(home: Path, plan: Plan, args) -> None:
    import psutil
    from pps_sqlite import lexical
    from pps_turns import retrieval

    n = plan.n
    db = db_path(home)
    plugins = ["sqlite", "embeddings", "chroma", "crystals"] + (["graphiti"] if "graph" in stages(home) and not args.no_graph else [])
    if args.no_embedder:  # lexical only: no turn vectors searched, no word-photo or graph layer
        plugins = ["sqlite", "crystals"]
    proc = psutil.Process()
    qs = questions(args.runs)
    rows: list[tuple] = []
    t0 = time.perf_counter()
    memory = entity(home, plugins)
    await memory.open()
    open_s = time.perf_counter() - t0
    raw = memory.require_layer("raw_capture")
    t0 = time.perf_counter()
    await memory.call("raw_search", {"query": qs[0], "limit": 10})  # loads the model and the vector index
    first_s = time.perf_counter() - t0
    for q in qs[:5]:
        await memory.call("ambient_recall", {"context": q})
    emb = memory.embedder if not args.no_embedder else None
    # the entity's embedder keeps a question's vector for a moment (the layers of one recall share it): each timed
    # call below starts without it, so every call pays its own embedding as a new question would
    forget_queries = getattr(memory.embedder, "clear", lambda: None)

    def fresh(fn):
        def call(x):
            forget_queries()
            return fn(x)

        return call

    # the startup package and its baseline, one call each in turn: the plain SQL of the same rows, on a read-only
    # connection of its own in this process, while the entity holds exactly the turns the package shows (timed at
    # the end of the run it read the turns the capture below adds too: 6,360 instead of 300 at the defaults)
    ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    startup, base_start, startup_cpu, startup_loop_cpu = [], [], 0.0, 0.0
    for _ in range(args.runs):
        c0, l0 = time.process_time(), time.thread_time()  # every thread of the process; the event loop's alone
        startup += await timed(lambda _x: memory.call("ambient_recall", {"context": "startup"}), range(1))
        startup_cpu += time.process_time() - c0
        startup_loop_cpu += time.thread_time() - l0
        base_start += timed_sync(lambda _x: baseline_startup(ro), range(1))
    base_rows = baseline_startup(ro)
    ro.close()
    search = await timed(fresh(lambda q: memory.call("raw_search", {"query": q, "limit": 10})), qs)
    per_layer: dict[str, list[float]] = {}

    async def recall_once(q: str) -> None:
        out = await memory.call("ambient_recall", {"context": q})
        for st in out["layers"]:
            per_layer.setdefault(st["layer"], []).append(st["latency_ms"])

    recall = await timed(fresh(recall_once), qs)
    names = [st["layer"] for st in (await memory.call("ambient_recall", {"context": qs[0]}))["layers"]]

    async def one_after_another(q: str) -> None:  # the same layers' searches, each awaited before the next
        for name in names:
            await memory.search_layer(name, q, 5)

    serial = await timed(fresh(one_after_another), qs)
    # dense signal alone through the layer (ANN + exact rescoring past the threshold): for recall@10 below
    dense_cfg = retrieval.FusionConfig(use_bm25=False, w_dense=1.0, author_boost=0.0, time_boost=0.0,
                                       neighbour=0.0, episode=0.0)
    dense_ours, qvecs, embed_ms = [], [], []
    if emb is not None:
        qvecs = [np.asarray(v, dtype=np.float32) for v in await asyncio.to_thread(emb.embed, qs)]
        # the store's dense candidates as the retriever asks for them, ranked by their (context) cosine alone:
        # the index and its rescoring, not the fused or calibrated order
        for qv in qvecs:
            ids, cos = await raw.backend.turn_similarities(raw.retriever.model(emb), qv, dense_cfg.candidates,
                                                           dense_cfg.context)
            dense_ours.append([int(ids[j]) for j in np.argsort(-np.asarray(cos), kind="stable")[:10]])
        embed_ms = await timed(fresh(lambda q: asyncio.to_thread(emb.embed, [q])), qs)
    # the dense candidates and their rescoring, same candidates: from the index's memory (the layer's) and from
    # SQLite's float32 rows (issue 19's way), same run
    dense_mem, dense_sql = [], []
    index = raw.backend.dense.ann if hasattr(raw.backend, "dense") else None
    if qvecs and index is not None:
        from pps_sqlite import turnindex

        k = retrieval.DEFAULT.candidates * turnindex.ANN_OVERFETCH
        ctx, model = retrieval.DEFAULT.context, raw.retriever.model(emb)
        db_conn = raw.backend.db.conn
        for qv in qvecs:
            t = time.perf_counter()
            ids, _ = await raw.backend.db.run(index.search, qv, k)
            await raw.backend.db.run(index.rescore, db_conn, ids, qv, ctx)
            dense_mem.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            ids, _ = await raw.backend.db.run(index.search, qv, k)
            await raw.backend.db.run(turnindex.rescore, db_conn, model, ids, qv, ctx)
            dense_sql.append((time.perf_counter() - t) * 1000)

    await memory.call("poll_channels", {"consumer_key": "bench-reader", "channel": "terminal:a"})
    rng = random.Random(41)

    async def budgeted(i: int) -> float:
        await memory.call("store_message", {"content": plan.turn(rng.randrange(n))["content"], "author_name": "Jeff",
                                            "channel": "discord:home"})
        params = {"context": "startup" if i % 2 == 0 else qs[i], "budget": 9000, "consumer_key": "bench-reader",
                  "channel": "terminal:a"}
        forget_queries()
        t = time.perf_counter()
        out = await memory.call("ambient_recall", params)
        ms = (time.perf_counter() - t) * 1000
        assert len(out["text"]) <= 9000
        return ms

    budget = [await budgeted(i) for i in range(args.runs)]
    rss = proc.memory_info().rss
    ann_file = sorted(Path(db.parent).glob(db.name + ".turns*"))
    await memory.close()

    # capture at this size: one writer, the real operation (sqlite alone: vectors come later, in the background),
    # against the same INSERT sent through the layer's writer thread (what the hop from the event loop to that
    # thread and back costs) and the bare INSERT on a connection of its own. The three take turns in rounds, so
    # the machine's load and the WAL's size weigh on each alike (one phase after another, the ratio moved
    # 0.44-1.54 with the load alone).
    texts = [plan.turn(rng.randrange(n))["content"] for _ in range(args.capture)]
    rounds = max(1, min(10, len(texts) // 20))
    spent = {"capture": 0.0, "hop": 0.0, "bare": 0.0}
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # as the layer's own connection

    def bare_insert(c: sqlite3.Connection, text: str) -> None:
        c.execute("BEGIN IMMEDIATE")
        c.execute("INSERT INTO messages (content, author_name, channel, created_at) VALUES (?, 'Lyra', "
                  "'terminal:a', strftime('%Y-%m-%dT%H:%M:%fZ','now'))", (text,))
        c.execute("COMMIT")

    async with entity(home, ["sqlite"]) as cap:
        cdb = cap.require_layer("raw_capture").backend.db
        for r in range(rounds):
            chunk = texts[r::rounds]
            t0 = time.perf_counter()
            for t in chunk:
                await cap.call("store_message", {"content": t, "author_name": "Lyra", "channel": "terminal:a"})
            spent["capture"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            for t in chunk:
                await cdb.run(bare_insert, cdb.conn, t)
            spent["hop"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            for t in chunk:
                bare_insert(conn, t)
            spent["bare"] += time.perf_counter() - t0
    capture, capture_hop, capture_base = (len(texts) / spent[k] for k in ("capture", "hop", "bare"))

    # baselines, same run
    base_fts = timed_sync(lambda q: baseline_fts(conn, q), qs)
    mat = np.load(home / "vectors.npy", mmap_mode="r")
    chans = np.load(home / "channels.npy")
    bf = []
    for qv in qvecs:
        t = time.perf_counter()
        s = np.asarray(mat) @ qv if n <= 300_000 else np.concatenate(
            [mat[a:a + 200_000] @ qv for a in range(0, n, 200_000)])
        np.argpartition(-s, 10)[:10]
        bf.append((time.perf_counter() - t) * 1000)
    # the bounded lexical pass against exhaustive BM25 (the same terms), top 10
    authors = retrieval.author_tokens(lexical.author_names(conn))
    df = lexical.DocFreq()
    lex_overlap = []
    for q in qs:
        terms = retrieval.parse_query(q, authors).terms
        full = lexical.bm25_scores(conn, terms, 10)
        if full:
            got = lexical.bm25_bounded(conn, terms, 200, None, retrieval.DEFAULT.lexical_budget, df)
            top = sorted(got, key=lambda i: (-got[i], i))[:10]
            lex_overlap.append(len(set(full) & set(top)) / len(full))
    exact_ids, exact_s = exact_dense(mat, chans, np.stack(qvecs), retrieval.DEFAULT.context) if qvecs else ([], [])
    links = channel_rows(chans)

    def ctx_score(q: int, i: int) -> float:  # turn id i's exact context cosine for question q
        return float(context_vector(mat, links, np.asarray([i - 1]), retrieval.DEFAULT.context)[0] @ qvecs[q])

    hits, gap = 0, []
    for q, ours_ids in enumerate(dense_ours):
        truth = set(exact_ids[q].tolist())
        mine = [ctx_score(q, i) for i in ours_ids[:10] if 1 <= i <= n]
        # tie-aware: an id outside the exact top 10 that scores at least its 10th counts
        hits += sum(1 for i, sc in zip([i for i in ours_ids[:10] if 1 <= i <= n], mine, strict=True)
                    if i in truth or sc >= exact_s[q, -1] - 1e-5)
        gap.append(float(exact_s[q].mean()) - (sum(mine) / len(mine) if mine else 0.0))
    ann_recall = hits / (10 * len(qs)) if qvecs else None

    # put the cache back as built
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DELETE FROM messages WHERE id > ?", (n,))  # the built turns are ids 1..n
    conn.execute("DELETE FROM read_cursors WHERE consumer_key = 'bench-reader'")
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    counts = conn.execute("SELECT (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM message_summaries), "
                          "(SELECT COUNT(*) FROM messages WHERE summary_id IS NULL)").fetchone()
    try:
        fts = conn.execute("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'messages_fts%'").fetchone()[0]
        vec = conn.execute("SELECT SUM(pgsize) FROM dbstat WHERE name = 'message_vectors'").fetchone()[0]
    except sqlite3.Error:
        fts = vec = None
    conn.close()

    st = stages(home)
    print(f"\nentity: {counts[0]:,} turns ({counts[2]} unsummarized), {counts[1]:,} summaries, "
          f"{st.get('documents', {}).get('word_photos', 0)} word-photos, {st.get('documents', {}).get('crystals', 0)} "
          f"crystals, {st['graph']['facts'] if 'graph' in st else 'no'} graph facts; plugins {plugins}")
    print(f"open {open_s:.2f}s; first search (model + vector index load) {first_s:.2f}s; {args.runs} runs each\n")
    print(f"{'measure':<46}{'p50 ms':>9}{'p95 ms':>9}{'baseline p50':>14}{'ratio':>8}{'target':>13}")

    def line(name, vals, basev, target):
        b = pct(basev, 50) if basev else None
        print(f"{name:<46}{pct(vals, 50):>9.2f}{pct(vals, 95):>9.2f}"
              f"{(f'{b:.2f}' if b is not None else '-'):>14}{(f'{pct(vals, 50) / b:.1f}' if b else '-'):>8}"
              f"{target:>13}")
        rows.append((name, pct(vals, 50), pct(vals, 95), b, target))

    line("startup package (ambient_recall startup)", startup, base_start, "p95 < 10")
    line("fused raw_search (top 10)", search, base_fts, "p95 < 50")
    line("ambient_recall, all layers", recall, serial, "p95 < 100")
    line("ambient_recall, budget 9000 + unread", budget, None, "-")
    print(f"{'  baseline: bare FTS5 MATCH (OR, rank, 10)':<46}{pct(base_fts, 50):>9.2f}{pct(base_fts, 95):>9.2f}")
    if qvecs:
        print(f"{'  baseline: brute-force cosine, all vectors':<46}{pct(bf, 50):>9.2f}{pct(bf, 95):>9.2f}")
        print(f"{'  baseline: query embedding alone':<46}{pct(embed_ms, 50):>9.2f}{pct(embed_ms, 95):>9.2f}")
    print(f"{'  baseline: plain SQL of the startup rows':<46}{pct(base_start, 50):>9.2f}{pct(base_start, 95):>9.2f}"
          f"  ({base_rows} turns, read between the package's calls)")
    print(f"{'  startup package, process CPU per call':<46}{startup_cpu * 1000 / args.runs:>9.2f}"
          f"  (event loop's thread {startup_loop_cpu * 1000 / args.runs:.2f})")
    print(f"{'  baseline: the layers one after another':<46}{pct(serial, 50):>9.2f}{pct(serial, 95):>9.2f}")
    if dense_mem:
        print(f"{'  dense candidates + rescoring, from memory':<46}{pct(dense_mem, 50):>9.2f}{pct(dense_mem, 95):>9.2f}"
              f"{pct(dense_sql, 50):>14.2f}{pct(dense_mem, 50) / pct(dense_sql, 50):>8.2f}  (baseline: SQLite rows)")
    for name, ms in per_layer.items():
        print(f"{'  recall, layer ' + name:<46}{pct(ms, 50):>9.2f}{pct(ms, 95):>9.2f}")
    print(f"{'capture, one writer (turns/s)':<46}{capture:>9.0f}{'':>9}{capture_base:>14.0f}"
          f"{capture / capture_base:>8.2f}{'>= 0.8':>13}")
    print(f"{'  baseline: bare INSERT via the writer thread':<46}{capture_hop:>9.0f}{'':>9}{capture_base:>14.0f}"
          f"{capture_hop / capture_base:>8.2f}")
    if ann_recall is not None:
        print(f"\ndense recall@10 (layer's dense signal vs exact brute force, tie-aware): {ann_recall:.3f} "
              f"(target >= 0.98); mean cosine of its top 10 is {np.mean(gap):.4f} below the exact top 10's "
              f"(exact 1st {float(exact_s[:, 0].mean()):.3f}, 10th {float(exact_s[:, -1].mean()):.3f})")
    else:
        print("\nno embedder loaded (--no-embedder): lexical signals only; no dense recall measured")
    print(f"lexical top-10 overlap, bounded pass (budget {retrieval.DEFAULT.lexical_budget}) vs exhaustive BM25: "
          f"{sum(lex_overlap) / max(1, len(lex_overlap)):.3f} over {len(lex_overlap)} questions")
    print(f"RSS of the serving process: {mib(rss)} (target < 1.5 GiB)")
    print(f"sizes: database {mib(du(db) + du(db.with_name(db.name + '-wal')))}"
          + (f" (FTS {mib(fts)}, turn vectors {mib(vec)})" if fts is not None else "")
          + "".join(f", {p.name} {mib(du(p))}" for p in ann_file)
          + f", word_photos index {mib(du(home / 'home' / 'chroma'))}"
          + (f", graph {mib(du(home / 'home' / 'graphiti'))}" if "graph" in st else ""))
    print(f"build stages (s): {json.dumps({k: v.get('seconds') for k, v in st.items()})}")


async def measure_locomo(home: Path, plan: Plan, args) -> None:
    """Buried LoCoMo: each question of the file asked through ``raw_search`` of the whole history, scored as
    bench/locomo.py scores it (turn-level recall@10 of its evidence); then the same conversations alone, each in
    an entity of its own (bench/locomo.py's run, fused default), as the same-run baseline."""
    from locomo import CATEGORIES, aggregate, load, run_conversation, score

    convs = load(args.locomo)
    plugins = ["sqlite", "embeddings"] + (["chroma", "crystals"] if not args.locomo_raw_only else [])
    rows, lat = [], []
    share = {"own": 0, "other LoCoMo": 0, "synthetic": 0}  # where the top 10 come from
    apart: list = []
    async with entity(home, plugins) as memory:
        await memory.call("raw_search", {"query": "warm up", "limit": 10})  # model and vector index load
        total = sum(1 for c in convs for q in c["questions"] if q["evidence"])
        with bar(total, "buried LoCoMo questions", "question") as b:
            for conv in convs:
                for q in conv["questions"]:
                    if not q["evidence"]:
                        continue
                    t0 = time.perf_counter()
                    found = await memory.call("raw_search", {"query": q["question"], "limit": 10})
                    lat.append((time.perf_counter() - t0) * 1000)
                    ranked = []
                    for r in found["results"]:
                        where = plan.dia.get(int(r["id"]) - 1)
                        ranked.append(where[1] if where and where[0] == conv["id"] else "")
                        share["own" if where and where[0] == conv["id"] else "other LoCoMo" if where
                              else "synthetic"] += 1
                    rows.append((q["category"], score(ranked, q["evidence"])))
                    if args.locomo_apart:  # the same question, the other conversations' turns taken out
                        more = await memory.call("raw_search", {"query": q["question"], "limit": 40})
                        mine = [plan.dia.get(int(r["id"]) - 1) for r in more["results"]]
                        apart.append((q["category"], score([w[1] if w and w[0] == conv["id"] else "" for w in mine
                                                            if not w or w[0] == conv["id"]], q["evidence"])))
                    b.update(1)
    alone_rows, alone_lat = [], []
    for conv in convs:
        r = await run_conversation(conv, ["sqlite", "embeddings"], False, None)
        alone_rows += r["scores"]["PPS fused (default)"]
        alone_lat += r["latency"]
    x, y = aggregate([s for _c, s in rows])["r@10"], aggregate([s for _c, s in alone_rows])["r@10"]
    print(f"\nburied LoCoMo recall@10: {x:.3f} (alone: {y:.3f}, same run); {len(rows)} questions, "
          f"{len(plan.buried):,} LoCoMo turns among {plan.n:,}, pool {args.pool}")
    print(f"  raw_search latency, buried: p50 {pct(lat, 50):.1f} ms, p95 {pct(lat, 95):.1f} ms; alone "
          f"(search_layer): p50 {pct(alone_lat, 50):.1f} ms, p95 {pct(alone_lat, 95):.1f} ms")
    print("  recall@10 by category, buried / alone: " + ", ".join(
        f"{name} {aggregate([s for c, s in rows if c == k])['r@10']:.3f} / "
        f"{aggregate([s for c, s in alone_rows if c == k])['r@10']:.3f}" for k, name in CATEGORIES.items()))
    print("  the buried top 10 came from: " + ", ".join(f"{k} {v / max(1, sum(share.values())):.1%}"
                                                     for k, v in share.items()))
    if apart:
        print(f"  with the other LoCoMo conversations' turns taken out of the ranking (top 40, filtered): "
              f"{aggregate([s for _c, s in apart])['r@10']:.3f}")
    print(f"  MRR buried {aggregate([s for _c, s in rows])['mrr']:.3f}, alone "
          f"{aggregate([s for _c, s in alone_rows])['mrr']:.3f}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--capture", type=int, default=2_000)
    ap.add_argument("--no-graph", action="store_true", help="no graph facts (and no graphiti layer)")
    ap.add_argument("--rebuild", action="store_true", help="drop the cached entity and build it again")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--no-embedder", action="store_true",
                    help="serve without an embedder (lexical only); build no word-photos or graph facts")
    ap.add_argument("--locomo", type=Path, default=LOCOMO,
                    help="LoCoMo-format file whose conversations are buried in the history (default: the public "
                         "file); 'none' buries nothing")
    ap.add_argument("--pool", choices=("synthetic", "with-locomo"), default="synthetic",
                    help="sentences the synthetic turns are made of: templated only (default), or the LoCoMo "
                         "file's own sentences too (issue 19's pool)")
    ap.add_argument("--locomo-only", action="store_true", help="measure only buried LoCoMo (and alone)")
    ap.add_argument("--skip-locomo", action="store_true", help="build it buried, but measure the rest only")
    ap.add_argument("--locomo-apart", action="store_true",
                    help="also score each buried question with the other conversations' turns taken out")
    ap.add_argument("--locomo-raw-only", action="store_true",
                    help="buried LoCoMo with the sqlite and embeddings plugins only (no chroma, crystals)")
    ap.add_argument("--ann-dtype", choices=("f16", "i8"), default=None,
                    help="[sqlite] ann_dtype of the turn vector index (default: the setting's default, or what the "
                         "cached entity was built with)")
    args = ap.parse_args()
    if str(args.locomo).lower() == "none" or args.no_embedder:
        args.locomo = None
    elif not args.locomo.exists():
        ap.error(f"--locomo: no such file: {args.locomo}")
    tag = ("" if args.pool == "synthetic" else "-lpool") + ("" if args.locomo is None else
                                                            f"-buried-{args.locomo.stem}")
    home = CACHE / f"lifetime-{args.turns}{tag}{'-v2' if args.locomo is not None else ''}"
    if args.rebuild and home.exists():
        shutil.rmtree(home)
    global ANN_DTYPE
    built = stages(home).get("ann", {}).get("dtype")
    ANN_DTYPE = args.ann_dtype or (built if built in ("f16", "i8") else None)
    t0 = time.perf_counter()
    plan, _vecs = await build(home, args.turns, not args.no_graph, not args.no_embedder, args.pool, args.locomo)
    print(f"entity ready in {time.perf_counter() - t0:.0f}s at {home}", file=sys.stderr)
    if args.build_only:
        return
    if args.locomo is not None and not args.skip_locomo:
        await measure_locomo(home, plan, args)
    if not args.locomo_only:
        await measure(home, plan, args)


if __name__ == "__main__":
    asyncio.run(main())
