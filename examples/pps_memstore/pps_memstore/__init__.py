"""A turn store in process memory: every method of :class:`pps_turns.TurnStore`, over lists and dicts."""

from __future__ import annotations

import copy
import math
from typing import Any

import pps_turns
from pps_turns.vectors import TurnVectors

from pps_core import Conflict, InvalidParams, NotFound, hookimpl
from pps_core.textsearch import content_terms, tokens
from pps_core.timeutil import now_utc, to_storage

#: The stand-in for a database server: each home's data, as long as the process lives (a second memory on the
#: same home, "another process" in the turn suites, finds it). A store, not plugin state: no memory is its key.
_SERVER: dict[str, dict[str, Any]] = {}


@hookimpl
def pps_entity_plugin(memory):
    return pps_turns.TurnPlugin(memory, lambda memory: MemStore(str(memory.home)))


@hookimpl
def pps_turn_copies(memory):
    return pps_turns.turn_copies("this process's memory")


def _bm25(terms: list[str], docs: dict[int, str], n: int) -> dict[int, float]:
    toks = {i: tokens(t) for i, t in docs.items()}
    avg = sum(map(len, toks.values())) / max(len(toks), 1) or 1.0
    df = {w: sum(w in set(t) for t in toks.values()) for w in terms}
    scores = {}
    for i, t in toks.items():
        s = sum(math.log(1 + (len(toks) - df[w] + 0.5) / (df[w] + 0.5)) * t.count(w) * 2.2
                / (t.count(w) + 1.2 * (0.25 + 0.75 * len(t) / avg)) for w in terms if w in t)
        if s:
            scores[i] = s
    return dict(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:n])


