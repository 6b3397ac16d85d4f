"""Ablations of the fused turn search on buried LoCoMo, buried vs alone (issue 26).

    .venv/bin/python bench/buried.py --home CACHE/lifetime-N-buried-locomo5_public [--variants default,neighbour0]
                                     [--modes floor,fused,calib,chan] [--alone] [--alone-cache DIR]
                                     [--chanidf lex,cal]

``--home``: an entity bench/lifetime.py built (``--locomo`` default: the public file buried in it). Each question of
categories 1-4 is asked through the retriever with each variant of the fused config (``variants``) in each mode:
``floor`` (calibrated, the default floor: what raw_search returns), ``calib`` (calibrated, no floor), ``fused``
(the fused order before calibration), ``chan`` (floored, only the conversation's own channel: no foreign turn can
compete), ``chancalib`` (the same without the floor). ``--alone``: the same for each conversation alone in an
entity of its own (kept in ``--alone-cache``).
Prints recall@10, MRR, where the results came from, results per question and p50/p95 latency. Variants ``chan0``
(no second pass: the search before issue 26 part 4), ``chan2``/``chan3``, ``chan50``/``chan200``, ``noscale``: the
second pass's rule (``FusionConfig.channel_*``). ``--chanidf``: word
weights per channel (:class:`ChannelStats`, an experiment: BM25 rescaled by each word's idf over the turn's own
channel, ``lex``; the calibrated coverage per channel, ``cal``; with ``chosen``, ``cal`` only for the channel the
search's second pass chose; ``lexchosen``: BM25 rescaled only for that channel's candidates, in the second pass).
"""
import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo import aggregate, load, score, DEFAULT_FILE  # noqa

from pps_core import Memory  # noqa
from pps_turns import retrieval  # noqa


CHANIDF = ""
CHOSEN: list = []  # the channel the search's second pass chose for the question being asked (``--chanidf chosen``)
CALIBRATE = retrieval.calibrate
LEXICAL: dict[str, list[int]] = {}  # per variant/mode, each question's count of lexical candidates (whole history)


def variants(names):
    d = retrieval.DEFAULT
    r = dataclasses.replace
    allv = {
        "default": d,
        "neighbour0": r(d, neighbour=0.0),
        "episode0": r(d, episode=0.0),
        "context0": r(d, context=0.0),
        "author0": r(d, author_boost=0.0),
        "time0": r(d, time_boost=0.0),
        "nonb_noep": r(d, neighbour=0.0, episode=0.0),
        "nonb_noep_noctx": r(d, neighbour=0.0, episode=0.0, context=0.0),
        "cand400": r(d, candidates=400),
        "cand800": r(d, candidates=800),
        "budget0": r(d, lexical_budget=0),
        "nodense": r(d, use_dense=False),
        "dfloor150": r(d, dense_floor_rank=150),
        "dfloor150_c600": r(d, dense_floor_rank=150, candidates=600),
        "c600": r(d, candidates=600),
        "nobm25": r(d, use_bm25=False),
        # dense candidates drawn per channel (issue 26 part 4): off, and the rule's numbers
        "chan0": r(d, channel_candidates=0),
        "chan2": r(d, channel_count=2),
        "chan3": r(d, channel_count=3),
        "chan50": r(d, channel_candidates=50),
        "chan200": r(d, channel_candidates=200),
        "noscale": r(d, channel_scale=False),
        "noscale2": r(d, channel_scale=False, channel_count=2),
        "chan0_c600": r(d, channel_candidates=0, candidates=600),
    }
    return {n: allv[n] for n in names}


async def ask(raw, q, cfg, mode, chan=None):
    if mode == "chan":
        return await raw.retriever.search(q, 10, cfg=cfg, min_score=retrieval.FLOOR, channel=chan)
    if mode == "chancalib":
        return await raw.retriever.search(q, 10, cfg=cfg, channel=chan)
    if mode == "nofloor_calib":
        return await raw.retriever.search(q, 10, cfg=cfg)
    if mode == "floor":
        return await raw.retriever.search(q, 10, cfg=cfg, min_score=retrieval.FLOOR)
    if mode == "calib":
        return await raw.retriever.search(q, 10, cfg=cfg)
    return await raw.retriever.search(q, 10, cfg=cfg, calibrated=False)


