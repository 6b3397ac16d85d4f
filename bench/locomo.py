"""LoCoMo retrieval benchmark: does the turn that answers the question come back?

    .venv/bin/python bench/locomo.py [FILE] [--variants] [--no-embedder] [--postgres] [--json OUT]

For each conversation of a LoCoMo-format file (default ../shared/bench/locomo/locomo5_public.json) a fresh
entity in a temp home stores every turn through the real capture operation (store_messages: speaker ->
author_name, session date/time -> created_at, dia_id in metadata), then every question of categories 1-4
is asked through the search path non-startup ambient_recall uses for raw turns
(memory.search_layer("raw_capture", q, 10, min_score=the layer's floor): the calibrated score and its default
floor, issue 29) and scored against its evidence ids. Same run, the search as it was before issue 29 (fused
order, no floor) and the calibrated order without the floor. The floor's trade-off: each conversation's entity
is also asked the questions of the next conversation (nothing in it answers them), and the results per question
are counted: before (all that raw_search returned, and what recall's old filter kept) and after (above the
floor): the filler an entity would have injected. Baselines from the same
run, over the same stored turns: BM25 alone (the store's full-text index over the content, the same
``lexical_turns`` the fused search starts from: FTS5 on SQLite, tsvector on PostgreSQL) and the embedder's dense
search alone. Category 5 (adversarial) is left out. ``--variants`` adds the ablations
of the fused search (one signal off or on at a time). ``--postgres`` also runs every conversation on the
PostgreSQL store (pps-postgres, on a server pgserver starts in a temp dir) and prints its table beside
SQLite's, same run.

Scores: turn-level recall@k = share of a question's evidence turns in the top k (mean over questions);
MRR = 1/rank of the first evidence turn (0 past 10); session-level recall@k = share of the evidence's
sessions that have a turn in the top k.

Evidence per character (issue 40), for the default search: the share of questions with an evidence turn inside
what ``ambient_recall(question, budget=2000)`` and ``budget=4000`` show (the turns in the text, whatever layer
brought them), and the field's session-level numbers: recall_any@k (an evidence session among the sessions of the
top k turns) and recall_all@10 (every evidence session there), over categories 1-4 and with category 5
(adversarial) added.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

_DATA = Path("shared") / "bench" / "locomo" / "locomo5_public.json"


def _default_file() -> Path:
    """``$PPS_LOCOMO_FILE``, else the workplace's shared copy beside (or above) the checkout, wherever it is cloned."""
    if os.environ.get("PPS_LOCOMO_FILE"):
        return Path(os.environ["PPS_LOCOMO_FILE"])
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / _DATA).is_file():
            return parent / _DATA
    return here.parents[2] / _DATA


DEFAULT_FILE = _default_file()
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5
K = 10
BUDGETS = (2000, 4000)

# -- data ---------------------------------------------------------------------------------------


def parse_when(text: str) -> datetime:
    """LoCoMo's session time: '1:56 pm on 8 May, 2023' (naive; stored in the entity's zone, UTC here)."""
    return datetime.strptime(re.sub(r"\s+", " ", text.strip()), "%I:%M %p on %d %B, %Y")


_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def normalise_evidence(evidence) -> list[str]:
    """'D8:6; D9:17' -> D8:6, D9:17; 'D:11:26' -> D11:26; unusable ids ('D') dropped; order kept."""
    out: list[str] = []
    for item in evidence or []:
        for m in _ID.finditer(str(item)):
            e = f"D{int(m.group(1))}:{int(m.group(2))}"
            if e not in out:
                out.append(e)
    return out


def session_of(dia_id: str) -> str:
    return dia_id.split(":")[0]


