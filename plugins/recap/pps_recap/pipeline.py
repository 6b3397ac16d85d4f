"""The recap pipeline: collapse, chunk, embed + merge, summarize, score, select, restore order.

Scoring is recency (``(i + 1) / n``, biased toward the end of the session, where unfinished work
is), optionally multiplied by novelty against existing memories (``0.5 + 0.5 * novelty``, novelty in
[0, 1] from a caller-supplied function). Selection takes the session's last summary first, then the
best-scored ones while the whole rendered recap stays within the token budget, and puts them back in
chronological order. The recap ends with where the session ended (the agent's last words, the last
failure, the next step it stated; written by the LLM when there is one): ``**Where I left off**``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from .chunks import Chunk, chunk_turns, compact_chunks, lexical_vectors, merge_chunks, tokens
from .logs import Turn, read_log

#: Adjacent chunks at least this similar are merged (cosine of L2-normalised vectors).
EMBEDDING_THRESHOLD = 0.55
LEXICAL_THRESHOLD = 0.2
#: all-MiniLM-L6-v2 reads 256 word pieces at most (~1,000 characters): embedding more only costs time.
EMBED_CHARS = 1200


@dataclasses.dataclass
class RecapItem:
    index: int
    summary: str
    start: datetime | None
    end: datetime | None
    score: float
    consequential: int = 0


@dataclasses.dataclass
class Recap:
    text: str
    items: list[RecapItem]
    stats: dict
    start: int = 0  # the byte of the log it was read from (see store.readable_from)
    seen: float = 0.0  # the last forget it knew of (see store.forgotten_marks): a later one makes it stale

    @property
    def tokens(self) -> int:
        return tokens(self.text)


def _when(item: RecapItem, tz: ZoneInfo, day_shown: set[str]) -> str:
    if item.start is None:
        return ""
    start, end = item.start.astimezone(tz), (item.end or item.start).astimezone(tz)
    day = start.strftime("%Y-%m-%d")
    label = start.strftime("%H:%M") if day in day_shown else f"{day} {start.strftime('%H:%M')}"
    day_shown.add(day)
    if end.strftime("%H:%M") != start.strftime("%H:%M"):
        label += "–" + end.strftime("%H:%M")
    return f"**[{label}]** "


def render(items: list[RecapItem], tz: ZoneInfo, source: str, turns: int, tools: int,
           end_state: str = "", ended: datetime | None = None) -> str:
    """The markdown of ``_recap.md``: a header line, one bullet per summary, oldest first, and last where
    the session ended (``end_state``)."""
    starts = [i.start for i in items if i.start]
    ends = [i.end or i.start for i in items if i.start]
    span = ""
    if starts:
        span = f", {min(starts).astimezone(tz).strftime('%Y-%m-%d %H:%M')}–" \
               f"{max(ends).astimezone(tz).strftime('%H:%M %Z')}"
    lines = [f"# Last session recap\n_{source}{span}; {turns} turns, {tools} tool calls_\n"]
    shown: set[str] = set()
    lines += [f"- {_when(i, tz, shown)}{i.summary}" for i in items]
    if end_state:
        when = f" ({ended.astimezone(tz).strftime('%H:%M')})" if ended else ""
        lines.append(f"- **Where I left off**{when}: {end_state}")
    return "\n".join(lines)


def select(items: list[RecapItem], budget: int, compose: Callable[[list[RecapItem]], str]) -> list[RecapItem]:
    """Best-scored items whose rendering fits ``budget`` tokens, in chronological order; the session's
    last item first of all (where it ended is the unfinished work), cut to fit if it must be."""
    chosen: list[RecapItem] = []
    newest = max(items, key=lambda i: i.index, default=None)
    if newest is not None and tokens(compose([newest])) <= budget:
        chosen = [newest]
    for item in sorted(items, key=lambda i: (-i.score, -i.index)):
        if item in chosen:
            continue
        trial = sorted(chosen + [item], key=lambda i: i.index)
        if tokens(compose(trial)) <= budget:
            chosen = trial
    if not chosen and items:  # not even one fits: the newest, cut to the budget
        best = max(items, key=lambda i: i.index)
        room = max(0, budget * 4 - len(compose([dataclasses.replace(best, summary="")])) - 4)
        chosen = [dataclasses.replace(best, summary=best.summary[:room].rstrip() + "...")] if room > 20 else []
    return chosen


def generate(source: Path | list[Turn], *, budget: int = 1000, summarizer, embedder=None,
             novelty: Callable[[list[str]], list[float]] | None = None, tz: ZoneInfo | None = None,
             chunk_tokens: int = 350, merge_threshold: float | None = None, workers: int = 4,
             progress: Callable[[str, int, int], None] | None = None, start: int = 0,
             skip: frozenset[str] | set[str] = frozenset(), seen: float = 0.0) -> Recap:
    """A recap of one session log (a path, read from byte ``start``, without the entries whose digests are in
    ``skip``: what was forgotten) or of an already collapsed narrative."""
    tz = tz or ZoneInfo("UTC")
    name = Path(source).name if isinstance(source, str | Path) else "session"
    turns = read_log(Path(source), start, skip) if isinstance(source, str | Path) else list(source)
    tools = sum(1 for t in turns if t.role == "Tool")
    stats = {"source": str(source) if isinstance(source, str | Path) else None, "turns": len(turns),
             "tool_calls": tools, "summarizer": getattr(summarizer, "name", type(summarizer).__name__),
             "similarity": "embeddings" if embedder is not None else "lexical"}
    chunks = compact_chunks(chunk_turns(turns, chunk_tokens))
    stats["chunks"] = len(chunks)
    if len(chunks) >= 2:
        texts = [c.text[:EMBED_CHARS] for c in chunks]
        if embedder is not None:
            vectors = embedder.embed(texts)
            threshold = EMBEDDING_THRESHOLD if merge_threshold is None else merge_threshold
        else:
            vectors = lexical_vectors(texts)
            threshold = LEXICAL_THRESHOLD if merge_threshold is None else merge_threshold
        chunks = merge_chunks(chunks, vectors, threshold)
    stats["merged_chunks"] = len(chunks)
    summaries = _summarize(chunks, summarizer, workers, progress)
    failures = getattr(summarizer, "failures", None)
    if failures:
        stats["llm_failures"] = len(failures)
        stats["llm_last_error"] = failures[-1]
    n = len(summaries)
    scores = [(i + 1) / n for i in range(n)]
    if novelty is not None and n:
        scores = [s * (0.5 + 0.5 * max(0.0, min(1.0, v))) for s, v in zip(scores, novelty(summaries), strict=True)]
        stats["novelty"] = True
    items = [RecapItem(i, s, c.start, c.end, round(sc, 4), c.tool_counts.get("consequential", 0))
             for i, (s, c, sc) in enumerate(zip(summaries, chunks, scores, strict=True)) if s.strip()]

    end_state = ""
    if turns and hasattr(summarizer, "end_state"):
        end_state = summarizer.end_state(turns)
        stats["end_state"] = getattr(summarizer, "end_state_kind", "extractive")
        room = budget * 4 // 2  # the end state never takes more than half the budget
        if len(end_state) > room:
            end_state = end_state[:max(0, room - 3)].rstrip() + "..."
    ended = next((t.ts for t in reversed(turns) if t.ts), None)

    def compose(chosen: list[RecapItem]) -> str:
        return render(chosen, tz, name, len(turns), tools, end_state, ended)

    chosen = select(items, budget, compose)
    if not chosen and end_state:  # a budget too small for both: the summaries win
        end_state = ""
        stats.pop("end_state", None)
        chosen = select(items, budget, compose)
    text = compose(chosen) if chosen else ""
    stats.update(selected=len(chosen), summaries=n, tokens=tokens(text), budget=budget)
    return Recap(text, chosen, stats, start, seen)


def _summarize(chunks: list[Chunk], summarizer, workers: int, progress) -> list[str]:
    done = 0
    out: list[str] = [""] * len(chunks)

    def one(i: int) -> None:
        out[i] = summarizer.summarize(chunks[i])

    if getattr(summarizer, "name", "") == "llm" and workers > 1 and len(chunks) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for _ in pool.map(one, range(len(chunks))):
                done += 1
                if progress:
                    progress("summarize", done, len(chunks))
    else:
        for i in range(len(chunks)):
            one(i)
            if progress:
                progress("summarize", i + 1, len(chunks))
    return out
