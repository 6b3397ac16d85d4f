"""Rankers (``pps_rankers``): freshness, diversity and novelty. They work on any layer's results.

Each reorders what it is given and returns all of it (the caller trims to ``limit``): a ranker
that dropped results would starve the ones after it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

from pps_core import SearchResult
from pps_core.timeutil import from_storage, now_utc

DAY_S = 86_400.0


def _ordered(results: list[SearchResult]) -> list[SearchResult]:
    return sorted(results, key=lambda r: -r.score)  # stable: ties keep their order


class Freshness:
    """A true half-life: a fact two weeks old (by ``timestamp``, the fact's valid_at) weighs half.

    A result without a timestamp weighs 0.5, as if it were one half-life old.
    """

    name = "freshness"

    def __init__(self, half_life_days: float = 14.0, missing: float = 0.5) -> None:
        self.half_life_days = half_life_days
        self.missing = missing

    def weight(self, timestamp: str | None, now: datetime | None = None) -> float:
        if not timestamp:
            return self.missing
        try:
            when = from_storage(timestamp)
        except ValueError:
            return self.missing
        days = max(0.0, ((now or now_utc()) - when).total_seconds() / DAY_S)
        return 0.5 ** (days / self.half_life_days)

    def rerank(self, query: str, results: list[SearchResult], limit: int) -> list[SearchResult]:
        now = now_utc()
        out = []
        for r in results:
            w = self.weight(r.timestamp, now)
            out.append(r.model_copy(update={"score": r.score * w, "metadata": {**r.metadata, "freshness": round(w, 4)}}))
        return _ordered(out)


class Diversity:
    """One result per unordered (subject, object) pair first; the rest follow as overflow.

    Five facts about the same two entities would crowd out every other association; overflow
    keeps them available when there is nothing else to show.
    """

    name = "diversity"

    @staticmethod
    def pair(r: SearchResult) -> tuple[str, ...]:
        md = r.metadata
        a = md.get("source_node_uuid") or md.get("subject")
        b = md.get("target_node_uuid") or md.get("object")
        if a is None and b is None:
            return ("source", r.layer, r.source)
        return tuple(sorted((str(a), str(b))))

    def rerank(self, query: str, results: list[SearchResult], limit: int) -> list[SearchResult]:
        seen: set[tuple[str, ...]] = set()
        first, overflow = [], []
        for r in results:
            key = self.pair(r)
            if key in seen:
                overflow.append(r.model_copy(update={"metadata": {**r.metadata, "diversity_overflow": True}}))
            else:
                seen.add(key)
                first.append(r)
        return first + overflow


class Novelty:
    """Facts surfaced again and again sink: a persisted surface count per (layer, source).

    weight = 0.5 ** (count / half_count). The count halves every ``decay_days`` without a
    surfacing, so wallpaper recovers once it stops being shown. One moment (``settle_s``) counts
    once and is not held against the fact until it has passed: reads within a moment (a recall and
    its pagination) rank identically. Counts live in memory and are written behind (at most every
    ``flush_s``, and at close), so a read does not wait on a disk write.
    """

    name = "novelty"

    def __init__(self, path: Path, half_count: float = 5.0, decay_days: float = 7.0, settle_s: float = 60.0,
                 flush_s: float = 5.0, clock=time.time) -> None:
        self.path = path
        self.half_count = half_count
        self.decay_days = decay_days
        self.settle_s = settle_s
        self.flush_s = flush_s
        self.clock = clock
        self._counts: dict[tuple[str, str], tuple[float, float]] | None = None  # -> (count, last epoch s)
        self._dirty: set[tuple[str, str]] = set()
        self._last_flush = time.monotonic()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))  # SQLite gives -wal/-shm the same mode
        if os.stat(self.path).st_mode & 0o777 != 0o600:
            os.chmod(self.path, 0o600)
        conn = sqlite3.connect(self.path, timeout=5)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE IF NOT EXISTS surfaced (layer TEXT NOT NULL, source TEXT NOT NULL, "
                     "count REAL NOT NULL, last_surfaced TEXT NOT NULL, PRIMARY KEY (layer, source))")
        return conn

    def _load(self) -> dict[tuple[str, str], tuple[float, float]]:
        if self._counts is None:
            conn = self._connect()
            try:
                rows = conn.execute("SELECT layer, source, count, last_surfaced FROM surfaced").fetchall()
            finally:
                conn.close()
            self._counts = {(la, s): (c, from_storage(t).timestamp()) for la, s, c, t in rows}
        return self._counts

    def _decayed(self, count: float, last: float, now: float) -> float:
        return count * 0.5 ** (max(0.0, now - last) / DAY_S / self.decay_days)

    def count(self, layer: str, source: str, now: float | None = None) -> float:
        """The count held against a fact now (the current moment's surfacing not included)."""
        now = self.clock() if now is None else now
        c, last = self._load().get((layer, source), (0.0, 0.0))
        if not c:
            return 0.0
        if now - last < self.settle_s:
            c -= 1.0
        return max(0.0, self._decayed(c, last, now))

    def rerank(self, query: str, results: list[SearchResult], limit: int) -> list[SearchResult]:
        now = self.clock()
        out = []
        for r in results:
            w = 0.5 ** (self.count(r.layer, r.source, now) / self.half_count)
            out.append(r.model_copy(update={"score": r.score * w, "metadata": {**r.metadata, "novelty": round(w, 4)}}))
        out = _ordered(out)
        self.record(out[:limit], now)
        return out

    def record(self, shown: list[SearchResult], now: float | None = None) -> None:
        now = self.clock() if now is None else now
        counts = self._load()
        for r in shown:
            key = (r.layer, r.source)
            c, last = counts.get(key, (0.0, 0.0))
            if c and now - last < self.settle_s:
                continue  # this moment is already counted
            counts[key] = (self._decayed(c, last, now) + 1.0, now)
            self._dirty.add(key)
        if time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()

    def start(self) -> None:
        """Start background work when the entity opens: none here (the counts are written behind by :meth:`flush`;
        :class:`~pps_graphiti.novelty_graph.GraphNovelty` starts its writer)."""

    async def stop(self) -> None:
        """Finish background work when the layer closes: none here (closing flushes)."""

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._dirty or self._counts is None:
            return
        rows = []
        for key in self._dirty:
            c, last = self._counts[key]
            stamp = datetime.fromtimestamp(last, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            rows.append((key[0], key[1], c, stamp))
        conn = self._connect()
        try:
            with conn:
                conn.executemany("INSERT INTO surfaced (layer, source, count, last_surfaced) VALUES (?, ?, ?, ?) "
                                 "ON CONFLICT (layer, source) DO UPDATE SET count = excluded.count, "
                                 "last_surfaced = excluded.last_surfaced", rows)
        finally:
            conn.close()
        self._dirty.clear()

    def forget(self, layer: str, source: str) -> None:
        """Drop a deleted fact's count."""
        if self._load().pop((layer, source), None) is not None:
            self._dirty.discard((layer, source))
            conn = self._connect()
            try:
                with conn:
                    conn.execute("DELETE FROM surfaced WHERE layer = ? AND source = ?", (layer, source))
            finally:
                conn.close()
