"""Fit the calibrated turn score (pps_turns.retrieval.CALIBRATION) on LoCoMo, and check it on a held-out split.

    .venv/bin/python bench/calibrate.py [FILE] [--dump OUT.json] [--from-dump IN.json]

Each conversation of the file becomes an entity (sqlite + the local embedder, as bench/locomo.py builds it). Its
own questions (categories 1-4) are asked of it, and so are the questions of another conversation of the same
split (foreign: nothing in the entity answers them). The fused search's candidates (top CANDIDATES by the fused
score) are labelled relevant when they are evidence of the question, and logistic models of the calibrated
features are fitted on the TRAIN conversations only: with the vectors (fused), lexical only, and the plain
models for summaries and forget_search. Printed: the coefficients to paste into retrieval.py, and on the
HELD-OUT conversations the log loss and Brier score, a reliability table (predicted vs observed), recall@10
ranked by the fused score and by the calibrated score, and per floor the own-conversation recall@10 kept and
the foreign results that clear it (the standout rule of retrieval.calibrate applied: it needs the dump's
``cosines``, written since issue 23; older dumps apply only the model). The floor printed is the highest whose own
recall@10 on TRAIN stays within TOLERANCE of the unfloored fused ranking.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo  # noqa: E402

TRAIN = ("conv-26", "conv-30", "conv-41")
HELD_OUT = ("conv-42", "conv-43")
CANDIDATES = 100
#: The floor printed is the highest whose own recall@10 on TRAIN stays within this of the fused order's.
TOLERANCE = 0.003
K = 10
MODELS = {"fused": ("fused", "coverage", "rare", "author", "meaning"),
          "lexical": ("fused", "coverage", "rare", "author", "meaning"),
          "plain_dense": ("coverage", "rare", "dense"),
          "plain": ("coverage", "rare")}


def foreign_of(ids: list[str]) -> dict[str, str]:
    """Each conversation's foreign questions come from the next conversation of its own split."""
    out = {}
    for split in (TRAIN, HELD_OUT):
        members = [c for c in split if c in ids]
        for k, c in enumerate(members):
            out[c] = members[(k + 1) % len(members)]
    return out


async def dump(path: Path) -> list[dict]:
    from pps_turns import retrieval

    convs = {c["id"]: c for c in locomo.load(path)}
    foreign = foreign_of(list(convs))
    rows: list[dict] = []
    seen: list[tuple[dict[int, float], float]] = []
    dense_top = retrieval.dense_top

    def keep(*args, **kwargs):
        out = dense_top(*args, **kwargs)
        seen.append(out)
        return out

    retrieval.dense_top = keep  # to record each query's dense candidates; restored below
    try:
        return await _dump(convs, foreign, rows, seen)
    finally:
        retrieval.dense_top = dense_top


async def _dump(convs, foreign, rows, seen) -> list[dict]:
    from pps_turns import retrieval

    from pps_core import Memory

    for cid, conv in convs.items():
        with tempfile.TemporaryDirectory(prefix="pps-calibrate-") as home:
            memory = Memory.for_entity(f"cal-{cid}", home=home, plugins=["sqlite", "embeddings"], timezone="UTC")
            async with memory:
                for k in range(0, len(conv["turns"]), 500):
                    await memory.call("store_messages", {"messages": conv["turns"][k:k + 500]})
                raw = memory.require_layer("raw_capture")
                await raw.retriever.drain()
                lexical_cfg = dataclasses.replace(retrieval.DEFAULT, use_dense=False)
                asked = [("own", q) for q in conv["questions"] if q["evidence"]]
                asked += [("foreign", q) for q in convs[foreign[cid]]["questions"] if q["evidence"]]
                for kind, q in asked:
                    row = {"entity": cid, "kind": kind, "category": q["category"], "evidence": q["evidence"]}
                    for mode, cfg in (("fused", retrieval.DEFAULT), ("lexical", lexical_cfg)):
                        seen.clear()
                        got = await raw.retriever.search(q["question"], CANDIDATES, cfg=cfg)
                        if mode == "fused":  # the query's dense candidates' cosines, best first (features to try)
                            row["cosines"] = [round(c, 4) for c in sorted(seen[-1][0].values(), reverse=True)]
                        row[mode] = [{"dia": (t["metadata"] or {}).get("dia_id"),
                                      "x": {**t["signals"]["features"], "dense": t["signals"]["dense"] or 0.0}}
                                     for t in got]
                    rows.append(row)
        print(f"{cid}: {len(asked)} questions asked", file=sys.stderr)
    return rows


