"""Load on one entity through a real server: writers per channel, readers, a summarizer; then an audit.

Writers send ``store_message`` / ``store_messages`` with client ``message_id`` values, and repeat some
of them on purpose. Every acknowledged id is remembered with the row id the server answered. The
audit (:func:`audit_rows`, on rows the store adapter reads from its own tables: ``pps_sqlite.testing.audit``,
``pps_postgres.testing.audit``) checks every acknowledged turn is present exactly once under the acknowledged
row id, repeats answered like the first call, and summaries cover disjoint, fully marked sets of turns. Needs
``httpx`` (``pps-turns[testing]``).
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import httpx

from pps_core.testing.server import Server

READS = ("ambient_recall", "raw_search", "poll_channels")
WORDS = "lighthouse kettle snow river lantern harbor orchard violin compass ember meadow quartz".split()


@dataclass
class Tally:
    acked: dict[str, int] = field(default_factory=dict)          # message_id -> row id answered
    mismatched_repeats: list[str] = field(default_factory=list)  # a repeat answered with another row id
    unknown: set[str] = field(default_factory=set)                # sent, but no answer (timeout, reset)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    errors: list[str] = field(default_factory=list)
    summaries: int = 0
    summary_conflicts: int = 0
    repeats_sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, op: str, ms: float, status: int) -> None:
        with self.lock:
            self.latencies[op].append(ms)
            self.statuses[status] += 1


def _post(client: httpx.Client, server: Server, entity: str, tally: Tally, op: str, params: dict):
    started = time.perf_counter()
    resp = client.post(f"{server.url}/entities/{entity}/tools/{op}", json=params)
    tally.record(op, (time.perf_counter() - started) * 1000, resp.status_code)
    return resp


def _writer(server: Server, entity: str, channel: str, stop: float, tally: Tally, seed: int) -> None:
    rnd = random.Random(seed)
    sent: list[str] = []
    n = 0
    with httpx.Client(headers=server.headers(entity), timeout=30) as client:
        while time.monotonic() < stop:
            batch = []
            for _ in range(1 if rnd.random() < 0.6 else rnd.randint(2, 8)):
                if sent and rnd.random() < 0.15:
                    mid = rnd.choice(sent)
                    with tally.lock:
                        tally.repeats_sent += 1
                else:
                    n += 1
                    mid = f"{channel}-{n}"
                batch.append({"content": f"{channel} turn {n}: " + " ".join(rnd.choices(WORDS, k=8)),
                              "author_name": rnd.choice(["Jeff", "Lyra"]), "channel": channel, "message_id": mid})
            op, params = ("store_message", batch[0]) if len(batch) == 1 else ("store_messages", {"messages": batch})
            try:
                resp = _post(client, server, entity, tally, op, params)
            except httpx.HTTPError as exc:
                with tally.lock:
                    tally.unknown.update(t["message_id"] for t in batch)
                    tally.errors.append(f"{op}: {type(exc).__name__}")
                continue
            if resp.status_code != 200:
                with tally.lock:
                    tally.unknown.update(t["message_id"] for t in batch)
                    tally.errors.append(f"{op}: HTTP {resp.status_code} {resp.text[:200]}")
                continue
            body = resp.json()
            acks = [body] if op == "store_message" else body["acks"]
            with tally.lock:
                for ack in acks:
                    mid, rid = ack["message_id"], ack["id"]
                    if tally.acked.setdefault(mid, rid) != rid:
                        tally.mismatched_repeats.append(mid)
            sent.extend(t["message_id"] for t in batch)


def _reader(server: Server, entity: str, stop: float, tally: Tally, seed: int) -> None:
    rnd = random.Random(seed)
    with httpx.Client(headers=server.headers(entity), timeout=30) as client:
        while time.monotonic() < stop:
            op = rnd.choice(READS)
            words = " ".join(rnd.choices(WORDS, k=2))
            params = {"ambient_recall": {"context": f"what about the {words}?", "limit_per_layer": 5},
                      "raw_search": {"query": words, "limit": 10},
                      "poll_channels": {"consumer_key": f"reader-{seed}", "channel": f"ch{seed % 3}", "limit": 50}}[op]
            try:
                resp = _post(client, server, entity, tally, op, params)
            except httpx.HTTPError as exc:
                with tally.lock:
                    tally.errors.append(f"{op}: {type(exc).__name__}")
                continue
            if resp.status_code != 200:
                with tally.lock:
                    tally.errors.append(f"{op}: HTTP {resp.status_code} {resp.text[:200]}")


def _summarizer(server: Server, entity: str, stop: float, tally: Tally) -> None:
    with httpx.Client(headers=server.headers(entity), timeout=30) as client:
        while time.monotonic() < stop:
            try:
                batch = _post(client, server, entity, tally, "summarize_messages", {"limit": 25}).json()
                ids = batch.get("message_ids") or []
                if len(ids) < 5:
                    time.sleep(0.05)
                    continue
                resp = _post(client, server, entity, tally, "store_summary",
                             {"summary_text": f"summary of {len(ids)} turns from {ids[0]} to {ids[-1]}",
                              "message_ids": ids})
            except httpx.HTTPError as exc:
                with tally.lock:
                    tally.errors.append(f"summarizer: {type(exc).__name__}")
                time.sleep(0.05)
                continue
            with tally.lock:
                if resp.status_code == 200:
                    tally.summaries += 1
                elif resp.status_code == 409:
                    tally.summary_conflicts += 1
                else:
                    tally.errors.append(f"store_summary: HTTP {resp.status_code} {resp.text[:200]}")


def run_load(server: Server | list[Server], entity: str, *, seconds: float, writers: int = 4, readers: int = 2,
             summarizer: bool = True, seed: int = 8) -> Tally:
    """``server`` may be several servers of one entity (a shared store): writer/reader ``i`` uses server ``i % n``."""
    servers = server if isinstance(server, list) else [server]
    tally = Tally()
    stop = time.monotonic() + seconds
    threads = [threading.Thread(target=_writer, args=(servers[i % len(servers)], entity, f"ch{i}", stop, tally,
                                                      seed * 100 + i)) for i in range(writers)]
    threads += [threading.Thread(target=_reader, args=(servers[i % len(servers)], entity, stop, tally,
                                                       seed * 100 + 50 + i)) for i in range(readers)]
    if summarizer:
        threads.append(threading.Thread(target=_summarizer, args=(servers[-1], entity, stop, tally)))
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tally.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return tally


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def audit_rows(rows: list, summaries: list, tally: Tally) -> dict:
    """Check the store's rows against the tally: (id, message_id, summary_id) and (id, start_id, end_id, count)."""
    problems: list[str] = []
    by_mid: dict[str, list[int]] = defaultdict(list)
    for rid, mid, _sid in rows:
        by_mid[mid].append(rid)
    for mid, rid in tally.acked.items():
        if by_mid.get(mid) != [rid]:
            problems.append(f"acknowledged {mid} (id {rid}) stored as {by_mid.get(mid)}")
    extra = set(by_mid) - set(tally.acked) - tally.unknown
    if extra:
        problems.append(f"{len(extra)} stored turns were never sent or acknowledged: {sorted(extra)[:5]}")
    if tally.mismatched_repeats:
        problems.append(f"repeats answered with another row: {tally.mismatched_repeats[:5]}")
    marked: dict[int, list[int]] = defaultdict(list)
    for rid, _mid, sid in rows:
        if sid is not None:
            marked[sid].append(rid)
    known = {s[0] for s in summaries}
    if set(marked) - known:
        problems.append(f"turns marked with missing summaries: {sorted(set(marked) - known)[:5]}")
    # Each turn carries one summary_id, so no turn is in two summaries. Id ranges may interleave: summaries are
    # made oldest-first by time (created_at, id), and concurrent captures can commit out of time order.
    for sid, start, end, count in summaries:
        ids = sorted(marked.get(sid, []))
        if len(ids) != count or (ids and (ids[0] != start or ids[-1] != end)):
            problems.append(f"summary {sid} says {count} turns {start}..{end}, marks {len(ids)}")
    return {"turns": len(rows), "acknowledged": len(tally.acked), "summaries": len(summaries),
            "summarized_turns": sum(len(v) for v in marked.values()), "problems": problems}


def report(tally: Tally, audit_result: dict) -> dict:
    writes = tally.latencies.get("store_message", []) + tally.latencies.get("store_messages", [])
    reads = [ms for op in READS for ms in tally.latencies.get(op, [])]
    every = [ms for values in tally.latencies.values() for ms in values]
    elapsed = getattr(tally, "elapsed", 1.0)
    return {
        "seconds": round(elapsed, 1), "turns_acked": len(tally.acked), "turns_per_s": round(len(tally.acked) / elapsed, 1),
        "requests": len(every), "requests_per_s": round(len(every) / elapsed, 1), "repeats_sent": tally.repeats_sent,
        "p50_ms": round(percentile(every, 50), 1), "p95_ms": round(percentile(every, 95), 1),
        "write_p95_ms": round(percentile(writes, 95), 1), "read_p95_ms": round(percentile(reads, 95), 1),
        "per_op_p95_ms": {op: round(percentile(v, 95), 1) for op, v in sorted(tally.latencies.items())},
        "statuses": dict(tally.statuses), "summaries": tally.summaries, "summary_conflicts": tally.summary_conflicts,
        "errors": tally.errors[:10], "audit": audit_result,
    }
