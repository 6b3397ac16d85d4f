"""Fused turn retrieval: FTS5 BM25 and dense turn vectors, score-normalised and weighted.

Plain RRF of BM25 and a small embedder loses to BM25 alone on conversational recall (LoCoMo),
because rank fusion gives a weak dense list as much say as a strong lexical one. Here each signal
is normalised by its own best candidate and weighted, and a few cheap, general signals are added:
the speaker named in the question, absolute dates in the question resolved against the turns'
timestamps, and the turns around a strong hit. Every weight is in ``FusionConfig``; bench/locomo.py
measures them. Without an embedder the same code ranks by the lexical signals alone.

Functions taking ``conn`` run on the database's worker thread.
"""

from __future__ import annotations

import math
import re
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pps_core.textsearch import STOP_WORDS, tokens
from pps_core.timeutil import to_storage

#: Words that shape a question but rarely appear in the turn that answers it.
QUESTION_WORDS = frozenset("""
kind type sort sorts kinds types many much long ever also recently currently usually often likely would
might something anything things thing someone one ones name names named mention mentioned mentions
share shared shares talk talked talks discuss discussed get got go going went make made
""".split())

MONTHS = {m: i + 1 for i, m in enumerate(
    "january february march april may june july august september october november december".split())}


def _month(name: str) -> int:
    return MONTHS[next(m for m in MONTHS if m.startswith(name.lower()[:3]))]


_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,?\s+(\d{{4}})\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of)\s+((?:19|20)\d\d)\b", re.I)


@dataclass(frozen=True)
class FusionConfig:
    """Weights of the fused score; the defaults are what bench/locomo.py measured best."""

    candidates: int = 200          # from each signal
    w_bm25: float = 0.6
    w_dense: float = 0.4
    dense_floor_rank: int = 50     # dense scores are scaled between this candidate's cosine and the best one's
    context: float = 0.3           # weight of the neighbours' vectors in a turn's context vector
    author_boost: float = 0.2      # added when the turn's author is named in the question
    names_in_bm25: bool = False    # keep author names as lexical terms
    question_words: bool = True    # drop QUESTION_WORDS from the lexical query
    time_boost: float = 0.2        # added when the turn falls in a date window named in the question
    time_slack_days: int = 0       # a window also covers this many days after its end
    neighbour: float = 0.2         # share of the best adjacent turn's score a turn inherits
    neighbour_far: float = 0.5     # the turns two away count this much (of ``neighbour``)
    episode: float = 0.2           # weight of the turn's episode (session_id, else channel and day) score
    use_bm25: bool = True
    use_dense: bool = True
    lexical_budget: int = 8_000    # turns BM25 may rank per query before the bounded pass (0: no bound)


DEFAULT = FusionConfig()


@dataclass
class Query:
    text: str
    terms: list[str]
    names: set[str] = field(default_factory=set)
    windows: list[tuple[str, str]] = field(default_factory=list)  # [start, end) in storage format


def _storage(dt: datetime) -> str:
    return to_storage(dt)


def date_windows(text: str, slack_days: int = 0) -> tuple[list[tuple[str, str]], str]:
    """Absolute dates in ``text`` as [start, end) UTC windows, and the text with them removed."""
    windows: list[tuple[datetime, datetime]] = []
    rest = text

    def cut(m: re.Match) -> str:
        return " " * (m.end() - m.start())

    for rx, kind in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy"), (_MONTH_YEAR, "my"), (_YEAR, "y")):
        for m in list(rx.finditer(rest)):
            try:
                if kind == "dmy":
                    start = datetime(int(m.group(3)), _month(m.group(2)), int(m.group(1)), tzinfo=UTC)
                    end = start + timedelta(days=1)
                elif kind == "mdy":
                    start = datetime(int(m.group(3)), _month(m.group(1)), int(m.group(2)), tzinfo=UTC)
                    end = start + timedelta(days=1)
                elif kind == "my":
                    y, mo = int(m.group(2)), _month(m.group(1))
                    start = datetime(y, mo, 1, tzinfo=UTC)
                    end = datetime(y + (mo == 12), mo % 12 + 1, 1, tzinfo=UTC)
                else:
                    y = int(m.group(1))
                    start, end = datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)
                # a day is widened by one on each side: time zones, and "on May 3" said late on May 2
                if kind in ("dmy", "mdy"):
                    start, end = start - timedelta(days=1), end + timedelta(days=1)
                end += timedelta(days=slack_days)
            except (ValueError, KeyError, OverflowError):  # a date past either end of the calendar
                continue
            windows.append((start, end))
        rest = rx.sub(cut, rest)
    return [(_storage(a), _storage(b)) for a, b in windows], rest