# -- fitting ------------------------------------------------------------------------------------


def design(rows: list[dict], mode: str, feats: tuple[str, ...]):
    import numpy as np

    xs, ys = [], []
    for r in rows:
        ev = set(r["evidence"]) if r["kind"] == "own" else set()
        for c in r[mode]:
            xs.append([float(c["x"].get(f, 0.0)) for f in feats])
            ys.append(1.0 if c["dia"] in ev else 0.0)
    return np.asarray(xs), np.asarray(ys)


def fit(x, y, l2: float = 1e-3, steps: int = 50):
    """Logistic regression by Newton's method (a little L2, not on the bias)."""
    import numpy as np

    a = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(a.shape[1])
    reg = np.full(a.shape[1], l2)
    reg[0] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(a @ w, -30, 30)))
        g = a.T @ (p - y) + reg * w
        h = (a * (p * (1 - p))[:, None]).T @ a + np.diag(reg) + 1e-9 * np.eye(a.shape[1])
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return float(w[0]), [float(v) for v in w[1:]]


def prob(bias: float, weights: list[float], feats: tuple[str, ...], x: dict) -> float:
    z = bias + sum(w * float(x.get(f, 0.0)) for w, f in zip(weights, feats, strict=True))
    return 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))


def losses(rows, mode, feats, bias, weights) -> tuple[float, float, list[tuple[float, float, int]]]:
    ll = br = 0.0
    n = 0
    bins: dict[int, list[float]] = {}
    for r in rows:
        ev = set(r["evidence"]) if r["kind"] == "own" else set()
        for c in r[mode]:
            p = prob(bias, weights, feats, c["x"])
            y = 1.0 if c["dia"] in ev else 0.0
            ll -= math.log(max(1e-12, p if y else 1 - p))
            br += (p - y) ** 2
            n += 1
            b = min(9, int(p * 10)) if p >= 0.1 else (0 if p < 0.02 else -1)
            bins.setdefault(b, []).extend([p, y])
    table = []
    for b in sorted(bins):
        ps, ysum = bins[b][0::2], bins[b][1::2]
        table.append((sum(ps) / len(ps), sum(ysum) / len(ysum), len(ps)))
    return ll / max(n, 1), br / max(n, 1), table


def ranked(r: dict, mode: str, by: str, feats, bias, weights) -> list[tuple[str, float]]:
    """A question's candidates best first, with their probability; ``by`` "fused" keeps the fused order.
    The calibrated order applies retrieval.calibrate's rules: a turn holding no word of the query and not close in
    meaning (cosine under MEANING) never outranks one holding its rarest word; one that stands out by meaning
    (STANDOUT_LEAD, STANDOUT_COSINE; from the dump's cosines) scores at least STANDOUT."""
    from pps_turns import retrieval as rt

    cands = r[mode]
    best = rt.top_two(r.get("cosines") or [])

    def standout(x: dict) -> bool:
        cos = x.get("dense", 0.0)
        return (mode == "fused" and not x.get("coverage") and cos >= rt.STANDOUT_COSINE
                and rt.lead(cos, best) >= rt.STANDOUT_LEAD)

    scored = [(c["dia"], prob(bias, weights, feats, c["x"]), c["x"].get("fused", 0.0)) for c in cands]
    if by == "fused":
        scored.sort(key=lambda t: -t[2])
        return [(d, p) for d, p, _f in scored]
    scored = [(d, max(p, rt.STANDOUT) if standout(c["x"]) else p, f)
              for (d, p, f), c in zip(scored, cands, strict=True)]
    cap = min((p for (_d, p, _f), c in zip(scored, cands, strict=True) if c["x"].get("rare")), default=None)
    if cap is not None:
        scored = [(d, min(p, cap * 0.999) if not c["x"].get("coverage") and not standout(c["x"])
                   and c["x"].get("dense", 0.0) < rt.MEANING else p, f) for (d, p, f), c in zip(scored, cands, strict=True)]
    scored.sort(key=lambda t: (-t[1], -t[2]))
    return [(d, p) for d, p, _f in scored]