class MemStore:
    exclusive = True  # one process holds the data
    derived_paths: tuple[str, ...] = ()

    def __init__(self, home: str) -> None:
        self.detail = f"memory ({home})"
        self.d = _SERVER.setdefault(home, {"turns": {}, "sums": {}, "cursors": {}, "log": [], "tv": {}, "sv": {},
                                              "tombs": set(), "tokens": {}, "owed": {}})

    async def open(self) -> None: ...
    async def close(self) -> None: ...

    def _turns(self, pred=lambda t: True, newest=False) -> list[dict]:
        return sorted((t for t in self.d["turns"].values() if pred(t)), key=lambda t: (t["created_at"], t["id"]),
                      reverse=newest)

    def _out(self, items) -> list[dict]:
        return [copy.deepcopy({k: v for k, v in t.items() if k != "ingested"}) for t in items]

    async def store(self, batch):
        acks, new, turns = [], [], self.d["turns"]
        for t in batch:
            old = next((o for o in turns.values() if t.get("message_id") and o["message_id"] == t["message_id"]), None)
            if old:
                acks.append({k: old[k] for k in ("id", "message_id", "created_at", "channel")})
                continue
            if any(d in self.d["tombs"] for d in pps_turns.tombstones(t)):
                acks.append(pps_turns.forgotten_ack(t))
                continue
            same = next((o for o in turns.values() if t.get("message_id") and not o["message_id"]
                         and pps_turns.turn_digest(o) == pps_turns.turn_digest(t)), None)
            if same:  # the same turn, stored without an id, back with one (an export's)
                acks.append({k: same[k] for k in ("id", "message_id", "created_at", "channel")})
                continue
            row = {"id": max(turns, default=0) + 1, "message_id": t.get("message_id"), "content": t["content"],
                   "author_name": t["author_name"], "channel": t["channel"], "session_id": t.get("session_id"),
                   "created_at": t["created_at"], "metadata": t.get("metadata") or {}, "summary_id": None,
                   "ingested": False}
            turns[row["id"]] = row
            ack = {k: row[k] for k in ("id", "message_id", "created_at", "channel")}
            inside = [s["id"] for s in self.d["sums"].values()
                      if s["time_span_start"] < row["created_at"] < s["time_span_end"]]
            for i in inside:
                self.d["sums"][i]["rewrite"] = self.d["sums"][i]["rewrite"] or "backfill"
            acks.append({**ack, "inside_summaries": inside} if inside else ack)
            new.append(row)
        return acks, self._out(new)

    async def turns_by_ids(self, ids):
        return self._out(self.d["turns"][i] for i in ids if i in self.d["turns"])

    async def newest(self, limit):
        return self._out(self._turns(newest=True)[:limit][::-1])

    async def counts(self):
        ts = self.d["turns"].values()
        return {"total": len(ts), "unsummarized": sum(t["summary_id"] is None for t in ts),
                "uningested": sum(not t["ingested"] for t in ts), "cursors": len(self.d["cursors"])}

    async def unsummarized_page(self, limit, offset=0, *, oldest_first=False, channel=None):
        found = self._turns(lambda t: t["summary_id"] is None and channel in (None, t["channel"]),
                            newest=not oldest_first)
        page = found[offset:None if limit is None else offset + limit]
        return len(found), self._out(page if oldest_first else page[::-1])

    async def since(self, ts, limit, include_summaries):
        found = self._turns(lambda t: t["created_at"] >= ts)
        sums = sorted((s for s in self.d["sums"].values() if (s["time_span_end"] or "") >= ts),
                      key=lambda s: (s["time_span_start"], s["id"])) if include_summaries else []
        return self._out(found[:limit]), len(found) > limit, copy.deepcopy(sums)

    async def around(self, ts, before, after):
        b = self._turns(lambda t: t["created_at"] < ts, newest=True)
        a = self._turns(lambda t: t["created_at"] >= ts)
        before, after = before + max(0, after - len(a)), after + max(0, before - len(b))
        return self._out(b[:before][::-1]), self._out(a[:after])

    async def context(self, wanted, per_summary):
        count, _ = await self.unsummarized_page(0)
        n_raw, n_sums = pps_turns.context_plan(count, wanted, per_summary)
        raw = (await self.unsummarized_page(n_raw))[1] if n_raw != 0 else []
        return count, (await self.recent_summaries(n_sums))[::-1] if n_sums else [], raw

    async def poll(self, consumer, channel, limit, *, newest_first_preview=False):
        top = max(self.d["turns"], default=0)
        if consumer not in self.d["cursors"]:
            self.d["cursors"][consumer] = top
            return {"consumer_key": consumer, "new_consumer": True, "unread_total": 0, "turns": [], "remaining": 0,
                    "cursor": top}
        last = self.d["cursors"][consumer]
        unread = [t for i, t in sorted(self.d["turns"].items()) if last < i <= top and t["channel"] != channel]
        oldest = None
        if newest_first_preview:
            shown = sorted(unread, key=lambda t: (t["created_at"], t["id"]))[-limit:]
            oldest = min(t["created_at"] for t in unread) if len(unread) > len(shown) else None
            cursor = top
        else:
            shown = unread[:limit]
            cursor = top if len(shown) >= len(unread) else shown[-1]["id"]
        self.d["cursors"][consumer] = cursor
        return {"consumer_key": consumer, "new_consumer": False, "unread_total": len(unread),
                "turns": self._out(sorted(shown, key=lambda t: (t["created_at"], t["id"]))),
                "remaining": 0 if newest_first_preview else len(unread) - len(shown), "cursor": cursor,
                "oldest_unread_at": oldest}

    async def pending_ingestion(self, limit):
        return self._out([t for _i, t in sorted(self.d["turns"].items()) if not t["ingested"]][:limit])

    async def mark_ingested(self, ids):
        todo = [self.d["turns"][i] for i in set(ids) if i in self.d["turns"] and not self.d["turns"][i]["ingested"]]
        for t in todo:
            t["ingested"] = True
        return len(todo)

    async def author_names(self):
        return sorted({t["author_name"] for t in self.d["turns"].values()})

    async def in_range(self, channel, since, until):
        return [t["id"] for t in self._turns(lambda t: since <= t["created_at"] < until and (
            t["channel"] == channel or t["channel"].startswith(channel + ":")))]

    async def forget(self, ids, who, how, owed=()):
        turns, sums = self.d["turns"], self.d["sums"]
        found = sorted(i for i in set(ids) if i in turns)
        owed_id = None
        if found and owed:  # what the copies still owed need, kept until each confirms (settle_forget)
            owed_id = max(self.d["owed"], default=0) + 1
            self.d["owed"][owed_id] = {
                "id": owed_id, "forgotten_at": to_storage(now_utc()), "who": who, "turn_ids": found,
                "message_ids": [turns[i]["message_id"] for i in found if turns[i]["message_id"]],
                "texts": [turns[i]["content"] for i in found], "copies": list(owed)}
        removed = sorted({turns[i]["summary_id"] for i in found} - {None})
        returned = 0
        for i in found:
            t = turns.pop(i)
            self.d["tv"].pop(i, None)
            self.d["tombs"].update(pps_turns.tombstones(t))
        for t in turns.values():  # a summary that quoted a forgotten turn goes; its other turns: the backlog
            if t["summary_id"] in removed:
                t["summary_id"] = None
                returned += 1
        for i in removed:
            sums.pop(i, None)
            self.d["sv"].pop(i, None)
        if found:
            self.d["log"].append({"id": len(self.d["log"]) + 1, "forgotten_at": to_storage(now_utc()), "who": who,
                                  "how": how, "turn_ids": found, "summaries_removed": removed})
        return {"forgotten": found, "not_found": sorted(set(ids) - set(found)), "summaries_removed": removed,
                "returned_to_backlog": returned, "owed": owed_id}

    async def owed_forgets(self, texts=False):
        return [copy.deepcopy({k: v for k, v in o.items() if texts or k != "texts"})
                for _, o in sorted(self.d["owed"].items())]

    async def settle_forget(self, owed_id, confirmed):
        held = self.d["owed"].get(owed_id)
        if held is None:
            return []
        held["copies"] = [c for c in held["copies"] if c not in set(confirmed)]
        if not held["copies"]:
            del self.d["owed"][owed_id]
        return list(held["copies"])

    async def save_forget_token(self, token_digest, query_digest, ids, expires_at, now):
        self.d["tokens"] = {k: v for k, v in self.d["tokens"].items() if v[2] > now}
        self.d["tokens"][token_digest] = (query_digest, list(ids), expires_at)

    async def take_forget_token(self, token_digest, query_digest, now):
        held = self.d["tokens"].get(token_digest)
        if held is None or held[0] != query_digest or held[2] <= now:
            return None
        del self.d["tokens"][token_digest]
        return held[1]

    async def forget_log(self, limit, offset=0):
        return len(self.d["log"]), copy.deepcopy(self.d["log"][::-1][offset:offset + limit])

    async def store_summary(self, text, *, start_id, end_id, message_ids, channels, summary_type, created_at=None):
        turns = self.d["turns"]
        if message_ids:
            missing = sorted(set(message_ids) - set(turns))
            if missing:
                raise NotFound(f"store_summary: message_ids not found: {missing[:10]}", param="message_ids")
            rows = [turns[i] for i in sorted(set(message_ids))]
        else:
            if start_id is None or end_id is None or start_id > end_id:
                raise InvalidParams(f"store_summary: give message_ids, or a range not reversed ({start_id}.."
                                    f"{end_id})", param="start_id")
            rows = [t for i, t in sorted(turns.items()) if start_id <= i <= end_id]
            if not rows:
                raise NotFound(f"store_summary: no turns with ids {start_id}..{end_id}", param="start_id")
        done = [t["id"] for t in rows if t["summary_id"] is not None]
        if done:
            raise Conflict(f"store_summary: turns already summarized: {done[:10]}; nothing was stored",
                           param="start_id")
        times = sorted(t["created_at"] for t in rows)
        s = {"id": max(self.d["sums"], default=0) + 1, "summary_text": text, "start_id": rows[0]["id"],
             "end_id": rows[-1]["id"], "message_count": len(rows),
             "channels": channels or sorted({t["channel"] for t in rows}), "time_span_start": times[0],
             "time_span_end": times[-1], "summary_type": summary_type, "created_at": created_at or to_storage(now_utc()),
             "rewrite": None}
        self.d["sums"][s["id"]] = s
        for t in rows:
            t["summary_id"] = s["id"]
        return copy.deepcopy(s)

    async def recent_summaries(self, limit, offset=0):
        found = sorted(self.d["sums"].values(), key=lambda s: (s["time_span_end"], s["id"]), reverse=True)
        return copy.deepcopy(found[offset:offset + limit])

    async def summaries_by_ids(self, ids):
        return [copy.deepcopy(self.d["sums"][i]) for i in ids if i in self.d["sums"]]

    async def summary_stats(self):
        c = await self.counts()
        un = self._turns(lambda t: t["summary_id"] is None)
        by: dict[str, int] = {}
        for t in un:
            by[t["channel"]] = by.get(t["channel"], 0) + 1
        newest = max(self.d["sums"].values(), key=lambda s: s["id"], default=None)
        return {"total_messages": c["total"], "unsummarized_count": c["unsummarized"],
                "summarized_count": c["total"] - c["unsummarized"], "summary_count": len(self.d["sums"]),
                "oldest_unsummarized_at": un[0]["created_at"] if un else None,
                "newest_summary_at": newest["created_at"] if newest else None,
                "unsummarized_by_channel": dict(sorted(by.items(), key=lambda kv: -kv[1])),
                "needs_rewrite": await self.needs_rewrite()}

    async def summary_count(self):
        return len(self.d["sums"])

    async def needs_rewrite(self):
        return [{"id": i, "reason": s["rewrite"]} for i, s in sorted(self.d["sums"].items()) if s["rewrite"]]

    async def lexical_turns(self, terms, n, channel=None, budget=0):
        return _bm25(terms, {i: t["content"] for i, t in self.d["turns"].items()
                             if channel in (None, t["channel"])}, n)

    async def term_counts(self, terms, cap):
        docs = [set(tokens(t["content"])) for t in self.d["turns"].values()]
        return len(docs), {term: min(cap, sum(term in d for d in docs)) for term in terms}

    async def channel_neighbours(self, ids, reach):
        turns = self.d["turns"]
        return [(i, j) for i in ids if i in turns for j in range(i - reach, i + reach + 1)
                if j != i and j in turns and turns[j]["channel"] == turns[i]["channel"]]

    async def lexical_summaries(self, query, n):
        scores = _bm25(content_terms(query), {i: s["summary_text"] for i, s in self.d["sums"].items()}, n)
        return [{**copy.deepcopy(self.d["sums"][i]), "score": round(v, 6)} for i, v in scores.items()]

    def _missing(self, table, rows, model, limit, after):
        todo = [i for i in sorted(rows) if i > after and self.d[table].get(i, (None,))[0] != model][:limit]
        return todo, max(rows, default=after)

    async def turns_missing_vectors(self, model, limit, after):
        todo, top = self._missing("tv", self.d["turns"], model, limit, after)
        return self._out(self.d["turns"][i] for i in todo), top

    async def write_turn_vectors(self, model, turns, vectors):
        self.d["tv"].update({t["id"]: (model, v) for t, v in zip(turns, vectors, strict=True) if t["id"]
                             in self.d["turns"]})

    async def count_turns_missing_vectors(self, model):
        return len(self._missing("tv", self.d["turns"], model, None, 0)[0])

    async def drop_turn_vectors(self):
        n = len(self.d["tv"])
        self.d["tv"].clear()
        return n

    def _vectors(self, model):
        vectors = TurnVectors(model)  # rebuilt per query: fine for an example, not for a million turns
        ids = sorted(i for i, (m, _v) in self.d["tv"].items() if m == model)
        if ids:
            vectors.add(ids, [self.d["turns"][i]["channel"] for i in ids], [self.d["tv"][i][1] for i in ids])
        return vectors

    async def turn_similarities(self, model, qvec, n, context, channel=None):
        return self._vectors(model).scores(qvec, context)

    async def channel_similarities(self, model, qvec, channels, n, context):
        return self._vectors(model).channel_scores(qvec, channels, n, context)

    async def repair_turn_index(self, model):
        return None

    async def summaries_missing_vectors(self, model, limit, after):
        todo, top = self._missing("sv", self.d["sums"], model, limit, after)
        return [(i, self.d["sums"][i]["summary_text"]) for i in todo], top

    async def write_summary_vectors(self, model, ids, vectors):
        self.d["sv"].update({i: (model, v) for i, v in zip(ids, vectors, strict=True)})

    async def count_summaries_missing_vectors(self, model):
        return len(self._missing("sv", self.d["sums"], model, None, 0)[0])

    async def drop_summary_vectors(self):
        n = len(self.d["sv"])
        self.d["sv"].clear()
        return n

    async def summary_similarities(self, model, qvec, n):
        import numpy as np

        sims = {i: float(np.frombuffer(v, dtype=np.float32) @ qvec) for i, (m, v) in self.d["sv"].items() if m == model}
        return dict(sorted(sims.items(), key=lambda kv: -kv[1])[:n])
