"""Rankers: post-processors that reorder one layer's results (freshness, diversity, novelty...)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .models import SearchResult


@runtime_checkable
class Ranker(Protocol):
    """Reorders (and may drop or trim) a layer's results for a query."""

    name: str

    def rerank(self, query: str, results: list[SearchResult], limit: int) -> list[SearchResult]: ...