class ChannelStats:
    """``--chanidf``: word weights per channel (an experiment, issue 26). Each query word's document frequency is
    counted per channel (one FTS5 query per word, grouped by channel; cached), and two things use it: a lexical
    candidate's BM25 is scaled by the idf of the words it holds over its own channel against over the whole
    history (FTS5's BM25 stays the base; with one channel the ratio is 1), and the calibrated score's
    ``coverage`` is computed per channel (each candidate scored with its channel's idf)."""

    def __init__(self, db_path, lexical_on=True, calib_on=True):
        import sqlite3

        self.conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)
        self.size = dict(self.conn.execute("SELECT channel, COUNT(*) FROM messages GROUP BY channel"))
        self.total = sum(self.size.values())
        self.chan = dict(self.conn.execute("SELECT id, channel FROM messages"))
        self.df: dict[str, dict[str, int]] = {}
        self.lexical_on, self.calib_on = lexical_on, calib_on
        self.chosen_only = False
        self.lex_chosen = False

    def counts(self, term):
        if term not in self.df:
            self.df[term] = dict(self.conn.execute(
                "SELECT m.channel, COUNT(*) FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
                "WHERE messages_fts MATCH ? GROUP BY m.channel", ('content : "' + term.replace('"', '""') + '"',)))
        return self.df[term]

    def weights(self, terms, channel=None):
        if channel is None:
            return retrieval.Weights.of(terms, self.total, {t: sum(self.counts(t).values()) for t in terms})
        return retrieval.Weights.of(terms, self.size.get(channel, 0), {t: self.counts(t).get(channel, 0) for t in terms})

    def install(self, raw):
        store = raw.retriever.store
        lexical_turns = store.lexical_turns
        calibrate = retrieval.calibrate
        stats = self

        async def lexical(terms, n, channel=None, budget=0):
            scores = await lexical_turns(terms, n, channel, budget)
            if not stats.lexical_on or not scores:
                return scores
            texts = {t["id"]: t["content"] for t in await store.turns_by_ids(list(scores))}
            whole = stats.weights(terms)
            per = {}
            out = {}
            for i, b in scores.items():
                ch = stats.chan.get(i)
                w = per.setdefault(ch, stats.weights(terms, ch))
                m = retrieval.matched_terms(terms, texts.get(i, ""))
                g = sum(whole.idf[t] for t in m)
                out[i] = b * (sum(w.idf[t] for t in m) / g) if g else b
            return out

        def calib(ranked, texts, terms, weights, dense_on, dense=None):
            if not stats.calib_on:
                return calibrate(ranked, texts, terms, weights, dense_on, dense)
            groups = {}
            for r in ranked:
                groups.setdefault(stats.chan.get(r[0]), []).append(r)
            out = []
            for ch, rows in groups.items():
                if stats.chosen_only and ch not in CHOSEN:  # the whole history's weights but for the second pass's
                    out += calibrate(rows, texts, terms, weights, dense_on, dense)
                    continue
                out += calibrate(rows, texts, terms, stats.weights(terms, ch), dense_on, dense)
            out.sort(key=lambda t: (-t[1], -t[2]["fused"], t[0]))
            return out

        store.lexical_turns = lexical
        retrieval.calibrate = calib
        choose = retrieval.channels_to_search

        def chosen(*a, **k):
            CHOSEN[:] = choose(*a, **k)
            return list(CHOSEN)

        retrieval.channels_to_search = chosen
        fuse = retrieval.fuse_meta

        def fuse_chosen(meta, query, lexical, dense, floor, cfg, channel=None, links=None, scales=None):
            # ``lexchosen``: BM25 rescaled per channel only for the chosen channel's candidates, in the second pass
            if stats.lex_chosen and scales is not None and CHOSEN and lexical:
                mine = [i for i in lexical if stats.chan.get(i) in CHOSEN]
                texts = dict(stats.conn.execute(f"SELECT id, content FROM messages WHERE id IN "
                                                f"({','.join(str(int(i)) for i in mine)})")) if mine else {}
                whole = stats.weights(query.terms)
                lexical = dict(lexical)
                for i in mine:
                    w = stats.weights(query.terms, stats.chan[i])
                    m = retrieval.matched_terms(query.terms, texts.get(i, ""))
                    g = sum(whole.idf[t] for t in m)
                    if g:
                        lexical[i] *= sum(w.idf[t] for t in m) / g
            return fuse(meta, query, lexical, dense, floor, cfg, channel, links, scales)

        retrieval.fuse_meta = fuse_chosen


async def run(memory, convs, cfgs, modes, own_channel, chan_of=lambda c: None):
    raw = memory.require_layer("raw_capture")
    if CHANIDF:
        retrieval.calibrate = CALIBRATE
        parts = set(CHANIDF.split(","))
        stats = ChannelStats(raw.retriever.store.db.path, "lex" in parts, "cal" in parts)
        stats.chosen_only = "chosen" in parts
        stats.lex_chosen = "lexchosen" in parts
        stats.install(raw)
    store = raw.retriever.store
    lexical_turns = store.lexical_turns
    lexn: list[int] = []  # the whole-history lexical candidate sets of the question being asked, by size

    async def counted(terms, n, channel=None, budget=0):
        scores = await lexical_turns(terms, n, channel, budget)
        if channel is None:
            lexn.append(len(scores))
        return scores

    store.lexical_turns = counted
    await raw.retriever.search("warm up", 10)
    out = {}
    share = {}
    lat = {}
    for conv in convs:
        for q in conv["questions"]:
            if not q["evidence"]:
                continue
            for name, cfg in cfgs.items():
                for mode in modes:
                    key = f"{name}/{mode}"
                    lexn.clear()
                    t0 = time.perf_counter()
                    got = await ask(raw, q["question"], cfg, mode, chan_of(conv))
                    lat.setdefault(key, []).append((time.perf_counter() - t0) * 1000)
                    # -1: no lexical pass over the whole history (no words to look up, or a channel-only mode)
                    LEXICAL.setdefault(key, []).append(lexn[0] if lexn else -1)
                    ranked = []
                    sh = share.setdefault(key, {"own": 0, "other": 0, "syn": 0})
                    for t in got:
                        ch = t["channel"]
                        mine = own_channel(conv, ch)
                        ranked.append((t.get("metadata") or {}).get("dia_id") if mine else "")
                        sh["own" if mine else "other" if ch.startswith("locomo") else "syn"] += 1
                    out.setdefault(key, []).append((q["category"], score(ranked, q["evidence"])))
    return out, share, lat


