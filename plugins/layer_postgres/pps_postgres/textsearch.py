"""Okapi BM25 over PostgreSQL ``tsvector`` columns (English configuration), candidates from the GIN index.

PostgreSQL's own ``ts_rank``/``ts_rank_cd`` have no inverse document frequency: a common word counts as much as
a rare one, which ranks conversational turns badly. So the candidates come from the GIN index and are scored
here with BM25: idf from each lexeme's document frequency (GIN counts, kept by :class:`CorpusStats` until the
table grows by a tenth), term frequency from the tsvector's positions, length normalisation by the number of
distinct lexemes (a tsvector keeps no token count). Every candidate is scored with every query lexeme it holds.

Two ways to bound the rows scored, for a question with common words over a long history:

- exact (``budget`` 0: summaries, the lexical baseline): candidates are first the rows holding the query's
  rarest lexemes; the rest are scored only when a row without those could still reach the top n (a MaxScore
  bound), so the answer is the same as scoring every row that shares a word, at a fraction of the rows;
- bounded (the fused turn search's ``budget``, as SQLite's pass is): when the lexemes' rows add up to more than
  the budget, the rarest lexemes whose rows fit are scored over all history, the rows holding every lexeme are
  added (the newest of them that fit a quarter of the budget: a row costs more to score here than in FTS5),
  and when even the rarest lexeme is common, the newest rows that fit the budget are scored. Under the budget (every LoCoMo conversation, any entity's first months) the
  answer is the exhaustive one. One statement in either case, after the first time a word is seen.

Differences from SQLite FTS5's bm25: the plugin README.
"""

from __future__ import annotations

import math
import time
from typing import Any

from psycopg import sql

K1 = 1.2
B = 0.75

#: Candidates are first the rows holding the query's rarest lexemes, up to about this many (MaxScore-style
#: pruning: exact whenever the n-th score beats the best a row with only the other lexemes could reach).
CANDIDATE_ROWS = 2000

#: Each term's lexemes and each new lexeme's document frequency, in one statement.
_LEXEMES = """
SELECT q.term, q.lexeme,
       CASE WHEN q.lexeme IS NULL OR q.lexeme = ANY(%(known)s::text[]) THEN NULL
            ELSE (SELECT count(*) FROM {table} d WHERE d.tsv @@ plainto_tsquery('simple'::regconfig, q.lexeme))
       END AS df
FROM (SELECT t.term, u.lexeme FROM unnest(%(terms)s::text[]) AS t(term)
      LEFT JOIN LATERAL unnest(to_tsvector('english'::regconfig, t.term)) AS u ON true) AS q
"""

_SCORE = """
WITH lex AS (
    SELECT l.lexeme, l.idf FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) AS l(lexeme, idf)
), cand AS (
    {cand}
)
SELECT c.id, (
    SELECT SUM(lex.idf * (t.tf * %(k1plus)s) / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * length(c.tsv) / %(avgdl)s)))
    FROM (SELECT u.lexeme, COALESCE(array_length(u.positions, 1), 1)::float8 AS tf
          FROM unnest(ts_filter(setweight(c.tsv, 'A', %(lexemes)s::text[]), '{{a}}')) AS u) AS t
    JOIN lex ON lex.lexeme = t.lexeme
) AS score
FROM cand c
ORDER BY score DESC, c.id LIMIT %(n)s
"""
# (each row's query lexemes are picked out of its tsvector in C, setweight + ts_filter, before the few left are
# unnested: about half the time of unnesting every lexeme of every candidate)

#: Rows holding any of the lexemes %(any)s (after id %(after)s), and rows holding all of %(all)s (after %(after_all)s).
_ANY = """SELECT d.id, d.tsv FROM {table} d
    WHERE d.tsv @@ (SELECT tsquery_or_agg(plainto_tsquery('simple'::regconfig, c)) FROM unnest(%(any)s::text[]) AS c)
    AND d.id > %(after)s {channel}"""