def parse_query(text: str, authors: dict[str, str], cfg: FusionConfig = DEFAULT) -> Query:
    """Lexical terms, authors named, date windows. ``authors`` maps a lower-cased name token to the author."""
    windows, rest = date_windows(text, cfg.time_slack_days) if cfg.time_boost else ([], text)
    toks = tokens(rest)
    names = {authors[t] for t in toks if t in authors}
    names |= {authors[t[:-2]] for t in toks if t.endswith("'s") and t[:-2] in authors}
    drop = STOP_WORDS | (QUESTION_WORDS if cfg.question_words else frozenset())
    terms, seen = [], set()
    for t in toks:
        t = t[:-2] if t.endswith("'s") else t
        if t in drop or t in seen or (not cfg.names_in_bm25 and t in authors):
            continue
        seen.add(t)
        terms.append(t)
    if not terms and not names:
        terms = [t for t in dict.fromkeys(tokens(text)) if t not in STOP_WORDS] or list(dict.fromkeys(toks))
    return Query(text=text, terms=terms[:64], names=names, windows=windows)


def author_tokens(conn: sqlite3.Connection) -> dict[str, str]:
    """Each author's name and its first word, lower-cased, mapped to the author (for names in questions)."""
    out: dict[str, str] = {}
    for (name,) in conn.execute("SELECT name FROM authors"):  # kept by a trigger (schema v3): no scan
        toks = tokens(name)
        for t in {" ".join(toks), toks[0] if toks else ""} - {""}:
            if t not in STOP_WORDS:
                out[t] = name
    return out


def bm25_scores(conn: sqlite3.Connection, terms: list[str], n: int,
                channel: str | None = None, *, mode: str = "OR", after: int = 0) -> dict[int, float]:
    """Top ``n`` turns by BM25 over their content for an OR (or AND) of ``terms`` (higher is better);
    ``after``: only turns with a higher id."""
    if not terms:
        return {}
    match = "content : (" + f" {mode} ".join('"' + t.replace('"', '""') + '"' for t in terms) + ")"
    sql = ("SELECT messages_fts.rowid AS id, bm25(messages_fts, 1.0, 0.0, 0.0) AS rank FROM messages_fts "
           "WHERE messages_fts MATCH ?")
    args: list[Any] = [match]
    if after > 0:
        sql += " AND messages_fts.rowid > ?"
        args.append(after)
    if channel:
        sql = sql.replace("FROM messages_fts", "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid")
        sql += " AND m.channel = ?"
        args.append(channel)
    sql += " ORDER BY rank LIMIT ?"
    args.append(n)
    return {row[0]: -row[1] for row in conn.execute(sql, args)}


def _phrase(t: str) -> str:
    return '"' + t.replace('"', '""') + '"'


class DocFreq:
    """How many rows of an FTS5 table hold each term (in ``column``), counted up to a cap (enough to order terms by
    selectivity) and cached until the table grows by a tenth. A count costs at most ``cap`` postings."""

    def __init__(self, table: str = "messages_fts", column: str = "content", size: int = 20_000) -> None:
        self.table, self.column, self.size = table, column, size
        self._seen: dict[tuple[str, int], int] = {}
        self._epoch = -1

    def __call__(self, conn: sqlite3.Connection, term: str, cap: int, total: int) -> int:
        epoch = int(math.log(max(total, 1), 1.1))
        if epoch != self._epoch or len(self._seen) > self.size:
            self._seen.clear()
            self._epoch = epoch
        key = (term, cap)
        if key not in self._seen:
            self._seen[key] = conn.execute(
                f"SELECT COUNT(*) FROM (SELECT rowid FROM {self.table} WHERE {self.table} MATCH ? LIMIT ?)",
                (f"{self.column} : " + _phrase(term), cap)).fetchone()[0]
        return self._seen[key]