def trade_off(rows, mode, feats, bias, weights, floor: float, by: str = "calibrated") -> tuple[float, float]:
    """(own recall@10 of what clears the floor, foreign results per question that clear it)."""
    rec, n_own, foreign, n_for = 0.0, 0, 0, 0
    for r in rows:
        top = [(d, p) for d, p in ranked(r, mode, by, feats, bias, weights)[:K] if p >= floor]
        if r["kind"] == "own":
            ev = set(r["evidence"])
            rec += len(ev & {d for d, _p in top}) / len(ev)
            n_own += 1
        else:
            foreign += len(top)
            n_for += 1
    return rec / max(n_own, 1), foreign / max(n_for, 1)


def report(rows: list[dict]) -> None:
    train = [r for r in rows if r["entity"] in TRAIN]
    held = [r for r in rows if r["entity"] in HELD_OUT]
    print(f"train: {sum(r['kind'] == 'own' for r in train)} own + {sum(r['kind'] == 'foreign' for r in train)} "
          f"foreign questions ({', '.join(TRAIN)}); held out: {sum(r['kind'] == 'own' for r in held)} own + "
          f"{sum(r['kind'] == 'foreign' for r in held)} foreign ({', '.join(HELD_OUT)})\n")
    for name, feats in MODELS.items():
        mode = "lexical" if name in ("lexical", "plain") else "fused"
        x, y = design(train, mode, feats)
        bias, weights = fit(x, y)
        print(f"model {name} (candidates of the {mode} search; {int(y.sum())} relevant of {len(y)}):")
        const = {"fused": "TURN", "lexical": "TURN"}.get(name, name.upper())
        print(f'    "{name}": Calibration({const}_FEATURES, '
              f'({", ".join(f"{w:.3f}" for w in weights)}), {bias:.3f}),')
        for label, part in (("train", train), ("held-out", held)):
            ll, br, table = losses(part, mode, feats, bias, weights)
            base = sum(1 for r in part for c in r[mode] if r["kind"] == "own" and c["dia"] in set(r["evidence"]))
            n = sum(len(r[mode]) for r in part)
            prior = base / max(n, 1)
            ll0 = -(prior * math.log(max(prior, 1e-12)) + (1 - prior) * math.log(max(1 - prior, 1e-12)))
            print(f"  {label}: log loss {ll:.4f} (constant {ll0:.4f}), Brier {br:.4f}; reliability "
                  + ", ".join(f"pred {p:.3f}/obs {o:.3f} (n={k})" for p, o, k in table))
        base_tr, _ = trade_off(train, mode, feats, bias, weights, 0.0, "fused")
        floors = [0.0, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.01, 0.02, 0.05, 0.1]
        best = 0.0
        for f in floors:
            own_tr, _ = trade_off(train, mode, feats, bias, weights, f)
            if own_tr >= base_tr - TOLERANCE:
                best = max(best, f)
        print(f"  floor chosen on train: {best}")
        for label, part in (("train", train), ("held-out", held)):
            own0, for0 = trade_off(part, mode, feats, bias, weights, 0.0, "fused")
            cells = [f"fused order, no floor: r@10 {own0:.3f}, foreign {for0:.2f}/q"]
            for f in floors:
                own, fo = trade_off(part, mode, feats, bias, weights, f)
                cells.append(f"{f:g}: {own:.3f} / {fo:.2f}" + (" *" if f == best else ""))
            print(f"  {label}: " + "; ".join(cells))
        print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=str(locomo.DEFAULT_FILE))
    ap.add_argument("--dump", help="write the candidates and their features here")
    ap.add_argument("--from-dump", help="fit from a dump instead of running the searches")
    args = ap.parse_args()
    if args.from_dump:
        rows = json.loads(Path(args.from_dump).read_text())
    else:
        rows = asyncio.run(dump(Path(args.file)))
        if args.dump:
            Path(args.dump).write_text(json.dumps(rows))
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
