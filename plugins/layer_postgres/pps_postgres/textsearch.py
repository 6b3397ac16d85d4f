"""Okapi BM25 over PostgreSQL ``tsvector`` columns (English configuration), candidates from the GIN index.

PostgreSQL's own ``ts_rank``/``ts_rank_cd`` have no inverse document frequency: a common word counts as much as
a rare one, which ranks conversational turns badly. So the candidates come from the GIN index and are scored
here with BM25: idf from each lexeme's document frequency (GIN counts), term frequency from the tsvector's
positions, length normalisation by the number of distinct lexemes (a tsvector keeps no token count).
Candidates are first the rows holding the query's rarest lexemes; the rest are scored only when a row
without those could still reach the top n (a MaxScore bound), so the answer is the same as scoring every
row that shares a word, at a fraction of the rows. Differences from SQLite FTS5's bm25: the plugin README.
"""

from __future__ import annotations

import math
from typing import Any

from psycopg import sql

K1 = 1.2
B = 0.75

#: Candidates are first the rows holding the query's rarest lexemes, up to about this many (MaxScore-style
#: pruning: exact whenever the n-th score beats the best a row with only the other lexemes could reach).
CANDIDATE_ROWS = 2000

_LEXEMES = """
SELECT q.lexeme, (SELECT count(*) FROM {table} d WHERE d.tsv @@ plainto_tsquery('simple'::regconfig, q.lexeme))
       AS df
FROM (SELECT DISTINCT u.lexeme FROM unnest(to_tsvector('english'::regconfig, %(text)s)) AS u) AS q
"""

_SCORE = """
WITH lex AS (
    SELECT l.lexeme, l.idf FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) AS l(lexeme, idf)
), cand AS (
    SELECT d.id, d.tsv FROM {table} d
    WHERE d.tsv @@ (SELECT tsquery_or_agg(plainto_tsquery('simple'::regconfig, c))
                    FROM unnest(%(cand)s::text[]) AS c) {channel}
)
SELECT c.id, SUM(
    lex.idf * (t.tf * %(k1plus)s) / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * length(c.tsv) / %(avgdl)s))
) AS score
FROM cand c
CROSS JOIN LATERAL (SELECT u.lexeme, COALESCE(array_length(u.positions, 1), 1)::float8 AS tf
                    FROM unnest(c.tsv) AS u) AS t
JOIN lex ON lex.lexeme = t.lexeme
GROUP BY c.id ORDER BY score DESC, c.id LIMIT %(n)s
"""


class CorpusStats:
    """Rows and mean document length per table, for BM25: read at most every ``ttl_s`` (a full scan each query
    would cost more than the search on a large table; BM25 barely moves with a few new rows). A stale count
    below a term's document frequency is raised to it in the query, so idf stays positive."""

    def __init__(self, ttl_s: float = 10.0) -> None:
        self.ttl_s = ttl_s
        self._at: dict[str, tuple[float, float, float]] = {}

    async def get(self, conn, table: str) -> tuple[float, float]:
        import time

        now = time.monotonic()
        hit = self._at.get(table)
        if hit is None or now - hit[0] > self.ttl_s:
            row = await (await conn.execute(sql.SQL(
                "SELECT count(*)::float8 AS n, COALESCE(avg(length(tsv)), 1)::float8 AS avgdl FROM {}").format(
                sql.Identifier(table)))).fetchone()
            hit = self._at[table] = (now, row["n"], row["avgdl"])
        return hit[1], hit[2]