def bounded(conn: sqlite3.Connection, terms: list[str], total: int, budget: int, df: DocFreq, rank,
            top_id: int) -> dict[int, float]:
    """The bounded candidate pass of :func:`bm25_bounded` over any FTS5 table: ``rank(terms, mode, after)``
    returns {rowid: BM25} (higher is better) for an OR/AND of ``terms`` over rows with a rowid above ``after``."""
    if not terms:
        return {}
    if not budget or total <= budget:
        return rank(terms, "OR", 0)
    counts = {t: df(conn, t, budget + 1, total) for t in terms}
    if sum(counts.values()) <= budget:
        return rank(terms, "OR", 0)
    chosen, used = [], 0
    for t in sorted(terms, key=lambda t: counts[t]):
        if used + counts[t] > budget:
            break
        chosen.append(t)
        used += counts[t]
    if chosen:
        out = rank(chosen, "OR", 0)
    else:  # every term is common: the newest rows that fit the budget
        out = rank(terms, "OR", top_id - max(budget // len(terms), 1))
    if len(terms) > 1:
        for i, s in rank(terms, "AND", 0).items():
            out[i] = max(out.get(i, 0.0), s)
    return out


def bm25_bounded(conn: sqlite3.Connection, terms: list[str], n: int, channel: str | None, budget: int,
                 df: DocFreq) -> dict[int, float]:
    """:func:`bm25_scores`, ranking at most about ``budget`` postings however long the history.

    FTS5 scores every turn an OR query matches before it can sort, so a question with a common word ranks a
    large share of history. When the terms' turns add up to more than ``budget``, the pass is bounded: the most
    selective terms whose postings fit the budget are ranked over all history (their BM25 contributions are
    exact), every term together (AND) adds the turns holding all of them with their full score, and when even
    the rarest term is common, the OR of all terms is ranked over the newest slice of history that fits the
    budget. Below the budget (every LoCoMo conversation, any entity's first months) the result is the
    exhaustive one.
    """
    if not terms:
        return {}
    total = conn.execute("SELECT n FROM counters WHERE name = 'messages'").fetchone()[0]
    top = conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0] if total > budget else 0
    return bounded(conn, terms, total, budget, df,
                   lambda ts, mode, after: bm25_scores(conn, ts, n, channel, mode=mode, after=after), top)


def fuse(conn: sqlite3.Connection, query: Query, lexical: dict[int, float], dense: dict[int, float],
         dense_floor: float, cfg: FusionConfig, channel: str | None = None) -> list[tuple[int, float, dict]]:
    """Rank the union of the candidates by the weighted, normalised signals; best first."""
    ids = set(lexical) | set(dense)
    if not ids:
        return []
    return fuse_meta(_meta(conn, ids), query, lexical, dense, dense_floor, cfg, channel)


def fuse_meta(meta: dict[int, tuple[str, str, str, tuple]], query: Query, lexical: dict[int, float],
              dense: dict[int, float], dense_floor: float, cfg: FusionConfig,
              channel: str | None = None) -> list[tuple[int, float, dict]]:
    """:func:`fuse` with each candidate's (author, created_at, channel, episode) given: any store can call it."""
    ids = set(lexical) | set(dense)
    if not ids:
        return []
    top_b = max(lexical.values(), default=0.0) or 1.0
    top_d = max(dense.values(), default=0.0)
    span_d = (top_d - dense_floor) or 1.0
    if channel:
        ids = {i for i in ids if i in meta and meta[i][2] == channel}
    ids = {i for i in ids if i in meta}
    scores: dict[int, float] = {}
    signals: dict[int, dict] = {}
    w_b = cfg.w_bm25 if lexical else 0.0
    w_d = cfg.w_dense if dense else 0.0
    for i in ids:
        b = lexical.get(i, 0.0) / top_b
        d = max(0.0, (dense[i] - dense_floor) / span_d) if i in dense else 0.0
        s = w_b * b + w_d * d
        author, created, _ch, _ep = meta[i]
        if cfg.author_boost and author in query.names:
            s += cfg.author_boost
        if cfg.time_boost and query.windows and any(a <= created < z for a, z in query.windows):
            s += cfg.time_boost
        scores[i] = s
        signals[i] = {"bm25": round(lexical.get(i, 0.0), 4), "dense": round(dense[i], 4) if i in dense else None}
    base = dict(scores)
    if cfg.neighbour:
        for i in ids:
            ch = meta[i][2]
            near = [base[j] * w for j, w in ((i - 1, 1.0), (i + 1, 1.0), (i - 2, cfg.neighbour_far),
                                              (i + 2, cfg.neighbour_far)) if w and j in base and meta[j][2] == ch]
            scores[i] += cfg.neighbour * max(near, default=0.0)
    if cfg.episode:
        per: dict[Any, list[float]] = {}
        for i in ids:
            per.setdefault(meta[i][3], []).append(base[i])
        ep = {k: sum(sorted(v, reverse=True)[:3]) for k, v in per.items()}
        top_ep = max(ep.values(), default=0.0) or 1.0
        for i in ids:
            scores[i] += cfg.episode * ep[meta[i][3]] / top_ep
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(i, s, {**signals[i], "fused": round(s, 4)}) for i, s in ranked]


def _meta(conn: sqlite3.Connection, ids: set[int]) -> dict[int, tuple[str, str, str, tuple]]:
    """author, created_at, channel and episode (session_id, else channel and day) of each id."""
    out = {}
    ordered = sorted(ids)
    for k in range(0, len(ordered), 900):
        chunk = ordered[k:k + 900]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute("SELECT id, author_name, created_at, channel, session_id FROM messages "
                                f"WHERE id IN ({marks})", chunk):
            out[row[0]] = (row[1], row[2], row[3], (row[3], row[4] or row[2][:10]))
    return out


def dense_top(scores, n: int, floor_rank: int) -> tuple[dict[int, float], float]:
    """``scores`` is (ids, cosines) as numpy arrays: the ``n`` best and the cosine at ``floor_rank``."""
    import numpy as np

    ids, cos = scores
    if len(ids) == 0:
        return {}, 0.0
    k = min(n, len(ids))
    top = np.argpartition(-cos, k - 1)[:k]
    top = top[np.argsort(-cos[top])]
    floor = float(cos[top[min(floor_rank, k) - 1]]) if k else 0.0
    return {int(ids[j]): float(cos[j]) for j in top}, floor


def idf_weight(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))
