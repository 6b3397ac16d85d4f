"""Fused turn retrieval: a store's lexical (BM25) and dense (turn vector) candidates, normalised and weighted.

Plain RRF of BM25 and a small embedder loses to BM25 alone on conversational recall (LoCoMo),
because rank fusion gives a weak dense list as much say as a strong lexical one. Here each signal
is normalised by its own best candidate and weighted, and a few cheap, general signals are added:
the speaker named in the question, absolute dates in the question resolved against the turns'
timestamps, and the turns around a strong hit. Every weight is in ``FusionConfig``; bench/locomo.py
measures them. Without an embedder the same code ranks by the lexical signals alone.

Pure functions over candidates: no store is named here. :class:`pps_turns.retriever.Retriever` asks the store
(:class:`pps_turns.TurnStore`) for the candidates and calls these.
"""

from __future__ import annotations

import re
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


def author_tokens(names) -> dict[str, str]:
    """Each author's name and its first word, lower-cased, mapped to the author (for names in questions)."""
    out: dict[str, str] = {}
    for name in names:
        toks = tokens(name)
        for t in {" ".join(toks), toks[0] if toks else ""} - {""}:
            if t not in STOP_WORDS:
                out[t] = name
    return out


def fuse_meta(meta: dict[int, tuple[str, str, str, tuple]], query: Query, lexical: dict[int, float],
              dense: dict[int, float], dense_floor: float, cfg: FusionConfig,
              channel: str | None = None) -> list[tuple[int, float, dict]]:
    """Rank the union of the candidates by the weighted, normalised signals; best first. ``meta`` gives each
    candidate's (author, created_at, channel, episode); episode is (channel, session_id or the day)."""
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


def dense_top(scores, n: int, floor_rank: int) -> tuple[dict[int, float], float]:
    """``scores`` is (ids, cosines) as numpy arrays: the ``n`` best and the cosine at ``floor_rank``."""
    import numpy as np

    ids, cos = np.asarray(scores[0]), np.asarray(scores[1], dtype=np.float32)
    if len(ids) == 0:
        return {}, 0.0
    k = min(n, len(ids))
    top = np.argpartition(-cos, k - 1)[:k]
    top = top[np.argsort(-cos[top])]
    floor = float(cos[top[min(floor_rank, k) - 1]]) if k else 0.0
    return {int(ids[j]): float(cos[j]) for j in top}, floor