_ANY_OR_ALL = """SELECT d.id, d.tsv FROM {table} d
    WHERE ((d.tsv @@ (SELECT tsquery_or_agg(plainto_tsquery('simple'::regconfig, c)) FROM unnest(%(any)s::text[]) AS c)
            AND d.id > %(after)s)
           OR (d.tsv @@ plainto_tsquery('simple'::regconfig, array_to_string(%(all)s::text[], ' '))
               AND d.id > %(after_all)s)) {channel}"""


class CorpusStats:
    """Per table: rows, mean document length and the newest id for BM25, read at most every ``ttl_s`` (BM25
    barely moves with a few new rows), and each lexeme's document frequency, counted once and kept until the
    table grows (or shrinks) by a tenth. Query words only: no stored text is kept here. A stale count below a
    term's document frequency is raised to it, so idf stays positive."""

    def __init__(self, ttl_s: float = 10.0, size: int = 20_000) -> None:
        self.ttl_s, self.size = ttl_s, size
        self._at: dict[str, tuple[float, float, float, int]] = {}
        self._df: dict[str, dict[str, int]] = {}
        self._epoch: dict[str, int] = {}
        self._lexemes: dict[str, tuple[str, ...]] = {}  # a query word -> its English lexemes

    async def get(self, conn, table: str) -> tuple[float, float]:
        n, avgdl, _top = await self.sizes(conn, table)
        return n, avgdl

    async def sizes(self, conn, table: str) -> tuple[float, float, int]:
        """(rows, mean distinct lexemes per row, the highest id)."""
        now = time.monotonic()
        hit = self._at.get(table)
        if hit is None or now - hit[0] > self.ttl_s:
            # the mean length from the newest rows (it moves slowly; a scan of every row would cost more than a
            # search on a large table); the row count from the triggers' tallies for turns
            count = ("(SELECT coalesce(sum(messages), 0) FROM turn_counts)" if table == "messages"
                     else sql.SQL("(SELECT count(*) FROM {})").format(sql.Identifier(table)))
            row = await (await conn.execute(sql.SQL(
                "SELECT {count}::float8 AS n, (SELECT COALESCE(avg(length(r.tsv)), 1) FROM (SELECT tsv FROM {t} "
                "ORDER BY id DESC LIMIT 5000) r)::float8 AS avgdl, (SELECT COALESCE(max(id), 0) FROM {t}) AS top"
            ).format(count=sql.SQL(count) if isinstance(count, str) else count, t=sql.Identifier(table)))).fetchone()
            hit = self._at[table] = (now, row["n"], row["avgdl"], int(row["top"]))
            epoch = int(math.log(max(row["n"], 1.0), 1.1))
            if self._epoch.get(table) != epoch or len(self._df.get(table, ())) > self.size:
                self._epoch[table] = epoch
                self._df[table] = {}
        return hit[1], hit[2], hit[3]

    async def lexemes(self, conn, table: str, terms: list[str]) -> dict[str, int]:
        """The English lexemes of ``terms`` with the rows of ``table`` holding each: one statement for what is
        not known yet, none when every word has been seen."""
        await self.sizes(conn, table)
        df = self._df.setdefault(table, {})
        if len(self._lexemes) > self.size:
            self._lexemes.clear()
        missing = [t for t in terms if t not in self._lexemes or any(x not in df for x in self._lexemes[t])]
        if missing:
            rows = await (await conn.execute(sql.SQL(_LEXEMES).format(table=sql.Identifier(table)),
                                             {"terms": missing, "known": list(df)})).fetchall()
            got: dict[str, list[str]] = {t: [] for t in missing}
            for r in rows:
                if r["lexeme"] is not None:
                    got[r["term"]].append(r["lexeme"])
                    if r["df"] is not None:
                        df[r["lexeme"]] = int(r["df"])
            self._lexemes.update((t, tuple(x)) for t, x in got.items())
        return {x: df[x] for t in terms for x in self._lexemes[t] if x in df}


