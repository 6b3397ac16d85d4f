"""Chunk the narrative, then merge similar adjacent chunks (by embeddings, or lexically without them).

Token counts are an estimate: ``ceil(characters / 4)``, the usual rule of thumb for English text
under BPE tokenizers. Budgets are therefore approximate by design; no tokenizer is loaded.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from datetime import datetime

from .logs import Turn

CHARS_PER_TOKEN = 4
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_'.-]*[A-Za-z0-9_]|[A-Za-z0-9]")
STOPWORDS = frozenset(
    "the a an and or but if then than that this these those is are was were be been being to of in on at by "
    "for with from as it its into about over so not no yes do does did done have has had i you we they he she "
    "me my our your their them us what which who whom how when where why can could would should will shall "
    "may might must just also there here all any some more most other such only own same too very let lets "
    "i'm it's i'll we'll you're don't ok okay".split())


def tokens(text: str) -> int:
    """Estimated tokens of ``text`` (see the module docstring)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def words(text: str) -> list[str]:
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOPWORDS and len(w) > 2]


@dataclasses.dataclass
class Chunk:
    turns: list[Turn]

    @property
    def text(self) -> str:
        return "\n".join(f"{t.role}: {t.text}" for t in self.turns)

    @property
    def tokens(self) -> int:
        return sum(tokens(t.text) + 2 for t in self.turns)

    @property
    def start(self) -> datetime | None:
        return next((t.ts for t in self.turns if t.ts), None)

    @property
    def end(self) -> datetime | None:
        return next((t.ts for t in reversed(self.turns) if t.ts), None)

    @property
    def tool_counts(self) -> Counter:
        return Counter(t.category for t in self.turns if t.role == "Tool")


def chunk_turns(turns: list[Turn], max_tokens: int = 350) -> list[Chunk]:
    """Consecutive turns, a new chunk at each user turn or when ``max_tokens`` would be passed."""
    chunks: list[Chunk] = []
    current: list[Turn] = []
    size = 0
    for t in turns:
        cost = tokens(t.text) + 2
        if current and (t.role == "User" or size + cost > max_tokens):
            chunks.append(Chunk(current))
            current, size = [], 0
        current.append(t)
        size += cost
    if current:
        chunks.append(Chunk(current))
    return chunks


def compact_chunks(chunks: list[Chunk], min_tokens: int = 60) -> list[Chunk]:
    """Fold chunks smaller than ``min_tokens`` into the one before, until that one reaches ``min_tokens``.

    A small chunk joins the previous one only while the previous is itself small (or the pair stays
    under twice ``min_tokens``), so a session of many short exchanges becomes several chunks, never one.
    """
    out: list[Chunk] = []
    for c in chunks:
        if out and (out[-1].tokens < min_tokens or
                    (c.tokens < min_tokens and out[-1].tokens + c.tokens <= 2 * min_tokens)):
            out[-1] = Chunk(out[-1].turns + c.turns)
        else:
            out.append(c)
    return out


def lexical_vectors(texts: list[str]) -> list[dict[str, float]]:
    """TF-IDF vectors (sparse, L2-normalised) over the given texts: the no-embedder similarity."""
    bags = [Counter(words(t)) for t in texts]
    df = Counter(w for bag in bags for w in bag)
    n = len(texts)
    out = []
    for bag in bags:
        vec = {w: (1 + math.log(c)) * math.log((1 + n) / (1 + df[w]) + 1) for w, c in bag.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        out.append({w: v / norm for w, v in vec.items()})
    return out


def cosine(a, b) -> float:
    if isinstance(a, dict):
        if len(a) > len(b):
            a, b = b, a
        return sum(v * b.get(w, 0.0) for w, v in a.items())
    return sum(x * y for x, y in zip(a, b, strict=False))


def _mean(a, b, wa: int, wb: int):
    if isinstance(a, dict):
        keys = set(a) | set(b)
        vec = {k: a.get(k, 0.0) * wa + b.get(k, 0.0) * wb for k in keys}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        return {k: v / norm for k, v in vec.items()}
    vec = [x * wa + y * wb for x, y in zip(a, b, strict=False)]
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


#: A merged chunk holds at most this share of the session, so merging never swallows the whole of it.
MAX_SHARE = 0.25


def merge_chunks(chunks: list[Chunk], vectors: list, threshold: float, max_tokens: int = 1500) -> list[Chunk]:
    """Merge each chunk into the one before while they are similar and the merge stays small.

    The merged chunk's vector is the size-weighted mean of its parts, so a run of chunks on one
    subject keeps absorbing its neighbours and a change of subject starts a new chunk. A merge stays
    under ``max_tokens`` and under a quarter of the session, and the session's last chunk is never
    merged into the one before: where the session ended is always a summary of its own.
    """
    if not chunks:
        return []
    total = sum(c.tokens for c in chunks)
    cap = min(max_tokens, max(int(total * MAX_SHARE), max((c.tokens for c in chunks), default=0)))
    out = [chunks[0]]
    vecs = [vectors[0]]
    last = len(chunks) - 1
    for i, (chunk, vec) in enumerate(zip(chunks[1:], vectors[1:], strict=True), start=1):
        prev = out[-1]
        if i != last and cosine(vecs[-1], vec) >= threshold and prev.tokens + chunk.tokens <= cap:
            vecs[-1] = _mean(vecs[-1], vec, prev.tokens, chunk.tokens)
            out[-1] = Chunk(prev.turns + chunk.turns)
        else:
            out.append(chunk)
            vecs.append(vec)
    return out