def report(tag, out, share, lat):
    for key, rows in out.items():
        a = aggregate([s for _c, s in rows])
        sh = share[key]
        tot = max(1, sum(sh.values()))
        ls = sorted(lat[key])
        print(f"{tag:<7} {key:<28} r@10 {a['r@10']:.3f} mrr {a['mrr']:.3f}  own {sh['own']/tot:.0%} other "
              f"{sh['other']/tot:.0%} syn {sh['syn']/tot:.0%} n/q {tot/len(rows):.1f}  p50 {ls[len(ls)//2]:.0f}ms "
              f"p95 {ls[int(len(ls) * 0.95)]:.0f}ms",
              flush=True)
        n = LEXICAL.get(key, [])
        if n and tag == "buried":
            asked = [k for k in n if k >= 0]
            print(f"{'':<7} {key:<28} lexical candidates: none for {sum(1 for k in asked if k == 0)} of "
                  f"{len(asked)} questions with words (no words: {len(n) - len(asked)}); mean "
                  f"{sum(asked) / max(1, len(asked)):.1f}", flush=True)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True, help="a bench/lifetime.py cache directory with LoCoMo buried in it")
    ap.add_argument("--alone-cache", default=str(Path(tempfile.gettempdir()) / "pps-bench-alone"))
    ap.add_argument("--variants", default="default")
    ap.add_argument("--modes", default="floor")
    ap.add_argument("--alone", action="store_true")
    ap.add_argument("--no-buried", action="store_true")
    ap.add_argument("--convs", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--chanidf", default="", help="word weights per channel: 'lex', 'cal' or 'lex,cal'")
    args = ap.parse_args()
    global CHANIDF
    CHANIDF = args.chanidf
    convs = load(DEFAULT_FILE)[:args.convs]
    cfgs = variants(args.variants.split(","))
    modes = args.modes.split(",")
    results = {}
    if not args.no_buried:
        home = Path(args.home)
        async with Memory.for_entity("lifetime", home=home / "home", plugins=["sqlite", "embeddings"],
                                     graphiti={"focal_entity": "Lyra"}, timezone="UTC") as memory:
            out, share, lat = await run(memory, convs, cfgs, modes, lambda c, ch: ch == f"locomo:{c['id']}",
                                        lambda c: f"locomo:{c['id']}")
            report("buried", out, share, lat)
            results["buried"] = {k: aggregate([s for _c, s in v])["r@10"] for k, v in out.items()}
            results["buried_mrr"] = {k: aggregate([s for _c, s in v])["mrr"] for k, v in out.items()}
            results["buried_lexical"] = dict(LEXICAL)  # per question, in order: its lexical candidate count
            results["buried_scores"] = {k: [s for _c, s in v] for k, v in out.items()}
    if args.alone:
        allout, allshare, alllat = {}, {}, {}
        for conv in convs:
            home = Path(args.alone_cache) / conv["id"]
            fresh = not home.exists()
            home.mkdir(parents=True, exist_ok=True)
            async with Memory.for_entity(f"locomo-{conv['id']}", home=home, plugins=["sqlite", "embeddings"],
                                         timezone="UTC") as memory:
                if fresh:
                    for k in range(0, len(conv["turns"]), 500):
                        await memory.call("store_messages", {"messages": conv["turns"][k:k + 500]})
                    await memory.require_layer("raw_capture").retriever.drain()
                out, share, lat = await run(memory, [conv], cfgs, modes, lambda c, ch: True)
            for k in out:
                allout.setdefault(k, []).extend(out[k])
                s = allshare.setdefault(k, {"own": 0, "other": 0, "syn": 0})
                for kk in s:
                    s[kk] += share[k][kk]
                alllat.setdefault(k, []).extend(lat[k])
        report("alone", allout, allshare, alllat)
        results["alone"] = {k: aggregate([s for _c, s in v])["r@10"] for k, v in allout.items()}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


asyncio.run(main())