def load(path: Path, adversarial: bool = False) -> list[dict]:
    """Each conversation's turns and questions of categories 1-4 (and 5, the adversarial ones, with
    ``adversarial``: only the session-level numbers read them)."""
    convs = []
    for sample in json.loads(path.read_text()):
        c = sample["conversation"]
        turns = []
        numbers = sorted(int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k))
        for n in numbers:
            start = parse_when(c[f"session_{n}_date_time"])
            for i, t in enumerate(c[f"session_{n}"]):
                text = t["text"]
                if t.get("blip_caption"):  # what the entity saw: the photo, as the dataset describes it
                    text += f" [shared a photo: {t['blip_caption']}]"
                turns.append({"content": text, "author_name": t["speaker"], "channel": "locomo",
                              "created_at": (start + timedelta(seconds=i)).isoformat(),
                              "message_id": f"{sample.get('sample_id', len(convs))}:{t['dia_id']}",
                              "metadata": {"dia_id": t["dia_id"], "session": n}})
        qs = [{"question": q["question"], "category": q["category"],
               "evidence": normalise_evidence(q.get("evidence"))} for q in sample["qa"]
              if q["category"] in CATEGORIES or adversarial and q["category"] == ADVERSARIAL]
        convs.append({"id": sample.get("sample_id", str(len(convs))), "turns": turns, "questions": qs})
    return convs


# -- scoring ------------------------------------------------------------------------------------


