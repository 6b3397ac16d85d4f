"""Free-text query handling shared by lexical layers: tokens, stop words, FTS5-safe queries."""

from __future__ import annotations

import math
import re

STOP_WORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below
between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't
she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then
there there's these they they'd they'll they're they've this those through to too under until up very was
wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom
why why's will with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
did does do say said tell told think thought s t d ll re ve m
""".split())

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> list[str]:
    return [t.strip("'").lower() for t in _TOKEN.findall(text) if t.strip("'")]


def content_terms(text: str) -> list[str]:
    """Query terms worth matching: lower-cased, stop words dropped (all kept if only stop words)."""
    toks = tokens(text)
    kept = [t for t in toks if t not in STOP_WORDS]
    out, seen = [], set()
    for t in kept or toks:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def lexical_scores(query: str, docs: dict[str, str]) -> list[float]:
    """BM25-like scores of small in-memory documents (crystals, word-photo fallbacks)."""
    return lexical_scores_tokens(query, [tokens(t) for t in docs.values()])


def lexical_scores_tokens(query: str, toks: list[list[str]]) -> list[float]:
    """:func:`lexical_scores` over documents already split by :func:`tokens` (cache them)."""
    terms = content_terms(query)
    if not terms or not toks:
        return [0.0] * len(toks)
    n = len(toks)
    avg = sum(len(t) for t in toks) / n or 1.0
    df = {term: sum(1 for t in toks if term in set(t)) for term in terms}
    out = []
    for t in toks:
        tf: dict[str, int] = {}
        for w in t:
            tf[w] = tf.get(w, 0) + 1
        score = 0.0
        for term in terms:
            f = tf.get(term, 0)
            if f:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(t) / avg))
        out.append(score)
    return out
