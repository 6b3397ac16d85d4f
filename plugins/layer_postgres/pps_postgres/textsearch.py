"""Okapi BM25 over PostgreSQL ``tsvector`` columns (English configuration), candidates from the GIN index.

PostgreSQL's own ``ts_rank``/``ts_rank_cd`` have no inverse document frequency: a common word counts as much as
a rare one, which ranks conversational turns badly. So the candidates come from the GIN index (an OR of the
query's lexemes) and are scored here with BM25 in one statement: idf from each lexeme's document frequency
(GIN counts), term frequency from the tsvector's positions, length normalisation by the number of distinct
lexemes (a tsvector keeps no token count). Differences from SQLite FTS5's bm25 are in the plugin README.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

K1 = 1.2
B = 0.75

_QUERY = """
WITH q AS (
    SELECT DISTINCT u.lexeme FROM unnest(to_tsvector('english'::regconfig, %(text)s)) AS u
), lex AS (
    SELECT q.lexeme, plainto_tsquery('simple'::regconfig, q.lexeme) AS tq FROM q
), stats AS (
    SELECT %(n_docs)s::float8 AS n, %(avgdl)s::float8 AS avgdl
), df AS MATERIALIZED (  -- once per lexeme (inlined, it would run once per candidate row)
    SELECT lex.lexeme, (SELECT count(*) FROM {table} d WHERE d.tsv @@ lex.tq)::float8 AS df FROM lex
), cand AS (
    SELECT d.id, d.tsv FROM {table} d
    WHERE d.tsv @@ (SELECT tsquery_or_agg(tq) FROM lex) {channel}
)
SELECT c.id, SUM(
    ln(1 + (GREATEST(s.n, df.df) - df.df + 0.5) / (df.df + 0.5))
    * (t.tf * %(k1plus)s) / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * length(c.tsv) / GREATEST(s.avgdl, 1)))
) AS score
FROM cand c CROSS JOIN stats s
CROSS JOIN LATERAL (SELECT u.lexeme, COALESCE(array_length(u.positions, 1), 1)::float8 AS tf
                    FROM unnest(c.tsv) AS u) AS t
JOIN df ON df.lexeme = t.lexeme
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
    query = sql.SQL(_QUERY).format(table=sql.Identifier(table),
                                   channel=sql.SQL("AND d.channel = %(channel)s" if channel else ""))
    args: dict[str, Any] = {"text": " ".join(terms), "n": n, "k1": K1, "k1plus": K1 + 1, "b": B, "channel": channel,
                            "n_docs": max(n_docs, 1.0), "avgdl": avgdl}
    rows = await (await conn.execute(query, args)).fetchall()
    if not rows:
        lexemes = await (await conn.execute("SELECT count(*) AS n FROM unnest(to_tsvector('english'::regconfig, %s))",
                                            (args["text"],))).fetchone()
        if lexemes["n"] == 0:  # only English stop words ("to be"): the index has none of them, so scan
            return await _stop_words_only(conn, table, terms, n, channel)
    return {r["id"]: float(r["score"]) for r in rows}


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