async def bm25(conn, table: str, terms: list[str], n: int, channel: str | None = None,
               stats: CorpusStats | None = None, budget: int = 0) -> dict[int, float]:
    """Top ``n`` rows of ``table`` (messages or message_summaries) for an OR of ``terms``: id -> score.
    ``budget``: the rows that may be scored before the pass is bounded (module doc; 0: exact)."""
    if not terms or n <= 0:
        return {}
    stats = stats or CorpusStats(0)
    n_docs, avgdl, top = await stats.sizes(conn, table)
    lex = await stats.lexemes(conn, table, terms)
    if not lex:  # only English stop words ("to be"): the index has none of them, so scan
        return await _stop_words_only(conn, table, terms, n, channel)
    idf = {x: math.log(1 + (max(n_docs, df) - df + 0.5) / (df + 0.5)) for x, df in lex.items()}
    held = sorted((x for x in lex if lex[x]), key=lambda x: (lex[x], x))  # rarest first; a lexeme in no row adds none
    if not held:
        return {}
    channel_sql = sql.SQL("AND d.channel = %(channel)s" if channel else "")
    args: dict[str, Any] = {"lexemes": list(idf), "idf": list(idf.values()), "n": n, "k1": K1, "k1plus": K1 + 1,
                            "b": B, "avgdl": max(avgdl, 1.0), "channel": channel, "after": 0}

    async def score(cand: sql.Composable, **more: Any) -> list[dict[str, Any]]:
        query = sql.SQL(_SCORE).format(cand=cand)
        return await (await conn.execute(query, {**args, **more})).fetchall()

    def any_of() -> sql.Composable:
        return sql.SQL(_ANY).format(table=sql.Identifier(table), channel=channel_sql)

    rows = sum(lex[x] for x in held)
    if budget and rows > budget:
        chosen, used = [], 0
        for x in held:
            if used + lex[x] > budget:
                break
            chosen.append(x)
            used += lex[x]
        more: dict[str, Any] = {"any": chosen}
        if not chosen:  # every lexeme is common: the newest rows that fit the budget
            more = {"any": held, "after": top - max(budget // len(lex), 1)}  # as SQLite: per query word
        cand: sql.Composable = any_of()
        if len(held) > 1:  # and every row holding all the words some row holds, the newest that fit
            together = n_docs * math.prod(lex[x] / max(n_docs, 1.0) for x in held)  # if independent
            quarter = max(budget // 4, 1)
            cand = sql.SQL(_ANY_OR_ALL).format(table=sql.Identifier(table), channel=channel_sql)
            more.update({"all": held, "after_all": 0 if together <= quarter
                         else top - int(quarter * max(n_docs, 1.0) / together)})
        return {r["id"]: float(r["score"]) for r in await score(cand, **more)}
    if budget or rows <= CANDIDATE_ROWS:  # few rows: score them all at once
        return {r["id"]: float(r["score"]) for r in await score(any_of(), any=held)}
    rare, used = [], 0
    for x in held:  # rarest first, at least one
        if rare and used + lex[x] > CANDIDATE_ROWS:
            break
        rare.append(x)
        used += lex[x]
    if used > CANDIDATE_ROWS:  # the rarest word alone is common: pruning by it saves little, score them all
        return {r["id"]: float(r["score"]) for r in await score(any_of(), any=held)}
    found = await score(any_of(), any=rare)
    others = [x for x in held if x not in rare]
    # a row holding none of the rare lexemes scores below this (each term's tf part is < k1 + 1)
    ceiling = sum(idf[x] for x in others) * (K1 + 1)
    if len(found) < n or found[-1]["score"] <= ceiling:
        found = await score(any_of(), any=held)
    return {r["id"]: float(r["score"]) for r in found}


async def term_counts(conn, table: str, terms: list[str], cap: int,
                      stats: CorpusStats | None = None) -> tuple[int, dict[str, int]]:
    """(rows of ``table``, rows holding each term's English lexeme, counted up to ``cap``): the calibrated
    score's idf, from the document frequencies BM25 keeps (no statement once a word has been seen). A term with
    no lexeme (an English stop word) counts as held by every row; one of several lexemes ("e-mail") by the
    rarest's rows."""
    stats = stats or CorpusStats(0)
    n_docs, _avgdl, _top = await stats.sizes(conn, table)
    await stats.lexemes(conn, table, terms)
    out: dict[str, int] = {}
    for t in dict.fromkeys(terms):
        lex = await stats.lexemes(conn, table, [t])
        out[t] = min(min(lex.values()), cap) if lex else cap
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