async def bm25(conn, table: str, terms: list[str], n: int, channel: str | None = None,
               stats: CorpusStats | None = None) -> dict[int, float]:
    """Top ``n`` rows of ``table`` (messages or message_summaries) for an OR of ``terms``: id -> score."""
    if not terms or n <= 0:
        return {}
    n_docs, avgdl = await (stats or CorpusStats(0)).get(conn, table)
    lex = await (await conn.execute(sql.SQL(_LEXEMES).format(table=sql.Identifier(table)),
                                    {"text": " ".join(terms)})).fetchall()
    if not lex:  # only English stop words ("to be"): the index has none of them, so scan
        return await _stop_words_only(conn, table, terms, n, channel)
    idf = {r["lexeme"]: math.log(1 + (max(n_docs, r["df"]) - r["df"] + 0.5) / (r["df"] + 0.5)) for r in lex}
    rare, rows = [], 0
    for r in sorted(lex, key=lambda r: (r["df"], r["lexeme"])):  # rarest first, at least one
        if rare and rows + r["df"] > CANDIDATE_ROWS:
            break
        rare.append(r["lexeme"])
        rows += r["df"]
    query = sql.SQL(_SCORE).format(table=sql.Identifier(table),
                                   channel=sql.SQL("AND d.channel = %(channel)s" if channel else ""))
    args: dict[str, Any] = {"lexemes": list(idf), "idf": list(idf.values()), "n": n, "k1": K1, "k1plus": K1 + 1,
                            "b": B, "avgdl": max(avgdl, 1.0), "channel": channel}

    async def score(candidates: list[str]) -> list[dict[str, Any]]:
        return await (await conn.execute(query, {**args, "cand": candidates})).fetchall()

    if rows > CANDIDATE_ROWS:  # the rarest word alone is common: pruning by it saves little, score them all at once
        return {r["id"]: float(r["score"]) for r in await score(list(idf))}
    found = await score(rare)
    others = [x for x in idf if x not in rare]
    if others:
        # a row holding none of the rare lexemes scores below this (each term's tf part is < k1 + 1)
        ceiling = sum(idf[x] for x in others) * (K1 + 1)
        if len(found) < n or found[-1]["score"] <= ceiling:
            found = await score(list(idf))
    return {r["id"]: float(r["score"]) for r in found}


async def term_counts(conn, table: str, terms: list[str], cap: int,
                      stats: CorpusStats | None = None) -> tuple[int, dict[str, int]]:
    """(rows of ``table``, rows holding each term's English lexeme, counted up to ``cap``): the calibrated
    score's idf. A term with no lexeme (an English stop word) counts as held by every row."""
    n_docs, _avgdl = await (stats or CorpusStats(0)).get(conn, table)
    query = sql.SQL("SELECT count(*) AS n FROM (SELECT 1 FROM {table} d WHERE d.tsv @@ plainto_tsquery("
                    "'english'::regconfig, %(t)s) LIMIT %(cap)s) x").format(table=sql.Identifier(table))
    lexemes = sql.SQL("SELECT count(*) AS n FROM unnest(to_tsvector('english'::regconfig, %(t)s))")
    out: dict[str, int] = {}
    for t in terms:
        if not (await (await conn.execute(lexemes, {"t": t})).fetchone())["n"]:
            out[t] = cap
            continue
        out[t] = int((await (await conn.execute(query, {"t": t, "cap": cap})).fetchone())["n"])
    return int(n_docs), out


async def _stop_words_only(conn, table: str, terms: list[str], n: int, channel: str | None) -> dict[int, float]:
    """A query of stop words alone: ts_rank over the 'simple' configuration, without an index (rare, small)."""
    text = "content" if table == "messages" else "summary_text"
    query = sql.SQL(
        "SELECT id, ts_rank(to_tsvector('simple'::regconfig, {text}), q) AS score FROM {table}, "
        "to_tsquery('simple'::regconfig, %(q)s) AS q WHERE to_tsvector('simple'::regconfig, {text}) @@ q {channel} "
        "ORDER BY score DESC, id LIMIT %(n)s").format(
        text=sql.Identifier(text), table=sql.Identifier(table),
        channel=sql.SQL("AND channel = %(channel)s" if channel else ""))
    words = [w for w in terms if w.replace("_", "").isalnum()]
    if not words:
        return {}
    rows = await (await conn.execute(query, {"q": " | ".join(words), "n": n, "channel": channel})).fetchall()
    return {r["id"]: float(r["score"]) for r in rows}