def score(ranked: list[str], evidence: list[str]) -> dict[str, float]:
    """Scores of one question: ``ranked`` dia ids best first, ``evidence`` normalised ids (non-empty)."""
    ev = set(evidence)
    out = {f"r@{k}": len(ev & set(ranked[:k])) / len(ev) for k in (5, 10)}
    first = next((i for i, d in enumerate(ranked[:K]) if d in ev), None)
    out["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    sessions = {session_of(e) for e in ev}
    for k in (5, 10):
        top = {session_of(d) for d in ranked[:k] if d}
        out[f"s@{k}"] = len(sessions & top) / len(sessions)
        out[f"any@{k}"] = float(bool(sessions & top))
        out[f"all@{k}"] = float(sessions <= top)
    return out


def shown_ids(answer: dict) -> list[str]:
    """The dia ids of the turns an ambient_recall answer shows in its text: its results whose content's start is
    in the text (a result the budget left out is not)."""
    out = []
    for r in answer["results"]:
        meta = r.get("metadata") or {}
        dia = (meta.get("metadata") or {}).get("dia_id") if isinstance(meta.get("metadata"), dict) else None
        if dia and dia not in out and r.get("content", "")[:60] in answer["text"]:
            out.append(dia)
    return out


def aggregate(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = ("r@5", "r@10", "mrr", "s@5", "s@10")
    if not rows:
        return {k: 0.0 for k in keys}
    return {k: sum(r[k] for r in rows) / len(rows) for k in keys}


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# -- the run ------------------------------------------------------------------------------------


def variants(retrieval) -> dict[str, object]:
    """Ablations of the default fused config: each changes one thing."""
    d = retrieval.DEFAULT
    r = dataclasses.replace
    return {
        "no dense (lexical signals only)": r(d, use_dense=False),
        "no bm25": r(d, use_bm25=False),
        "no question-word removal": r(d, question_words=False),
        "names in bm25" if not d.names_in_bm25 else "names not in bm25": r(d, names_in_bm25=not d.names_in_bm25),
        "author boost 0" if d.author_boost else "author boost 0.1": r(d, author_boost=0.0 if d.author_boost else 0.1),
        "time boost 0" if d.time_boost else "time boost 0.1": r(d, time_boost=0.0 if d.time_boost else 0.1),
        "context vectors 0" if d.context else "context vectors 0.5": r(d, context=0.0 if d.context else 0.5),
        "neighbour 0" if d.neighbour else "neighbour 0.2": r(d, neighbour=0.0 if d.neighbour else 0.2),
        "neighbours two away 0": r(d, neighbour_far=0.0),
        "episode score 0": r(d, episode=0.0),
        "bm25 0.7 / dense 0.3": r(d, w_bm25=0.7, w_dense=0.3),
        "bm25 0.3 / dense 0.7": r(d, w_bm25=0.3, w_dense=0.7),
        # every conversation is under the default budget; this makes the bounded lexical pass run on all of them
        "lexical budget 50 (bounded pass)": r(d, lexical_budget=50),
    }


def today_keeps(signals: dict) -> bool:
    """What ambient recall kept before issue 29 (RawCaptureLayer.relevant): a turn sharing a word, or one found by
    meaning at cosine 0.35 or more."""
    if signals.get("bm25"):
        return True
    return signals.get("dense") is not None and signals["dense"] >= 0.35


async def run_conversation(conv: dict, plugins: list[str], with_variants: bool, extra: dict | None,
                           settings: dict | None = None, foreign: list[dict] | None = None) -> dict:
    from pps_turns import retrieval

    from pps_core import Memory

    out: dict[str, list] = {}
    lat: list[float] = []
    within: dict[int, list[float]] = {}
    chars: dict[int, list[int]] = {}
    filler = {"before: raw_search returns": [], "before: recall kept (word or cosine >= 0.35)": [],
              "after: above the floor": []}
    with tempfile.TemporaryDirectory(prefix="pps-locomo-") as home:
        memory = Memory.for_entity(f"locomo-{conv['id']}", home=home, plugins=plugins, timezone="UTC",
                                   **(settings or {}))
        async with memory:
            started = time.perf_counter()
            for k in range(0, len(conv["turns"]), 500):
                await memory.call("store_messages", {"messages": conv["turns"][k:k + 500]})
            await memory.require_layer("raw_capture").retriever.drain()  # turn vectors, computed after capture
            store_s = time.perf_counter() - started
            raw = memory.require_layer("raw_capture")
            has_dense = memory.embedder is not None
            configs = {}
            if has_dense:
                configs["dense alone"] = dataclasses.replace(
                    retrieval.DEFAULT, use_bm25=False, w_dense=1.0, context=0.0, author_boost=0.0,
                    time_boost=0.0, neighbour=0.0)
            if with_variants:
                configs.update({n: c for n, c in variants(retrieval).items() if has_dense or c.use_dense is False})
            configs.update(extra or {})
            if conv["questions"]:  # warm up: model load and matrix cache are not query latency
                await memory.search_layer("raw_capture", conv["questions"][0]["question"], K)
            floor = raw.min_recall_score
            for q in conv["questions"]:
                if not q["evidence"]:
                    continue
                if q["category"] == ADVERSARIAL:  # the session-level numbers with category 5: the default search
                    found = await memory.search_layer("raw_capture", q["question"], K, min_score=floor)
                    ranked = [(r.metadata.get("metadata") or {}).get("dia_id") for r in found]
                    out.setdefault("PPS fused (default)", []).append((q["category"], score(ranked, q["evidence"])))
                    continue
                t0 = time.perf_counter()
                found = await memory.search_layer("raw_capture", q["question"], K, min_score=floor)
                lat.append((time.perf_counter() - t0) * 1000)
                ranked = [(r.metadata.get("metadata") or {}).get("dia_id") for r in found]
                out.setdefault("PPS fused (default)", []).append((q["category"], score(ranked, q["evidence"])))
                for budget in BUDGETS:  # evidence per character: what the model is handed
                    answer = await memory.call("ambient_recall", {"context": q["question"], "budget": budget})
                    got = set(shown_ids(answer))
                    within.setdefault(budget, []).append(float(bool(got & set(q["evidence"]))))
                    chars.setdefault(budget, []).append(len(answer["text"]))
                before = await raw.retriever.search(q["question"], K, calibrated=False)  # as before issue 29
                out.setdefault("PPS fused before (no floor)", []).append(
                    (q["category"], score([t["metadata"].get("dia_id") for t in before], q["evidence"])))
                unfloored = await raw.retriever.search(q["question"], K)
                out.setdefault("PPS calibrated, no floor", []).append(
                    (q["category"], score([t["metadata"].get("dia_id") for t in unfloored], q["evidence"])))
                base = await raw.retriever.lexical_baseline(q["question"], K)  # the store's BM25 alone, a baseline
                out.setdefault("BM25 alone", []).append(
                    (q["category"], score([t["metadata"].get("dia_id") for t in base], q["evidence"])))
                for name, cfg in configs.items():
                    got = await raw.retriever.search(q["question"], K, cfg=cfg)
                    out.setdefault(name, []).append(
                        (q["category"], score([t["metadata"].get("dia_id") for t in got], q["evidence"])))
            for q in foreign or []:  # another conversation's questions: nothing here answers them
                before = await raw.retriever.search(q["question"], K, calibrated=False)
                filler["before: raw_search returns"].append(len(before))
                filler["before: recall kept (word or cosine >= 0.35)"].append(
                    sum(1 for t in before if today_keeps(t["signals"])))
                after = await memory.search_layer("raw_capture", q["question"], K, min_score=floor)
                filler["after: above the floor"].append(len(after))
    return {"scores": out, "latency": lat, "within": within, "chars": chars, "store_s": store_s, "turns": len(conv["turns"]), "filler": filler,
            "skipped": sum(1 for q in conv["questions"] if not q["evidence"]), "floor": floor}


def table(results: list[dict]) -> tuple[str, dict]:
    merged: dict[str, list] = {}
    for r in results:
        for name, rows in r["scores"].items():
            merged.setdefault(name, []).extend(rows)
    lat = [x for r in results for x in r["latency"]]
    order = ["BM25 alone", "dense alone", "PPS fused before (no floor)",
             "PPS calibrated, no floor", "PPS fused (default)"]
    names = [n for n in order if n in merged] + [n for n in merged if n not in order]
    lines = [f"{'method':<34} {'r@5':>6} {'r@10':>6} {'MRR':>6} {'s@5':>6} {'s@10':>6}",
             "-" * 70]
    summary = {}
    main = {n: [(c, x) for c, x in rows if c in CATEGORIES] for n, rows in merged.items()}
    every = merged
    merged = main
    for n in names:
        a = aggregate([s for _c, s in merged[n]])
        summary[n] = a
        lines.append(f"{n:<34} {a['r@5']:6.3f} {a['r@10']:6.3f} {a['mrr']:6.3f} {a['s@5']:6.3f} {a['s@10']:6.3f}")
    lines += ["", "turn recall@10 by category (questions):"]
    head = f"{'method':<34}" + "".join(f" {CATEGORIES[c][:11]:>11}" for c in CATEGORIES)
    counts = {c: sum(1 for cat, _s in merged[names[0]] if cat == c) for c in CATEGORIES}
    lines += [head, f"{'(n)':<34}" + "".join(f" {counts[c]:>11}" for c in CATEGORIES)]
    for n in [x for x in order if x in merged]:
        lines.append(f"{n:<34}" + "".join(
            f" {aggregate([s for cat, s in merged[n] if cat == c])['r@10']:11.3f}" for c in CATEGORIES))
    filler: dict[str, list[int]] = {}
    for r in results:
        for name, counts in r.get("filler", {}).items():
            filler.setdefault(name, []).extend(counts)
    n_f = len(next(iter(filler.values()), []))
    if n_f:
        before_r, after_r = (aggregate([s for _c, s in merged[n]])["r@10"]
                             for n in ("PPS fused before (no floor)", "PPS fused (default)"))
        lines += ["", f"the floor (calibrated score >= {results[0].get('floor', 0):g}): own-conversation recall@10 "
                      f"before {before_r:.3f}, after {after_r:.3f} ({after_r - before_r:+.3f}); the same questions "
                      f"asked of another conversation's entity (n={n_f}), results per question:"]
        base = sum(filler["before: raw_search returns"]) / n_f
        for name, counts in filler.items():
            mean = sum(counts) / n_f
            lines.append(f"  {name:<48} {mean:6.2f}   (cut {1 - mean / base:.0%} vs raw_search before; "
                         f"questions with none: {sum(1 for c in counts if not c)})")
        summary["floor"] = {"own_r@10_before": before_r, "own_r@10_after": after_r,
                            **{k: sum(v) / n_f for k, v in filler.items()}}
    default = "PPS fused (default)"
    lines += ["", "session level, PPS fused (default) (questions with an evidence session among the top k turns' "
                  "sessions: recall_any; with every evidence session there: recall_all):"]
    for label, rows in (("categories 1-4", merged[default]), ("categories 1-5", every[default])):
        n = len(rows)
        any5, any10, all10 = (sum(x[key] for _c, x in rows) / (n or 1) for key in ("any@5", "any@10", "all@10"))
        lines.append(f"  {label:<15} (n={n:4}) recall_any@5 {any5:.3f}  recall_any@10 {any10:.3f}  "
                     f"recall_all@10 {all10:.3f}")
        summary[f"session {label}"] = {"recall_any@5": any5, "recall_any@10": any10, "recall_all@10": all10}
    lines += ["", "evidence per character: questions (categories 1-4) with an evidence turn shown in "
                  "ambient_recall(question, budget=B):"]
    for budget in BUDGETS:
        got = [x for r in results for x in r.get("within", {}).get(budget, [])]
        size = [x for r in results for x in r.get("chars", {}).get(budget, [])]
        share = sum(got) / (len(got) or 1)
        lines.append(f"  budget {budget:>5}: {share:.3f} (n={len(got)}; text {sum(size) / (len(size) or 1):.0f} "
                     f"chars on average)")
        summary[f"evidence within {budget}"] = share
    p50, p95 = percentile(lat, 50), percentile(lat, 95)
    lines += ["", f"PPS fused query latency (memory.search_layer, top 10): p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
                  f"n={len(lat)}"]
    summary["latency_ms"] = {"p50": p50, "p95": p95}
    return "\n".join(lines), summary


async def main_async(args) -> int:
    path = Path(args.file)
    convs = load(path, adversarial=True)
    stores = {"sqlite": ({}, None)}
    if args.postgres:
        from pps_postgres.testing import start_postgres

        dsn, cleanup = start_postgres()
        stores["postgres"] = ({"dsn": dsn}, cleanup)
    summaries = {}
    try:
        for store, (section, _cleanup) in stores.items():
            plugins = [store] if args.no_embedder else [store, "embeddings"]
            started = time.perf_counter()
            results = []
            for k, conv in enumerate(convs):
                settings = {"postgres": {**section, "schema": f"locomo_{len(results)}"}} if section else None
                foreign = [q for q in convs[(k + 1) % len(convs)]["questions"]
                           if q["evidence"] and q["category"] in CATEGORIES] \
                    if len(convs) > 1 else []
                r = await run_conversation(conv, plugins, args.variants, None, settings, foreign)
                print(f"{store} {conv['id']}: {r['turns']} turns stored and embedded in {r['store_s']:.1f}s, "
                      f"{len(r['latency'])} questions of categories 1-4 ({r['skipped']} without usable evidence)", file=sys.stderr)
                results.append(r)
            text, summary = table(results)
            summaries[store] = summary
            n_q = sum(len(r["latency"]) for r in results)
            print(f"LoCoMo {path.name}: {len(convs)} conversations, {sum(r['turns'] for r in results)} turns, "
                  f"{n_q} questions (categories 1-4), plugins {plugins}, {time.perf_counter() - started:.0f}s\n")
            print(text + "\n")
    finally:
        for _section, cleanup in stores.values():
            if cleanup is not None:
                cleanup()
    if len(summaries) > 1:
        a, b = (summaries[k]["PPS fused (default)"] for k in ("sqlite", "postgres"))
        print(f"PPS fused recall@10: sqlite {a['r@10']:.3f}, postgres {b['r@10']:.3f} "
              f"(difference {b['r@10'] - a['r@10']:+.3f}); MRR {a['mrr']:.3f} / {b['mrr']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(summaries if len(summaries) > 1 else summaries["sqlite"], indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    ap.add_argument("--variants", action="store_true", help="also run the ablations of the fused search")
    ap.add_argument("--no-embedder", action="store_true", help="load only the sqlite plugin (lexical fallback)")
    ap.add_argument("--postgres", action="store_true",
                    help="also run on the PostgreSQL store (a pgserver started in a temp dir), same run")
    ap.add_argument("--json", help="write the summary numbers here")
    args = ap.parse_args()
    if not Path(args.file).is_file():
        ap.error(f"no LoCoMo file at {args.file}: pass its path, or set PPS_LOCOMO_FILE")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
