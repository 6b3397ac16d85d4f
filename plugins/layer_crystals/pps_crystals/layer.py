"""Crystals as files: crystal_NNN.md in a rolling window; older ones archived, never lost."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from pydantic import Field

from pps_core import Layer, LayerHealth, PluginSettings, SearchResult
from pps_core.atomic import atomic_create
from pps_core.errors import Conflict, NotFound
from pps_core.textsearch import lexical_scores_tokens, tokens
from pps_core.timeutil import to_storage

NAME = re.compile(r"^crystal_(\d{3,})\.md$")


class CrystalSettings(PluginSettings, env_prefix="PPS_CRYSTALS_"):
    window: int = Field(4, ge=1, le=1000, description="crystals kept in the window; older ones are archived")
    directory: str = Field("crystals", description="folder under the entity's home")


class CrystalLayer(Layer):
    name = "crystallization"
    title = "Crystals"

    def __init__(self, memory) -> None:
        super().__init__()
        self.settings = memory.settings.plugin_settings(CrystalSettings, "crystals")
        self.dir = Path(memory.home) / self.settings.directory
        self.archive = self.dir / "archive"
        self.trash = self.dir / "deleted"
        self._cache: dict[Path, tuple[tuple[int, int], str, list[str]]] = {}

    async def open(self) -> None:
        for d in (self.dir, self.archive):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)

    # -- files --------------------------------------------------------------------------------

    @staticmethod
    def _numbered(folder: Path) -> list[tuple[int, Path]]:
        if not folder.is_dir():
            return []
        out = []
        for p in folder.iterdir():
            m = NAME.match(p.name)
            if m and p.is_file():
                out.append((int(m.group(1)), p))
        return sorted(out)

    def current(self) -> list[tuple[int, Path]]:
        return self._numbered(self.dir)

    def archived(self) -> list[tuple[int, Path]]:
        return self._numbered(self.archive)

    def create(self, content: str) -> Path:
        """Write the next crystal atomically (never overwriting), then roll the window."""
        while True:
            used = [n for n, _ in self.current() + self.archived() + self._numbered(self.trash)]
            number = (max(used) + 1) if used else 1
            path = self.dir / f"crystal_{number:03d}.md"
            if atomic_create(path, content):
                break
        self._roll()
        return path

    def _roll(self) -> None:
        cur = self.current()
        for _n, p in cur[: max(0, len(cur) - self.settings.window)]:
            os.replace(p, self.archive / p.name)

    def delete_newest(self) -> Path:
        cur = self.current()
        if not cur:
            raise NotFound("crystal_delete: there is no crystal to delete")
        _n, newest = cur[-1]
        self.trash.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.replace(newest, self.trash / newest.name)
        arch = self.archived()
        if arch and len(self.current()) < self.settings.window:  # refill the window from the archive
            os.replace(arch[-1][1], self.dir / arch[-1][1].name)
        return newest

    def newest(self, count: int) -> list[Path]:
        cur = [p for _n, p in self.current()]
        if count > len(cur):
            cur = [p for _n, p in self.archived()] + cur
        return cur[-count:] if count > 0 else []

    def _entry(self, path: Path) -> tuple[tuple[int, int], str, list[str]]:
        """File text and tokens, re-read only when mtime or size changed (a hand edit is seen at once)."""
        st = path.stat()
        key = (st.st_mtime_ns, st.st_size)
        hit = self._cache.get(path)
        if hit is None or hit[0] != key:
            text = _read(path)
            hit = (key, text, tokens(text))
            self._cache[path] = hit
        return hit

    def result(self, path: Path, score: float = 1.0) -> SearchResult:
        st = path.stat()
        return SearchResult(layer=self.name, content=_read(path), source=path.name, score=score,
                            timestamp=to_storage(_mtime(st.st_mtime)),
                            metadata={"kind": "document", "archived": path.parent == self.archive})

    # -- layer ----------------------------------------------------------------------------------

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        started = time.perf_counter()
        paths = [p for _n, p in self.archived() + self.current()]
        scored = lexical_scores_tokens(query, [self._entry(p)[2] for p in paths])
        ranked = sorted(((s, p) for p, s in zip(paths, scored, strict=True) if s > 0), key=lambda t: -t[0])
        self.record_latency(started)
        return [self.result(p, s) for s, p in ranked[offset: offset + limit]]

    async def recent(self, limit: int) -> list[SearchResult]:
        return [self.result(p) for p in self.newest(limit)]

    async def health(self) -> LayerHealth:
        if not self.dir.is_dir():
            return LayerHealth(layer=self.name, available=False, detail=f"{self.dir} is missing")
        return LayerHealth(layer=self.name, available=True, detail=str(self.dir),
                           counts={"crystals": len(self.current()), "archived": len(self.archived())},
                           latency_ms=self.recent_latency_ms)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise Conflict(f"{path.name} changed while being read; try again") from None


def _mtime(ts: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC)
